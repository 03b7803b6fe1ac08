package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindClient: gpuscope top and capture run the gpuscope-client beside
// the binary (through a symlink to it too), else the one on PATH, and say
// what to install when there is none.
func TestFindClient(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "gpuscope")
	beside := filepath.Join(dir, clientBinary)
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	link := filepath.Join(t.TempDir(), "gpuscope")
	require.NoError(t, os.Symlink(exe, link))
	onPath := func(string) (string, error) { return "/usr/local/bin/" + clientBinary, nil }
	notOnPath := func(string) (string, error) { return "", &exec.Error{Name: clientBinary, Err: exec.ErrNotFound} }
	self := func(p string) func() (string, error) { return func() (string, error) { return p, nil } }

	tests := []struct {
		name    string
		install bool
		self    func() (string, error)
		look    func(string) (string, error)
		want    string
		err     string
	}{
		{"beside", true, self(exe), notOnPath, beside, ""},
		{"beside the symlink's target", true, self(link), notOnPath, beside, ""},
		{"on PATH", false, self(exe), onPath, "/usr/local/bin/" + clientBinary, ""},
		{"no executable path", false, func() (string, error) { return "", errors.New("no") }, onPath, "/usr/local/bin/" + clientBinary, ""},
		{"nowhere", false, self(exe), notOnPath, "", "gpuscope-client is neither beside gpuscope nor on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = os.Remove(beside)
			if tt.install {
				require.NoError(t, os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755))
			}
			got, err := findClient(tt.self, tt.look)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

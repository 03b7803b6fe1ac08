package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
)

func migCapture(t *testing.T) string {
	t.Helper()
	for _, f := range smicapture.TestFiles(t) {
		if strings.Contains(filepath.Base(f), "-mig__") {
			return f
		}
	}
	t.Fatal("no MIG capture among the shared captures")
	return ""
}

func TestExitCodesAndOutput(t *testing.T) {
	good := migCapture(t)
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	// A MIG device with an SM count no H100 profile has: the profile the
	// source derives cannot be the capture's.
	bad := filepath.Join(t.TempDir(), "odd-mig.txt")
	require.NoError(t, os.WriteFile(bad, bytes.Replace(b, []byte("Multiprocessor count                   : 60"),
		[]byte("Multiprocessor count                   : 61"), 1), 0o600))
	empty := filepath.Join(t.TempDir(), "empty.txt")
	require.NoError(t, os.WriteFile(empty, []byte("nothing\n"), 0o600))

	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   []string
		stderr   []string
		noStdout bool
	}{
		{"agrees", []string{good}, 0, []string{"FIELD", "GPU_I_PROFILE", "3g.40gb", "DCGM_FI_DEV_FB_TOTAL"}, []string{"every field of 1 file(s) agrees"}, false},
		{"quiet", []string{"-quiet", good}, 0, nil, []string{"agrees"}, true},
		{"differs", []string{"-quiet", bad}, 1, nil, []string{"MISMATCH odd-mig.txt idle gpu0/gi2 GPU_I_PROFILE: capture \"(unknown: 61 SMs"}, true},
		{"not a capture", []string{empty}, 2, nil, []string{"empty.txt", "no `nvidia-smi -q` section"}, true},
		{"no file", nil, 2, nil, []string{"usage"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tc.code, run(tc.args, &out, &errOut), errOut.String())
			for _, s := range tc.stdout {
				assert.Contains(t, out.String(), s)
			}
			for _, s := range tc.stderr {
				assert.Contains(t, errOut.String(), s)
			}
			if tc.noStdout {
				assert.Empty(t, out.String())
			}
		})
	}
}

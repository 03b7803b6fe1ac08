package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoToolBuildCachesByModuleAndFlags runs lib/gotool.sh's gotool_build
// on a small module of its own: the first call builds and prints the
// binary's path, a second returns the same path without building, a
// reworded comment in go.mod keeps it, and other build flags build anew.
func TestGoToolBuildCachesByModuleAndFlags(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	lib, err := filepath.Abs(filepath.Join("lib", "gotool.sh"))
	require.NoError(t, err)
	dir := t.TempDir()
	mod := filepath.Join(dir, "tool")
	require.NoError(t, os.Mkdir(mod, 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644))
	}
	write("go.mod", "// A tool.\nmodule example.com/tool\n\ngo 1.22\n")
	write("go.sum", "")
	write("main.go", "package main\n\nfunc main() {}\n")

	build := func(key string, flags ...string) (path, log string) {
		t.Helper()
		script := `. "$1"; shift; gotool_build tool tool example.com/tool v1.0.0 "a second" "$@"`
		cmd := exec.Command(bash, append([]string{"-c", script, "gotool", lib, key}, flags...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GPUSCOPE_CACHE="+filepath.Join(dir, "cache"), "GOFLAGS=")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s", stderr.String())
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1], stderr.String()
	}

	first, log := build("")
	require.Contains(t, log, "Building tool v1.0.0", "the first call builds")
	require.FileExists(t, first)
	again, log := build("")
	require.Equal(t, first, again)
	require.Contains(t, log, "already built")

	write("go.mod", "// A tool, reworded.\nmodule example.com/tool\n\ngo 1.22\n")
	reworded, log := build("")
	require.Equal(t, first, reworded, "a comment is not a requirement")
	require.Contains(t, log, "already built")

	flagged, log := build("-ldflags=-s", "-ldflags=-s")
	require.NotEqual(t, first, flagged, "other build flags are another binary")
	require.Contains(t, log, "Building tool v1.0.0")
}

// TestGoToolBuildsSeveralCommandsInOneStep: gotool_build with two packages
// builds both into one cache folder in one go build, prints the path of the
// one named after the tool, and builds again when one of them is missing.
func TestGoToolBuildsSeveralCommandsInOneStep(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	lib, err := filepath.Abs(filepath.Join("lib", "gotool.sh"))
	require.NoError(t, err)
	dir := t.TempDir()
	mod := filepath.Join(dir, "tool")
	for _, d := range []string{"cmd/server", "cmd/client"} {
		require.NoError(t, os.MkdirAll(filepath.Join(mod, d), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(mod, d, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/tool\n\ngo 1.22\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), nil, 0o644))

	build := func() (path, log string) {
		t.Helper()
		script := `. "$1"; gotool_build server tool "example.com/tool/cmd/server example.com/tool/cmd/client" v1.0.0 "a second" ""`
		cmd := exec.Command(bash, "-c", script, "gotool", lib)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GPUSCOPE_CACHE="+filepath.Join(dir, "cache"), "GOFLAGS=")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s", stderr.String())
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1], stderr.String()
	}
	server, log := build()
	require.Contains(t, log, "Building server v1.0.0")
	require.Equal(t, "server", filepath.Base(server))
	client := filepath.Join(filepath.Dir(server), "client")
	require.FileExists(t, server)
	require.FileExists(t, client)
	entries, err := os.ReadDir(filepath.Dir(server))
	require.NoError(t, err)
	require.Len(t, entries, 2, "no build folder is left behind")

	_, log = build()
	require.Contains(t, log, "already built")
	require.NoError(t, os.Remove(client))
	_, log = build()
	require.Contains(t, log, "Building server v1.0.0", "a missing binary builds the step again")
	require.FileExists(t, client)
}

// TestGoToolRefusesAPackageWithoutAName: a binary is named after its
// package path's last element, so a relative path such as "." (which would
// leave nothing to move into the cache) is refused at once, naming it.
func TestGoToolRefusesAPackageWithoutAName(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	lib, err := filepath.Abs(filepath.Join("lib", "gotool.sh"))
	require.NoError(t, err)
	for _, pkg := range []string{".", "..", "./", "example.com/tool/.."} {
		t.Run(pkg, func(t *testing.T) {
			dir := t.TempDir()
			script := `. "$1"; gotool_build tool . "$2" v1.0.0 "a second" ""`
			cmd := exec.Command(bash, "-c", script, "gotool", lib, pkg)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GPUSCOPE_CACHE="+filepath.Join(dir, "cache"))
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "%s", out)
			assert.Contains(t, string(out), pkg+": name each package by its import path")
			assert.NoDirExists(t, filepath.Join(dir, "cache"), "nothing is built")
		})
	}
}

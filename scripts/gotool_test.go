package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

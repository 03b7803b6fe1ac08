package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// build compiles gpuscope-cudaload and the fake libcuda.so.1 (testdata/
// fakecuda.c) into one folder, once per test process, and returns the
// binary and the folder.
func build(t *testing.T) (bin, libDir string) {
	t.Helper()
	cc := e2etest.RequireTool(t, "cc")
	buildOnce.Do(func() { buildDir, buildErr = buildFake(cc) })
	require.NoError(t, buildErr)
	return filepath.Join(buildDir, "gpuscope-cudaload"), buildDir
}

func buildFake(cc string) (string, error) {
	dir, err := os.MkdirTemp("", "gpuscope-cudaload-test-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", filepath.Join(dir, "libcuda.so.1"), filepath.Join("testdata", "fakecuda.c")).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the fake libcuda.so.1: %w\n%s", err, out)
	}
	flags, err := e2etest.BuildFlags(e2etest.RepoRoot())
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", filepath.Join(dir, "gpuscope-cudaload"), ".")...)
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err = cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
}

type fakeRun struct {
	stdout, stderr string
	code           int
	calls          []string // the fake's log, one call a line
	summary        Summary
}

func runFake(t *testing.T, bin, libDir string, env []string, args ...string) fakeRun {
	t.Helper()
	log := filepath.Join(t.TempDir(), "calls.log")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "LD_LIBRARY_PATH="+libDir, "FAKECUDA_LOG="+log), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := fakeRun{stdout: so.String(), stderr: se.String(), code: cmd.ProcessState.ExitCode()}
	if err != nil && r.code < 0 {
		t.Fatalf("gpuscope-cudaload: %v", err)
	}
	if b, err := os.ReadFile(log); err == nil {
		r.calls = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code == 0 {
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &r.summary), "the last line is the JSON summary:\n%s", r.stdout)
	}
	return r
}

// count counts the fake's log lines of one call.
func count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, name+" ") {
			n++
		}
	}
	return n
}

func index(t *testing.T, calls []string, prefix string) int {
	t.Helper()
	for i, c := range calls {
		if strings.HasPrefix(c, prefix) {
			return i
		}
	}
	t.Fatalf("no call %q in the fake's log:\n%s", prefix, strings.Join(calls, "\n"))
	return -1
}

// The load as the driver sees it: initialised, the primary context made
// current before any memory or module, the PTX compiled, 8 GiB held and
// filled, the FMA kernel launched over every SM and copies made, and all of
// it given back in reverse order before the context is released. The
// summary adds up to what the driver was asked for.
func TestLoadThroughTheDriverAPI(t *testing.T) {
	bin, lib := build(t)
	r := runFake(t, bin, lib, nil, "--duration", "300ms", "--copy-mib", "4")
	require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
	assert.Regexp(t, `(?m)^ready pid=\d+ device=0 name="Fake H200" sms=132 allocated_bytes=8589934592$`, r.stdout)

	c := r.calls
	assert.Equal(t, "cuInit flags=0 rc=0", c[0])
	ctx := index(t, c, "cuCtxSetCurrent")
	assert.Less(t, ctx, index(t, c, "cuModuleLoadData"))
	assert.Less(t, ctx, index(t, c, "cuMemAlloc_v2 bytes=8589934592 "))
	assert.Less(t, index(t, c, "cuMemAlloc_v2"), index(t, c, "cuMemsetD32_v2 ptr=0x7f0000000000 value=0x3f800000 bytes=8589934592 "), "the whole buffer filled")
	assert.Contains(t, c, "cuModuleGetFunction name=fma_loop rc=0")
	assert.Equal(t, index(t, c, "cuLaunchKernel grid=1056x1x1 block=256x1x1 n=270336 "), index(t, c, "cuLaunchKernel"), "8 blocks of 256 threads per SM, one float each")
	assert.Equal(t, "cuDevicePrimaryCtxRelease_v2 device=0 held=8589934592 rc=0", c[len(c)-1])
	for _, freed := range []string{"cuMemFreeHost", "cuMemFree_v2", "cuModuleUnload"} {
		assert.Less(t, index(t, c, "cuLaunchKernel"), index(t, c, freed))
	}

	s := r.summary
	assert.Equal(t, "gpuscope-cudaload", s.ProcessName)
	assert.Positive(t, s.PID)
	assert.Equal(t, uint64(8<<30), s.AllocatedBytes)
	assert.Equal(t, count(c, "cuLaunchKernel"), s.Kernels)
	assert.Equal(t, uint64(count(c, "cuMemcpyHtoD_v2"))*4<<20, s.H2DBytes)
	assert.Positive(t, s.Kernels)
	assert.InDelta(t, 0.3, s.ElapsedSeconds, 0.25)
	assert.InDelta(t, float64(s.H2DBytes)/s.ElapsedSeconds, s.H2DBytesPerSecond, 1)
	// The fake takes 1 ms a launch whatever the loop count, so the loop
	// grows to its cap: the calibration never stops short of the target.
	assert.Equal(t, uint32(maxIters), s.KernelIters)
}

// Each failure names the call or the flag, exits 1, and prints no "ready"
// line, so the check does not wait on a load that never started.
func TestLoadFailuresSayWhatFailed(t *testing.T) {
	bin, lib := build(t)
	cases := []struct {
		name   string
		libDir string
		env    []string
		args   []string
		want   string
	}{
		{"no driver", t.TempDir(), nil, nil, "libcuda.so.1 (the NVIDIA driver's CUDA library): libcuda.so.1: cannot open shared object file"},
		{"out of memory", lib, []string{"FAKECUDA_FAIL=cuMemAlloc_v2"}, nil, "cuMemAlloc_v2(8589934592 bytes): CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"pinned memory", lib, []string{"FAKECUDA_FAIL=cuMemAllocHost_v2"}, nil, "cuMemAllocHost_v2(268435456 bytes): CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"cuInit", lib, []string{"FAKECUDA_FAIL=cuInit"}, nil, "cuInit: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"no such device", lib, nil, []string{"--device", "3"}, "--device 3: the driver lists 1 CUDA devices"},
		{"too little memory", lib, nil, []string{"--memory-gib", "0.25"}, "--memory-gib 0.25: at least twice --copy-mib (256 MiB) is needed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runFake(t, bin, tc.libDir, tc.env, append([]string{"--duration", "100ms"}, tc.args...)...)
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "gpuscope-cudaload: "+tc.want)
			assert.NotContains(t, r.stdout, "ready")
		})
	}
}

// SIGTERM (what the check sends when its time is up) ends the load early
// and cleanly: the summary still comes, and the memory is given back.
func TestLoadStopsOnSIGTERM(t *testing.T) {
	bin, lib := build(t)
	log := filepath.Join(t.TempDir(), "calls.log")
	cmd := exec.Command(bin, "--duration", "10m", "--copy-mib", "4")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib, "FAKECUDA_LOG="+log)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "no ready line")
	require.True(t, strings.HasPrefix(sc.Text(), "ready "), sc.Text())
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.True(t, sc.Scan(), "no summary after SIGTERM")
	var s Summary
	require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
	require.NoError(t, cmd.Wait())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Less(t, s.ElapsedSeconds, 60.0)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Contains(t, string(b), "cuMemFree_v2 ptr=0x7f0000000000 rc=0")
}

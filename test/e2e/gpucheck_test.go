package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

var (
	bundleOnce sync.Once
	bundleDir  string
	bundleErr  error
)

// gpuCheckBundle builds `make gpu-check-bundle` once per test process and
// returns the bundle unpacked from its tarball, as a GPU machine gets it.
func gpuCheckBundle(t *testing.T) string {
	t.Helper()
	bundleOnce.Do(func() { bundleDir, bundleErr = buildBundle() })
	require.NoError(t, bundleErr)
	return bundleDir
}

func buildBundle() (string, error) {
	dir, err := os.MkdirTemp("", "gpuscope-gpu-check-")
	if err != nil {
		return "", err
	}
	bundle := filepath.Join(dir, "gpu-check")
	cmd := exec.Command("make", "--no-print-directory", "gpu-check-bundle", "GPU_CHECK_BUNDLE="+bundle)
	cmd.Dir = e2etest.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make gpu-check-bundle: %w\n%s", err, out)
	}
	unpacked := filepath.Join(dir, "unpacked")
	if err := os.Mkdir(unpacked, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command("tar", "-C", unpacked, "-xzf", bundle+".tar.gz").CombinedOutput(); err != nil {
		return "", fmt.Errorf("unpacking the bundle: %w\n%s", err, out)
	}
	return filepath.Join(unpacked, "gpu-check"), nil
}

// pathWithoutGo is $PATH less every folder that holds a go command: the
// GPU machine has none.
func pathWithoutGo(t *testing.T) string {
	t.Helper()
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "go")); err != nil {
			keep = append(keep, d)
		}
	}
	p := strings.Join(keep, string(os.PathListSeparator))
	cmd := exec.Command("bash", "-c", "command -v go")
	cmd.Env = []string{"PATH=" + p}
	require.Error(t, cmd.Run(), "go is still on %s", p)
	return p
}

// TestGPUCheckBundleRunsWithoutGo unpacks the bundle of `make
// gpu-check-bundle` and runs its scripts/gpu-check.sh with no Go on the
// path, on simulated GPUs: the preflight's glibc verdict, each run as the
// calling user and (as root) again as uid 65534, the soak and the report
// file, so the script and the bundle cannot rot where no GPU is. The sim
// stands in for NVML (no cross-check against nvidia-smi, no load there);
// the checks those make are tested in internal/client/gpucheck.
func TestGPUCheckBundleRunsWithoutGo(t *testing.T) {
	e2etest.RequireTool(t, "curl")
	bundle := gpuCheckBundle(t)
	out := t.TempDir()
	_, port, err := net.SplitHostPort(e2etest.FreePort(t))
	require.NoError(t, err)
	cmd := exec.Command("bash", filepath.Join(bundle, "scripts", "gpu-check.sh"))
	cmd.Env = append(os.Environ(), "PATH="+pathWithoutGo(t), "OUT="+out, "GPU_CHECK_SOURCE=sim", "GPU_CHECK_RUN_S=1",
		"GPU_CHECK_SOAK_S=3", "GPU_CHECK_SOAK_EVERY_S=1", "GPU_CHECK_PORT="+port)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "gpu-check.sh from the bundle failed:\n%s", b)
	report, err := os.ReadFile(filepath.Join(out, "gpu-check-report.txt"))
	require.NoError(t, err)
	r := string(report)
	assert.Regexp(t, `(?m)^preflight +- +ok +glibc \d+\.\d+$`, r)
	assert.Regexp(t, `(?m)^gpuscope-cudaload +needs glibc \d+\.\d+ +host \d+\.\d+ +ok$`, r)
	assert.Contains(t, r, "binaries="+filepath.Join(bundle, "bin"))
	users := []string{"root"}
	if os.Getuid() == 0 && e2etest.RequireTool(t, "setpriv") != "" {
		users = append(users, "nonroot")
		assert.Regexp(t, `(?m)^gpuscope \(default-nonroot\) pid \d+ serves as uid 65534$`, r)
	}
	if os.Getuid() != 0 {
		users[0] = currentUser(t)
	}
	for _, u := range users {
		for _, run := range []string{"default", "all-fields", "profiling"} {
			assert.Regexp(t, `(?m)^run `+run+` +`+u+` +ok +checked \d+ series, \d+ fields on 8 GPUs: 0 failed`, r)
			assert.FileExists(t, filepath.Join(out, run+"-"+u+"-metrics.txt"))
		}
	}
	assert.Regexp(t, `(?m)^soak +\S+ +ok +checked \d+ series, 0 fields on 8 GPUs: 0 failed`, r)
	assert.Regexp(t, `(?m)^NOTE soak +process_resident_memory_bytes: first [\d.]+ MiB, .* 3 scrapes$`, r)
	assert.Regexp(t, `(?m)^load +- +skipped +simulated GPUs cannot be loaded$`, r)
}

func currentUser(t *testing.T) string {
	t.Helper()
	b, err := exec.Command("id", "-un").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestGPUCheckLoadGeneratorFromTheBundle runs the bundle's
// gpuscope-cudaload, with no Go on the path, against the fake
// libcuda.so.1 of its own tests (cmd/gpuscope-cudaload/testdata): the
// binary a GPU machine runs loads the library by its soname, compiles the
// embedded PTX through it and prints the summary the check reads.
func TestGPUCheckLoadGeneratorFromTheBundle(t *testing.T) {
	cc := e2etest.RequireTool(t, "cc")
	bundle := gpuCheckBundle(t)
	lib := t.TempDir()
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(lib, "libcuda.so.1"),
		filepath.Join(e2etest.RepoRoot(), "cmd", "gpuscope-cudaload", "testdata", "fakecuda.c")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(filepath.Join(bundle, "bin", "gpuscope-cudaload"), "--duration", "200ms", "--copy-mib", "4")
	cmd.Env = append(os.Environ(), "PATH="+pathWithoutGo(t), "LD_LIBRARY_PATH="+lib)
	b, err := cmd.Output()
	require.NoError(t, err, "%s", b)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2, "a ready line and the summary:\n%s", b)
	assert.Regexp(t, `^ready pid=\d+ device=0 name="Fake H200" sms=132 allocated_bytes=8589934592$`, lines[0])
	var sum struct {
		ProcessName    string  `json:"process_name"`
		AllocatedBytes uint64  `json:"allocated_bytes"`
		Kernels        int     `json:"kernels"`
		H2DBytes       uint64  `json:"h2d_bytes"`
		H2DRate        float64 `json:"h2d_bytes_per_second"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &sum))
	assert.Equal(t, "gpuscope-cudaload", sum.ProcessName)
	assert.Equal(t, uint64(8<<30), sum.AllocatedBytes)
	assert.Positive(t, sum.Kernels)
	assert.Positive(t, sum.H2DBytes)
	assert.Positive(t, sum.H2DRate)
}

func TestGPUCheckScriptRefusesAnUnknownSource(t *testing.T) {
	cmd := exec.Command("bash", filepath.Join(e2etest.RepoRoot(), "scripts", "gpu-check.sh"))
	cmd.Env = append(os.Environ(), "OUT="+t.TempDir(), "GPU_CHECK_SOURCE=dcgmx")
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 2, exit.ExitCode())
	require.Contains(t, string(b), "GPU_CHECK_SOURCE must be nvml or sim, not dcgmx")
}

// fakeNVML builds the fake libnvidia-ml.so.1 of testdata/fakenvml for the
// gpuscope binary given: the H200 of fakenvml.c, and every other NVML
// symbol the binary imports (nm) answering NVML_ERROR_NOT_SUPPORTED. It
// returns a folder a non-root user can read, holding the library, the
// fake libcuda.so.1 of gpuscope-cudaload's tests (the two share the load's
// state through state/load), and in bin/ the fake nvidia-smi.
func fakeNVML(t *testing.T, gpuscope string) string {
	t.Helper()
	cc := e2etest.RequireTool(t, "cc")
	nm := e2etest.RequireTool(t, "nm")
	dir, err := os.MkdirTemp("", "gpuscope-fakenvml-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	gonvml, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
	require.NoError(t, err)
	src := filepath.Join(e2etest.RepoRoot(), "test", "e2e", "testdata", "fakenvml")
	impl, err := os.ReadFile(filepath.Join(src, "fakenvml.c"))
	require.NoError(t, err)
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(?:nvmlReturn_t|const char \*)\s*(nvml\w+)\(`).FindAllStringSubmatch(string(impl), -1) {
		defined[m[1]] = true
	}
	syms, err := exec.Command(nm, "-D", "--undefined-only", gpuscope).Output()
	require.NoError(t, err)
	var stubs strings.Builder
	n := 0
	for _, line := range strings.Split(string(syms), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasPrefix(f[1], "nvml") && !defined[f[1]] {
			fmt.Fprintf(&stubs, "int %s(void) { return 3; /* NVML_ERROR_NOT_SUPPORTED */ }\n", f[1])
			n++
		}
	}
	require.Greater(t, n, 100, "gpuscope imports NVML's entry points by name:\n%s", syms)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stubs.c"), []byte(stubs.String()), 0o644))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-Wall", "-Werror", "-Wno-deprecated-declarations",
		"-I", filepath.Join(strings.TrimSpace(string(gonvml)), "pkg", "nvml"),
		"-o", filepath.Join(dir, "libnvidia-ml.so.1"), filepath.Join(src, "fakenvml.c"), filepath.Join(dir, "stubs.c")).CombinedOutput()
	require.NoError(t, err, "building the fake libnvidia-ml.so.1:\n%s", out)
	out, err = exec.Command(cc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", filepath.Join(dir, "libcuda.so.1"),
		filepath.Join(e2etest.RepoRoot(), "cmd", "gpuscope-cudaload", "testdata", "fakecuda.c")).CombinedOutput()
	require.NoError(t, err, "building the fake libcuda.so.1:\n%s", out)
	// The load runs as the non-root user and writes its state here.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "state"), 0o777))
	require.NoError(t, os.Chmod(filepath.Join(dir, "state"), 0o777))
	smi, err := os.ReadFile(filepath.Join(src, "nvidia-smi"))
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", "nvidia-smi"), smi, 0o755))
	return dir
}

// TestGPUCheckBundleOnAFakeNVML runs the bundle's gpu-check.sh through
// gpuscope's real NVML source (go-nvml, dlopen and all) against a fake
// libnvidia-ml.so.1 that serves the idle H200 of a real capture, with a
// fake nvidia-smi that answers from the same capture: each run, as root
// and as uid 65534, must match nvidia-smi field by field in
// dcgm-exporter's units, and the soak must see no failed read and no lost
// GPU. The load runs gpuscope-cudaload on the fake libcuda.so.1, which
// tells the fake NVML what a driver would show of it: this proves the
// phase's plumbing (ready line, scrapes, process, judgement), not the
// numbers of a real GPU, which only a GPU machine can.
func TestGPUCheckBundleOnAFakeNVML(t *testing.T) {
	e2etest.RequireTool(t, "curl")
	capture := filepath.Join(compattest.Dir(t), "..", "nvidia-smi-captures", "linux-x86_64__nvidia-h200__590.48.01.txt")
	require.FileExists(t, capture)
	bundle := gpuCheckBundle(t)
	fake := fakeNVML(t, filepath.Join(bundle, "bin", "gpuscope"))
	out := t.TempDir()
	_, port, err := net.SplitHostPort(e2etest.FreePort(t))
	require.NoError(t, err)
	cmd := exec.Command("bash", filepath.Join(bundle, "scripts", "gpu-check.sh"))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(fake, "bin")+string(os.PathListSeparator)+pathWithoutGo(t),
		"LD_LIBRARY_PATH="+fake, "FAKE_SMI_CAPTURE="+capture, "FAKEGPU_STATE="+filepath.Join(fake, "state", "load"),
		"OUT="+out, "GPU_CHECK_RUN_S=1", "GPU_CHECK_SOAK_S=3", "GPU_CHECK_SOAK_EVERY_S=1", "GPU_CHECK_LOAD_S=11", "GPU_CHECK_PORT="+port)
	b, err := cmd.CombinedOutput()
	if err != nil {
		// The report's tables name the field that failed.
		rep, _ := os.ReadFile(filepath.Join(out, "gpu-check-report.txt"))
		require.NoError(t, err, "gpu-check.sh on the fake NVML failed:\n%s\nreport:\n%s", b, rep)
	}
	report, err := os.ReadFile(filepath.Join(out, "gpu-check-report.txt"))
	require.NoError(t, err)
	r := string(report)
	users := []string{currentUser(t)}
	if os.Getuid() == 0 && e2etest.RequireTool(t, "setpriv") != "" {
		users = append(users, "nonroot")
	}
	for _, u := range users {
		for _, run := range []string{"default", "all-fields", "profiling"} {
			assert.Regexp(t, `(?m)^run `+run+` +`+u+` +ok +checked \d+ series, \d+ fields on 1 GPUs: 0 failed`, r)
		}
	}
	// The all-fields run compares every field nvidia-smi reports; the
	// capture's N/A fan speed must be absent, its MiB, W and MHz equal.
	for _, row := range []string{
		`0 +DCGM_FI_DEV_POWER_USAGE +77\.71 W +77\.71 +ok`,
		`0 +DCGM_FI_DEV_FB_TOTAL +143771 MiB +143771 +ok`,
		`0 +DCGM_FI_DEV_FB_RESERVED +614 MiB +614 +ok`,
		`0 +DCGM_FI_DEV_MAX_SM_CLOCK +1980 MHz +1980 +ok`,
		`0 +DCGM_FI_DEV_MEMORY_TEMP +32 +32 +ok`,
		`0 +DCGM_FI_DEV_FAN_SPEED +\[N/A\] +\(absent\) +ok`,
		`0 +DCGM_FI_DEV_PSTATE +P0 +0 +ok`,
		`0 +pci_bus_id +00000000:83:00\.0 +00000000:83:00\.0 +ok`,
	} {
		assert.Regexp(t, `(?m)^`+row+`$`, r)
	}
	assert.NotContains(t, r, "DIFFERS")

	// The same scrape held against the capture's loaded GPU (power 627 W,
	// 32 GiB used) must fail, naming the fields that differ: the
	// cross-check above could have failed.
	loaded := filepath.Join(out, "loaded-smi.csv")
	query, err := exec.Command(filepath.Join(bundle, "bin", "gpuscope-gpucheck"), "smi-query").Output()
	require.NoError(t, err)
	smi := exec.Command(filepath.Join(fake, "bin", "nvidia-smi"), "--query-gpu="+strings.TrimSpace(string(query)), "--format=csv")
	smi.Env = append(os.Environ(), "FAKE_SMI_CAPTURE="+capture, "FAKE_SMI_SECTION=2")
	answer, err := smi.Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(loaded, answer, 0o644))
	u := users[0]
	check := exec.Command(filepath.Join(bundle, "bin", "gpuscope-gpucheck"), "--metrics", filepath.Join(out, "all-fields-"+u+"-metrics.txt"),
		"--collectors", filepath.Join(bundle, "etc", "default-counters.csv"), "--nvidia-smi-before", loaded)
	b, err = check.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", b)
	assert.Regexp(t, `(?m)^0 +DCGM_FI_DEV_POWER_USAGE +627\.40 W +77\.71 +DIFFERS$`, string(b))
	assert.Regexp(t, `(?m)^0 +DCGM_FI_DEV_FB_USED +32362 MiB +0 +DIFFERS$`, string(b))
	assert.Regexp(t, `(?m)^0 +DCGM_FI_DEV_GPU_TEMP +\d+ +28 +(ok|DIFFERS)$`, string(b))
	assert.Regexp(t, `(?m)^soak +\S+ +ok +checked \d+ series, 0 fields on 1 GPUs: 0 failed`, r)
	// The load phase, end to end: gpuscope-cudaload through the fake
	// libcuda.so.1, gpuscope's series of it through the fake NVML, and the
	// judgement of both.
	lastUser := users[len(users)-1]
	assert.Regexp(t, `(?m)^load +`+lastUser+` +ok +checked \d+ series, 0 fields on 1 GPUs: 0 failed`, r)
	assert.Regexp(t, `(?m)^ready pid=\d+ device=0 name="Fake H200" sms=132 allocated_bytes=8589934592$`, r)
	assert.Regexp(t, `(?m)^NOTE load +DCGM_FI_PROF_SM_ACTIVE: median 0\.900 over \d+ scrapes$`, r)
	assert.Regexp(t, `(?m)^NOTE load +DCGM_FI_DEV_FB_USED: grew 8492 MiB for a 8192 MiB allocation$`, r)
	assert.Regexp(t, `(?m)^NOTE load +gpuscope_process_info\{gpu="0",pid="\d+"\}: listed as gpuscope-cudaload, holding 8492 MiB$`, r)
}

// The check fails rather than pass short: on a host whose glibc is older
// than the binaries need (a getconf that reports glibc 2.17, as CentOS 7
// has) it stops after the preflight, saying so; when its time cap leaves
// no room for the runs, each phase left out is a failure that says why.
func TestGPUCheckFailsOnAnOldGlibcAndPastItsCap(t *testing.T) {
	bundle := gpuCheckBundle(t)
	oldGlibc := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(oldGlibc, "getconf"), []byte("#!/bin/sh\necho 'glibc 2.17'\n"), 0o755))
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{"old glibc", []string{"PATH=" + oldGlibc + string(os.PathListSeparator) + pathWithoutGo(t), "GPU_CHECK_CAP_S=1"}, []string{
			`(?m)^gpuscope +needs glibc 2\.\d+ +host 2\.17 +TOO OLD: build the bundle on a machine with glibc <= 2\.17$`,
			`(?m)^preflight +- +FAILED +the binaries need a newer glibc than the host's$`,
		}},
		{"cap", []string{"PATH=" + pathWithoutGo(t), "GPU_CHECK_CAP_S=1"}, []string{
			`(?m)^run default +\S+ +FAILED +not started: the 1s cap is near$`,
			`(?m)^soak +\S+ +FAILED +not started: the 1s cap is near$`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command("bash", filepath.Join(bundle, "scripts", "gpu-check.sh"))
			cmd.Env = append(append(os.Environ(), "OUT="+out, "GPU_CHECK_SOURCE=sim"), tc.env...)
			b, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", b)
			require.Equal(t, 1, exit.ExitCode(), "%s", b)
			report, err := os.ReadFile(filepath.Join(out, "gpu-check-report.txt"))
			require.NoError(t, err)
			for _, w := range tc.want {
				assert.Regexp(t, w, string(report))
			}
			if tc.name == "old glibc" {
				assert.NotRegexp(t, `(?m)^== run `, string(report), "nothing runs after a glibc the binaries cannot load")
			}
		})
	}
}

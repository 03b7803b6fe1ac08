package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// nvmlLibDir is the folder holding NVIDIA's own libnvidia-ml.so.1 (Debian
// non-free's libnvidia-ml1), unpacked by scripts/fetch-libnvidia-ml.sh,
// which scripts/install-test-deps.sh runs; GPUSCOPE_LIBNVIDIA_ML_DIR names
// another. Where it cannot be had the test is skipped, saying so, and
// fails under CI=true.
func nvmlLibDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GPUSCOPE_LIBNVIDIA_ML_DIR")
	var why string
	if dir == "" {
		out, err := exec.Command(filepath.Join(e2etest.RepoRoot(), "scripts", "fetch-libnvidia-ml.sh")).Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dir = lines[len(lines)-1]
		if err != nil {
			dir, why = "", "scripts/fetch-libnvidia-ml.sh failed: "+err.Error()
		}
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "libnvidia-ml.so.1")); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		msg := "NVIDIA's libnvidia-ml.so.1 is not available (scripts/install-test-deps.sh fetches it): " + why
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// TestRealNVMLLibraryWithoutTheDriver runs gpuscope against NVIDIA's own
// NVML library on a machine without the NVIDIA kernel driver, the failure
// operators meet first: each way of serving from NVML fails with an error
// that says the library is there and the driver is not loaded, and none
// ends with 127 (a call into NVML before a successful Init). `counters list
// --source nvml` prints the catalog of what the NVML source reads without
// opening the library, so it answers there as anywhere. A go-nvml upgrade
// that breaks loading the real library fails here, not on a node.
func TestRealNVMLLibraryWithoutTheDriver(t *testing.T) {
	dir := nvmlLibDir(t)
	removeControlNodeItMakes(t)
	bin := e2etest.Binary(t)
	cases := []struct {
		name  string
		args  []string
		fails bool
		want  []string
	}{
		{"--source=nvml", []string{"--source=nvml", "--address", e2etest.FreePort(t)}, true,
			[]string{"--source=nvml", "libnvidia-ml.so.1 is there", "driver is not loaded", "driver not loaded"}},
		{"--source=auto", []string{"--source=auto", "--address", e2etest.FreePort(t)}, true,
			[]string{"--source=auto", "libdcgm.so.4 not found", "libnvidia-ml.so.1 is there", "driver not loaded", "--source=sim"}},
		{"counters list --source nvml", []string{"counters", "list", "--source", "nvml"}, false,
			[]string{"dcgm_fi_dev_gpu_temp", "dcgm_fi_prof_sm_active"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
			out, err := cmd.CombinedOutput()
			require.NoError(t, ctx.Err(), "gpuscope %s did not exit:\n%s", tc.name, out)
			assert.NotEqual(t, 127, cmd.ProcessState.ExitCode(), "an NVML call before a successful Init:\n%s", out)
			if tc.fails {
				var exit *exec.ExitError
				require.True(t, errors.As(err, &exit), "gpuscope %s succeeded without a driver (%v):\n%s", tc.name, err, out)
				assert.Equal(t, 1, exit.ExitCode(), "a failure to start, not a bad command line")
			} else {
				require.NoError(t, err, "%s", out)
			}
			msg := strings.ToLower(string(out))
			for _, w := range tc.want {
				assert.Contains(t, msg, strings.ToLower(w), "gpuscope %s:\n%s", tc.name, out)
			}
		})
	}
}

// removeControlNodeItMakes removes /dev/nvidiactl after the test when the
// test's runs of NVIDIA's library made it. Run as root, libnvidia-ml makes
// the control device node itself when it is missing, driver or not; left
// behind, the node would tell every later program on the machine
// (TestNoGPUIsAClearError among them) that a driver is there.
func removeControlNodeItMakes(t *testing.T) {
	t.Helper()
	const node = "/dev/nvidiactl"
	if _, err := os.Lstat(node); err == nil {
		return
	}
	t.Cleanup(func() {
		fi, err := os.Lstat(node)
		if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			return
		}
		if err := os.Remove(node); err != nil {
			t.Logf("NVIDIA's library made %s and it could not be removed: %v", node, err)
		}
	})
}

package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// TestGPUCheckScriptPassesOnTheSim runs scripts/gpu-check.sh end to end on
// simulated GPUs: the same builds, runs, scrapes and assertions that a GPU
// machine gets, so the script cannot rot where no GPU is.
func TestGPUCheckScriptPassesOnTheSim(t *testing.T) {
	e2etest.RequireTool(t, "curl")
	out := t.TempDir()
	_, port, err := net.SplitHostPort(e2etest.FreePort(t))
	require.NoError(t, err)
	cmd := exec.Command("bash", filepath.Join(e2etest.RepoRoot(), "scripts", "gpu-check.sh"))
	cmd.Env = append(os.Environ(), "OUT="+out, "GPU_CHECK_SOURCE=sim", "GPU_CHECK_RUN_S=2", "GPU_CHECK_PORT="+port)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "gpu-check.sh on the sim failed:\n%s", b)
	table := string(b[strings.LastIndex(string(b), "RUN "):])
	for _, run := range []string{"default", "all-fields", "profiling"} {
		require.Regexp(t, `(?m)^`+run+` +ok +checked \d+ series, \d+ fields on 8 GPUs: 0 failed`, table)
		require.FileExists(t, filepath.Join(out, run+"-metrics.txt"))
	}
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

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/e2etest"
	"github.com/gpuscope/gpuscope/internal/testwait"
)

func metricsText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

func waitFor(t *testing.T, base string, cond func(string) bool, what string) {
	t.Helper()
	testwait.For(t, what, func() bool { return cond(metricsText(t, base)) })
}

// TestReloadWithoutAGap edits the counters file under a running gpuscope:
// a change of content is picked up without a restart, a bad file is refused
// with a metric while the old fields keep running, and SIGHUP reloads. A
// scraper running all along never sees the unchanged field missing.
func TestReloadWithoutAGap(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "counters.csv")
	write := func(s string) { require.NoError(t, os.WriteFile(csv, []byte(s), 0o644)) }
	write("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n")
	base, proc := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "2", "--collectors", csv, "--collectors-poll-interval", "200ms")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapes, gaps int
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A scraper at 50 per second, as a demanding Prometheus might.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			scrapes++
			if strings.Count(string(body), "\nDCGM_FI_DEV_GPU_TEMP{") != 2 {
				gaps++
			}
		}
	}()

	write("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\nDCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n")
	waitFor(t, base, func(s string) bool { return strings.Contains(s, "\nDCGM_FI_DEV_POWER_USAGE{") }, "the added field")

	write("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_POWER_USAGE, summary, p\n")
	waitFor(t, base, func(s string) bool { return strings.Contains(s, "gpuscope_config_last_reload_successful 0") }, "the refused reload")
	text := metricsText(t, base)
	assert.Contains(t, text, "\nDCGM_FI_DEV_POWER_USAGE{", "the previous set keeps running")
	assert.Contains(t, proc.Output(), "counters.csv:2", "the log names the file and line")

	write("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\nDCGM_FI_DEV_SM_CLOCK, gauge, SM clock (in MHz).\n")
	require.NoError(t, proc.Cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, base, func(s string) bool {
		return strings.Contains(s, "gpuscope_config_last_reload_successful 1") && strings.Contains(s, "\nDCGM_FI_DEV_SM_CLOCK{")
	}, "the reload after SIGHUP")
	waitFor(t, base, func(s string) bool { return !strings.Contains(s, "\nDCGM_FI_DEV_POWER_USAGE{") }, "the removed field to go")

	close(stop)
	wg.Wait()
	assert.Greater(t, scrapes, 10)
	assert.Zero(t, gaps, "scrapes without DCGM_FI_DEV_GPU_TEMP on both GPUs during reloads")
}

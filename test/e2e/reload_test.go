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

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
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

// scraper scrapes /metrics continuously, as a demanding Prometheus might,
// and counts the scrapes in which cond fails.
type scraper struct {
	mu      sync.Mutex
	last    string // the body of the latest successful scrape
	scrapes int
	gaps    int
}

func (s *scraper) run(base string, gap func(string) bool, stop <-chan struct{}) {
	// 50 per second when the machine keeps up.
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
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.last = string(body)
		s.scrapes++
		if gap(s.last) {
			s.gaps++
		}
		s.mu.Unlock()
	}
}

// waitFor waits until the scraper's latest scrape satisfies cond, so that
// every state the test waits for is one the scraper itself went through.
func (s *scraper) waitFor(t *testing.T, what string, cond func(string) bool) {
	t.Helper()
	testwait.For(t, what, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.scrapes > 0 && cond(s.last)
	})
}

func (s *scraper) counts() (scrapes, gaps int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scrapes, s.gaps
}

// TestReloadWithoutAGap edits the counters file under a running gpuscope:
// a change of content is picked up without a restart, a bad file is refused
// with a metric while the old fields keep running, and SIGHUP reloads. A
// scraper running all along never sees the unchanged field missing; the
// test waits on that scraper's own scrapes, so it scrapes through every
// reload however slow the machine.
func TestReloadWithoutAGap(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "counters.csv")
	// Each version replaces the file at once, as a ConfigMap update does:
	// written in place, the poller could read it half-written (empty) and
	// refuse that instead of the version the test means.
	write := func(s string) {
		tmp := filepath.Join(dir, "counters.csv.new")
		require.NoError(t, os.WriteFile(tmp, []byte(s), 0o644))
		require.NoError(t, os.Rename(tmp, csv))
	}
	write("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n")
	base, proc := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "2", "--collectors", csv, "--collectors-poll-interval", "200ms")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	sc := &scraper{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc.run(base, func(body string) bool { return strings.Count(body, "\nDCGM_FI_DEV_GPU_TEMP{") != 2 }, stop)
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	sc.waitFor(t, "the first scrape", func(string) bool { return true })

	write("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\nDCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n")
	sc.waitFor(t, "the added field", func(s string) bool { return strings.Contains(s, "\nDCGM_FI_DEV_POWER_USAGE{") })

	write("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_POWER_USAGE, summary, p\n")
	sc.waitFor(t, "the refused reload", func(s string) bool { return strings.Contains(s, "gpuscope_config_last_reload_successful 0") })
	text := metricsText(t, base)
	assert.Contains(t, text, "\nDCGM_FI_DEV_POWER_USAGE{", "the previous set keeps running")
	// The log names the file and line. The gauge falls to 0 before the
	// refusal is logged, so the line is waited for.
	proc.WaitOutput(t, "counters.csv:2", 10*time.Second)

	write("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\nDCGM_FI_DEV_SM_CLOCK, gauge, SM clock (in MHz).\n")
	require.NoError(t, proc.Cmd.Process.Signal(syscall.SIGHUP))
	sc.waitFor(t, "the reload after SIGHUP", func(s string) bool {
		return strings.Contains(s, "gpuscope_config_last_reload_successful 1") && strings.Contains(s, "\nDCGM_FI_DEV_SM_CLOCK{")
	})
	sc.waitFor(t, "the removed field to go", func(s string) bool { return !strings.Contains(s, "\nDCGM_FI_DEV_POWER_USAGE{") })
	// A few more scrapes after the last reload, as many as the test used to
	// expect in all, so that one settling late would show too.
	first, _ := sc.counts()
	testwait.For(t, "10 scrapes after the last reload", func() bool {
		n, _ := sc.counts()
		return n >= first+10
	})

	close(stop)
	wg.Wait()
	_, gaps := sc.counts()
	assert.Zero(t, gaps, "scrapes without DCGM_FI_DEV_GPU_TEMP on both GPUs during reloads")
}

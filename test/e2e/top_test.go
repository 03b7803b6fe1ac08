package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// tmuxSession drives one program in a detached tmux session on a private
// server socket, so the test neither sees nor touches the user's sessions.
type tmuxSession struct {
	t    *testing.T
	tmux string
	sock string
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.tmux, append([]string{"-L", s.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	require.NoError(s.t, err, "tmux %s: %s", strings.Join(args, " "), out)
	return string(out)
}

func (s *tmuxSession) screen() string { return s.run("capture-pane", "-p", "-t", "top") }

func (s *tmuxSession) keys(k ...string) { s.run(append([]string{"send-keys", "-t", "top"}, k...)...) }

// waitFor polls the screen until cond holds, and fails with the last
// screen when it does not within the deadline.
func (s *tmuxSession) waitFor(what string, cond func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		last = s.screen()
		if cond(last) {
			return last
		}
		<-time.After(50 * time.Millisecond)
	}
	s.t.Fatalf("the screen never showed %s; last screen:\n%s", what, last)
	return ""
}

var gpuRow = regexp.MustCompile(`(?m)^([0-9]+) +(\S+) +(n/a|-|[0-9]+%) .*?(?:([0-9]+) W|n/a)`)

// rows returns the GPU rows of the table: index, pod and power (-1: none).
func rows(screen string) [][3]string {
	var out [][3]string
	for _, m := range gpuRow.FindAllStringSubmatch(screen, -1) {
		out = append(out, [3]string{m[1], m[2], m[4]})
	}
	return out
}

// TestTopInTmux runs `gpuscope top` in a real terminal against the sim and
// checks what a user sees: 8 GPU rows with their pods, values moving at
// 100 ms, a sort key, the detail pane, the banner when the exporter stops,
// and the reconnection when it comes back.
func TestTopInTmux(t *testing.T) {
	tmux := e2etest.RequireTool(t, "tmux")
	root := e2etest.RepoRoot()
	csv := filepath.Join(root, "etc", "dcp-metrics.csv")
	addr := e2etest.FreePort(t)
	bin := e2etest.Binary(t)
	exporter := e2etest.Start(t, bin, "--address", addr, "--source", "sim", "--sim-pods", "--collectors", csv, "--hostname", "e2e-node")
	e2etest.WaitHTTP(t, "http://"+addr+"/ready", 30*time.Second)

	s := &tmuxSession{t: t, tmux: tmux, sock: fmt.Sprintf("gpuscope-e2e-%d", os.Getpid())}
	s.run("new-session", "-d", "-s", "top", "-x", "160", "-y", "40", bin+" top --address "+addr)
	t.Cleanup(func() {
		// The private server holds only this test's session.
		_ = exec.Command(tmux, "-L", s.sock, "kill-server").Run()
	})

	screen := s.waitFor("8 GPU rows", func(sc string) bool { return len(rows(sc)) == 8 })
	assert.Contains(t, screen, "node e2e-node")
	assert.Contains(t, screen, "every 100ms", "the profiling fields come at 100 ms")
	assert.Contains(t, screen, "ml-training/llama-train-0")
	assert.Contains(t, screen, "research/notebook-7f9c")
	for i, r := range rows(screen) {
		assert.Equal(t, strconv.Itoa(i), r[0], "sorted by GPU at first")
	}

	// The values move: GPU 0's row changes within a second.
	line0 := func(sc string) string {
		for _, l := range strings.Split(sc, "\n") {
			if strings.HasPrefix(l, "0 ") {
				return l
			}
		}
		return ""
	}
	s.waitFor("GPU 0's row change", func(sc string) bool { return line0(sc) != line0(screen) })

	// p sorts by power, highest first.
	s.keys("p")
	screen = s.waitFor("the power sort", func(sc string) bool { return strings.Contains(sc, "sort: power") && strings.Contains(sc, "POWER▼") })
	var powers []int
	for _, r := range rows(screen) {
		p, err := strconv.Atoi(r[2])
		require.NoError(t, err, "power of GPU %s in:\n%s", r[0], screen)
		powers = append(powers, p)
	}
	require.Len(t, powers, 8)
	for i := 1; i < len(powers); i++ {
		assert.GreaterOrEqual(t, powers[i-1], powers[i], "rows by power, highest first:\n%s", screen)
	}

	// enter opens the detail pane of the selected (top) GPU; esc closes it.
	top := rows(screen)[0][0]
	s.keys("Enter")
	screen = s.waitFor("the detail pane", func(sc string) bool { return strings.Contains(sc, "GPU "+top+" detail") })
	for _, g := range []string{"SM active", "tensor active", "DRAM active", "power", "NVLink TX"} {
		assert.Contains(t, screen, g)
	}
	s.keys("Escape")
	s.waitFor("the table again", func(sc string) bool { return len(rows(sc)) == 8 && !strings.Contains(sc, "SM active") })

	// The exporter stops: a banner says so and the last values stay.
	require.NoError(t, exporter.Cmd.Process.Signal(os.Interrupt))
	_ = exporter.Cmd.Wait()
	screen = s.waitFor("the banner", func(sc string) bool { return strings.Contains(sc, "unreachable") })
	assert.Len(t, rows(screen), 8, "the last values stay on screen")

	// It comes back, with the default counters (no SM activity): the
	// banner goes, and the fields it no longer serves show n/a.
	e2etest.Start(t, bin, "--address", addr, "--source", "sim", "--sim-pods", "--hostname", "e2e-node")
	screen = s.waitFor("the reconnection", func(sc string) bool {
		return !strings.Contains(sc, "unreachable") && strings.Contains(sc, "n/a") && len(rows(sc)) == 8
	})
	for _, r := range rows(screen) {
		assert.NotEmpty(t, r[2], "power is still served")
	}

	// q quits, which ends the session that ran it.
	s.keys("q")
	deadline := time.Now().Add(30 * time.Second)
	for exec.Command(tmux, "-L", s.sock, "has-session", "-t", "top").Run() == nil {
		// The screen is read only on failure: the session may end
		// between has-session and capture-pane.
		if time.Now().After(deadline) {
			t.Fatalf("top did not quit on q:\n%s", s.screen())
		}
		<-time.After(50 * time.Millisecond)
	}
}

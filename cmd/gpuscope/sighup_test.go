package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
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

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// runMainEnv makes the test binary run gpuscope's main with its arguments,
// so a test can signal a real process without building the binary.
const runMainEnv = "GPUSCOPE_TEST_RUN_MAIN"

// mainStarted is printed on stderr by the re-executed test binary once
// every package is initialised, just before main runs.
const mainStarted = "test: main starts"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Stderr.WriteString(mainStarted + "\n")
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSIGHUPDuringStartup sends SIGHUPs from the moment main starts until
// gpuscope serves: none may kill it (Go's default for SIGHUP is to exit
// with 129, silently), and the reload they ask for is applied once the
// engine runs.
func TestSIGHUPDuringStartup(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "counters.csv")
	require.NoError(t, os.WriteFile(csv, []byte("DCGM_FI_DEV_GPU_TEMP, gauge, t\n"), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(os.Args[0], "--source", "sim", "--sim-gpus", "2", "--address", addr, "--collectors", csv, "--hostname", "n")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out := &syncBuffer{}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	cmd.Stdout = out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	gone := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	})
	started := make(chan struct{})
	go func() {
		br := bufio.NewReader(stderr)
		line, _ := br.ReadString('\n')
		out.Write([]byte(line))
		if strings.Contains(line, mainStarted) {
			close(started)
		}
		_, _ = io.Copy(out, br)
		exited <- cmd.Wait()
		close(gone)
	}()
	select {
	case <-started:
	case err := <-exited:
		t.Fatalf("gpuscope exited before main: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("main did not start")
	}
	ready := false
	for i := 0; i < 3000 && !ready; i++ {
		require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
		select {
		case err := <-exited:
			t.Fatalf("a SIGHUP during startup ended gpuscope: %v", err)
		case <-time.After(time.Millisecond):
		}
		if i%20 == 19 {
			if resp, err := http.Get("http://" + addr + "/ready"); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
	}
	require.True(t, ready, "gpuscope serves")
	assert.True(t, testwait.Every(10*time.Second, 20*time.Millisecond, func() bool {
		return strings.Contains(out.String(), "Counters file reloaded")
	}), "the reload asked during startup is applied")
	select {
	case err := <-exited:
		t.Fatalf("gpuscope exited: %v", err)
	default:
	}
}

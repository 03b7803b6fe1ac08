package reload

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
)

// deadline is generous: the machine running the tests may be loaded.
const deadline = 15 * time.Second

const good = "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
const other = "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n"

type harness struct {
	path    string
	w       *Watcher
	hook    *logtest.Hook
	applied atomic.Int32
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{path: filepath.Join(t.TempDir(), "counters.csv")}
	require.NoError(t, os.WriteFile(h.path, []byte(good), 0o644))
	logger, hook := logtest.NewNullLogger()
	h.hook = hook
	h.w = New(h.path, func(*counters.Set) error { h.applied.Add(1); return nil }, 5*time.Millisecond, logrus.NewEntry(logger))
	return h
}

// run starts the watcher's loop; the returned channel delivers SIGHUPs.
func (h *harness) run(t *testing.T) chan<- os.Signal {
	t.Helper()
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.w.Run(ctx, hup) }()
	t.Cleanup(func() { cancel(); <-done })
	return hup
}

func (h *harness) successful() float64 { return testutil.ToFloat64(h.w.success) }
func (h *harness) failures() float64 {
	return testutil.ToFloat64(h.w.reloads.WithLabelValues("failure"))
}

func (h *harness) errorsLogged(substr string) int {
	n := 0
	for _, e := range h.hook.AllEntries() {
		if e.Level == logrus.ErrorLevel && strings.Contains(e.Data[logrus.ErrorKey].(error).Error(), substr) {
			n++
		}
	}
	return n
}

// swap replaces the counters file by whatever make creates at a temporary
// name, as a ConfigMap update swaps a symlink.
func (h *harness) swap(t *testing.T, make func(tmp string)) {
	t.Helper()
	tmp := h.path + ".new"
	make(tmp)
	require.NoError(t, os.Rename(tmp, h.path))
}

// TestWatcherOutOfMemoryReadsAreBounded: a counters file swapped for a link
// to /dev/zero or for a huge file is refused without being read, so the
// watcher's memory stays flat however long it polls.
func TestWatcherOutOfMemoryReadsAreBounded(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, tmp string)
		want string
	}{
		{"a 256 MiB file", func(t *testing.T, tmp string) {
			f, err := os.Create(tmp)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(256<<20))
			require.NoError(t, f.Close())
		}, "larger than 1048576"},
		{"a link to /dev/zero", func(t *testing.T, tmp string) {
			require.NoError(t, os.Symlink("/dev/zero", tmp))
		}, "character device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.run(t)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			h.swap(t, func(tmp string) { tt.make(t, tmp) })
			require.Eventually(t, func() bool { return h.successful() == 0 }, deadline, time.Millisecond)
			require.Eventually(t, func() bool { return h.errorsLogged(tt.want) == 1 }, deadline, time.Millisecond)
			runtime.ReadMemStats(&after)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "bytes allocated while refusing the file")
			assert.Equal(t, int32(0), h.applied.Load(), "the previous set keeps running")
		})
	}
}

// TestWatcherFIFOHangsNothing: a FIFO swapped in during a hot reload is
// refused at once; later bad files and SIGHUPs are still answered.
func TestWatcherFIFOHangsNothing(t *testing.T) {
	h := newHarness(t)
	hup := h.run(t)
	h.swap(t, func(tmp string) { require.NoError(t, syscall.Mkfifo(tmp, 0o644)) })
	require.Eventually(t, func() bool { return h.errorsLogged("named pipe") == 1 }, deadline, time.Millisecond)
	assert.Equal(t, 0.0, h.successful())

	h.swap(t, func(tmp string) { require.NoError(t, os.WriteFile(tmp, []byte("NOT_A_FIELD, gauge, x\n"), 0o644)) })
	require.Eventually(t, func() bool { return h.errorsLogged("unknown field") == 1 }, deadline, time.Millisecond)

	h.swap(t, func(tmp string) { require.NoError(t, os.WriteFile(tmp, []byte(other), 0o644)) })
	hup <- syscall.SIGHUP
	require.Eventually(t, func() bool { return h.successful() == 1 && h.applied.Load() >= 1 }, deadline, time.Millisecond)
}

// TestWatcherFIFOHangsNothingTimesOutAHungRead: a read that never returns
// (a hung network mount) fails after ReadTimeout; while it hangs, later
// reloads fail at once instead of piling up, and once it returns the file
// loads again.
func TestWatcherFIFOHangsNothingTimesOutAHungRead(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	var reads atomic.Int32
	h.w.ReadTimeout = 20 * time.Millisecond
	h.w.ReadFile = func(path string) ([]byte, error) {
		reads.Add(1)
		<-release
		return counters.ReadFile(path)
	}
	assert.False(t, h.w.Reload())
	assert.Equal(t, 1, h.errorsLogged("no answer after 20ms"))
	assert.False(t, h.w.Reload())
	assert.Equal(t, 1, h.errorsLogged("an earlier read has not returned"))
	assert.Equal(t, int32(1), reads.Load(), "one read at a time hangs")
	assert.Equal(t, 0.0, h.successful())

	close(release)
	require.Eventually(t, func() bool { return h.w.Reload() }, deadline, time.Millisecond)
	assert.Equal(t, 1.0, h.successful())
}

// TestWatcherSilentPollFailuresAreReported: a counters file that is deleted,
// replaced by a directory or a dangling link, or made unreadable, is logged
// once and sets gpuscope_config_last_reload_successful to 0 while the old
// set keeps running; the file coming back is loaded again.
func TestWatcherSilentPollFailuresAreReported(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"deleted", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) }, "no such file"},
		{"a directory", func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Mkdir(path, 0o755))
		}, "is a directory"},
		{"a dangling link", func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Symlink(filepath.Join(filepath.Dir(path), "gone.csv"), path))
		}, "no such file"},
		{"unreadable", func(t *testing.T, path string) {
			require.NoError(t, os.Chmod(path, 0))
		}, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "unreadable" && os.Geteuid() == 0 {
				// Root reads files whatever their mode: the case runs in a
				// copy of this test binary as nobody instead.
				runAsNobody(t, "^TestWatcherSilentPollFailuresAreReported$/^unreadable$")
				return
			}
			h := newHarness(t)
			tt.make(t, h.path)
			for range 3 {
				h.w.Check()
			}
			assert.Equal(t, 0.0, h.successful())
			assert.Equal(t, 1.0, h.failures(), "one failure per distinct problem")
			assert.Equal(t, 1, h.errorsLogged(tt.want), "logged once")
			assert.Equal(t, int32(0), h.applied.Load(), "the previous set keeps running")

			require.NoError(t, os.RemoveAll(h.path))
			require.NoError(t, os.WriteFile(h.path, []byte(good), 0o644))
			h.w.Check()
			assert.Equal(t, 1.0, h.successful(), "the file came back")
			assert.Equal(t, int32(1), h.applied.Load())
		})
	}
}

// nobody is the conventional unprivileged user and group ID.
const nobody = 65534

// runAsNobody runs the tests that match pattern in a copy of this test
// binary as the user nobody, for a case that root would pass vacuously,
// and fails unless each ran and passed there.
func runAsNobody(t *testing.T, pattern string) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	// go test's work folder is root's alone; nobody needs a copy it can run.
	dir, err := os.MkdirTemp("", "as-nobody")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "reload.test")
	body, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, body, 0o755))
	cmd := exec.Command(bin, "-test.run", pattern, "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"TMPDIR=" + os.TempDir(), "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "as nobody:\n%s", out)
	require.NotContains(t, string(out), "--- SKIP", "as nobody:\n%s", out)
	require.Regexp(t, `--- PASS: \S+/unreadable `, string(out), "as nobody:\n%s", out)
}

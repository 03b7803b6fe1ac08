package podattr

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/kubelettest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// hostileSocket is a socket path short enough for sun_path.
func hostileSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubelet")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "kubelet.sock")
}

// serveHostile replaces whatever serves socket with a hostile kubelet.
func serveHostile(t *testing.T, socket string, h kubelettest.Hostile) *kubelettest.HostileServer {
	t.Helper()
	srv, err := kubelettest.StartHostile(socket, h)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

func warnings(hook *logtest.Hook, substr string) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, substr) {
			out = append(out, e)
		}
	}
	return out
}

// TestCountsAreNotBoundedOnlyBytes: an 8 MiB answer of four million empty
// containers, or of four million empty device IDs, is refused once the
// answer holds more than a node runs, having decoded a few megabytes at
// most; the refresh counts as failed (gpuscope_kubernetes_up 0, an error
// counted), the reason is logged, and the last good pod labels stay for the
// grace period. Before, the first took RSS to 1.21 GB and was accepted.
func TestCountsAreNotBoundedOnlyBytes(t *testing.T) {
	for _, tt := range []struct {
		name, limit string
		answer      []byte
	}{
		{"empty containers", "containers", kubelettest.EmptyContainers(8 << 20)},
		{"empty device IDs", "device IDs", kubelettest.EmptyDeviceIDs(8 << 20)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			socket := hostileSocket(t)
			good, err := kubelettest.Start(socket, []kubelettest.Pod{gpuPod("ml", "p", "c", "nvidia.com/gpu", uuid0)})
			require.NoError(t, err)
			e, hook := newEnricher(t, Config{Socket: socket})
			require.NoError(t, e.Refresh(context.Background()))
			require.Equal(t, []string{"p", "ml", "c"}, e.Values(gpuEntity(0, uuid0)))
			good.Stop()
			serveHostile(t, socket, kubelettest.Hostile{Answer: tt.answer})

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err = e.Refresh(context.Background())
			runtime.ReadMemStats(&after)
			// The 8 MiB message, read as it arrives, and the entries up to
			// the limit: far from the gigabyte four million entries took.
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("one refresh allocated %.1f MiB", float64(allocated)/(1<<20))
			assert.Less(t, allocated, uint64(96<<20), "bytes allocated by one refused refresh")
			require.Error(t, err, "the answer is refused")
			assert.Contains(t, err.Error(), "more than")
			assert.Contains(t, err.Error(), tt.limit)

			assert.Equal(t, []string{"p", "ml", "c"}, e.Values(gpuEntity(0, uuid0)), "the last good labels stay")
			up, _ := metricValue(t, e, "gpuscope_kubernetes_up", nil)
			assert.Equal(t, 0.0, up)
			errs, _ := metricValue(t, e, "gpuscope_kubernetes_refresh_errors_total", nil)
			assert.Equal(t, 1.0, errs)
			require.Error(t, e.Refresh(context.Background()), "refused again")
			errs, _ = metricValue(t, e, "gpuscope_kubernetes_refresh_errors_total", nil)
			assert.Equal(t, 2.0, errs)
			logged := warnings(hook, "kubelet answer refused")
			require.Len(t, logged, 1, "the reason is logged once")
			assert.Contains(t, logged[0].Data[logrus.ErrorKey].(error).Error(), tt.limit)
		})
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestKubeletThatNeverAnswersLeaksAConnectionPerRefresh: against a kubelet
// that accepts connections and never answers, thirty failed refreshes
// leave at most the connection of the last one open on the kubelet's side,
// and the process's goroutines and file descriptors where they were; the
// refreshes failing is counted and logged once. Before, each refresh left
// its connection, and the transport's reader, behind (12 to 36 descriptors
// in 3 minutes).
func TestKubeletThatNeverAnswersLeaksAConnectionPerRefresh(t *testing.T) {
	socket := hostileSocket(t)
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	srv := serveHostile(t, socket, kubelettest.Hostile{Silent: true})
	e, hook := newEnricher(t, Config{Socket: socket, RefreshInterval: MinRefreshInterval})
	const refreshes = 30
	for i := range refreshes {
		require.Error(t, e.Refresh(context.Background()), "refresh %d", i)
	}
	assert.Equal(t, refreshes, srv.Accepted(), "each failed refresh dials again")
	settled := testwait.Until(10*time.Second, func() bool {
		return srv.Open() <= 1 && runtime.NumGoroutine() <= goroutines+12 && openFDs(t) <= fds+6
	})
	assert.True(t, settled, "after %d refreshes: %d connections open on the kubelet's side, %d more goroutines, %d more descriptors",
		refreshes, srv.Open(), runtime.NumGoroutine()-goroutines, openFDs(t)-fds)
	errs, _ := metricValue(t, e, "gpuscope_kubernetes_refresh_errors_total", nil)
	assert.Equal(t, float64(refreshes), errs)
	assert.Len(t, warnings(hook, "unavailable"), 1, "the outage is logged once")

	e.closeConn()
	testwait.For(t, "Close to end the last connection too", func() bool { return srv.Open() == 0 })
}

// TestKeptAliveConnectionCanBeFloodedWithPINGOrSETTINGS: a kubelet that
// answers, then sends PING or SETTINGS frames without end on the kept-alive
// connection, has the connection dropped once a call's worth of control
// frames is passed; the drop is counted in
// gpuscope_kubernetes_connections_dropped_total and logged, and the next
// refresh dials again and succeeds. A real kubelet's hundreds of calls on
// one connection drop nothing. Before, the flood took 36-46% of a core for
// as long as gpuscope ran, with nothing counted or logged.
func TestKeptAliveConnectionCanBeFloodedWithPINGOrSETTINGS(t *testing.T) {
	for _, flood := range []string{kubelettest.FloodPing, kubelettest.FloodSettings} {
		t.Run(flood, func(t *testing.T) {
			socket := hostileSocket(t)
			srv := serveHostile(t, socket, kubelettest.Hostile{Flood: flood})
			e, hook := newEnricher(t, Config{Socket: socket})
			require.NoError(t, e.Refresh(context.Background()))
			dropped := testwait.Until(10*time.Second, func() bool { return srv.Open() == 0 })
			require.True(t, dropped, "the flooded connection is still open after %d %s frames", srv.Frames(), flood)
			n, ok := metricValue(t, e, "gpuscope_kubernetes_connections_dropped_total", nil)
			require.True(t, ok)
			assert.Equal(t, 1.0, n)
			logged := warnings(hook, "kubelet connection dropped")
			require.Len(t, logged, 1)
			assert.Contains(t, logged[0].Data[logrus.ErrorKey].(error).Error(), map[string]string{
				kubelettest.FloodPing: "PING", kubelettest.FloodSettings: "SETTINGS"}[flood])

			// The next refresh dials again. The kubelet floods every new
			// connection too, and on a loaded machine its flood can outrun
			// the answer's last frame, so that refresh may fail as the first
			// connection did; one of the next few succeeds, each on a
			// connection of its own.
			var err error
			for range 5 {
				if err = e.Refresh(context.Background()); err == nil {
					break
				}
			}
			require.NoError(t, err, "a refresh after the drop dials again and succeeds")
			assert.GreaterOrEqual(t, srv.Accepted(), 2)
			up, _ := metricValue(t, e, "gpuscope_kubernetes_up", nil)
			assert.Equal(t, 1.0, up)
		})
	}
	t.Run("a real kubelet", func(t *testing.T) {
		srv := startKubelet(t, []kubelettest.Pod{gpuPod("ml", "p", "c", "nvidia.com/gpu", uuid0)})
		e, _ := newEnricher(t, Config{Socket: srv.Socket()})
		for range 300 {
			require.NoError(t, e.Refresh(context.Background()))
		}
		n, _ := metricValue(t, e, "gpuscope_kubernetes_connections_dropped_total", nil)
		assert.Zero(t, n)
	})
}

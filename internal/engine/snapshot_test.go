package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/etc"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// TestSnapshotIsOneMoment: a snapshot written after the engine has moved
// on (new samples in every window and histogram, the label sets built
// again) still writes the exposition of the moment it was taken,
// in both formats, byte for byte; writers reading it while samples arrive
// share nothing the sampling changes (go test -race checks that).
func TestSnapshotIsOneMoment(t *testing.T) {
	dcp := func(tb testing.TB) string { return readCSV(tb, etc.DCPMetrics(), "") }
	pods := &podEnricher{Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"}), gen: 1}
	e, clk := newShapeEngineClock(t, protoShape{name: "dcp, MIG, pods", csv: dcp, mig: "7x1g.10gb",
		enrichers: func() []enrich.Enricher { return []enrich.Enricher{pods} }})
	s := e.Snapshot(nil, true)
	text := s.AppendText(nil)
	assert.Equal(t, string(e.Render(nil)), string(text), "a snapshot writes what Render writes")
	var proto bytes.Buffer
	require.NoError(t, s.WriteProto(&proto))
	want, err := e.AppendProto(nil)
	require.NoError(t, err)
	require.Equal(t, want, proto.Bytes(), "a snapshot writes what AppendProto writes")

	// Writers read the snapshot while the engine samples and reloads.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var b bytes.Buffer
				assert.NoError(t, s.WriteText(&b))
				assert.Equal(t, len(text), b.Len())
				assert.NoError(t, s.WriteProto(io.Discard))
			}
		}()
	}
	collectTicks(t, e, clk, 30)
	pods.gen++
	e.refreshEntities()
	collectTicks(t, e, clk, 30)
	close(stop)
	wg.Wait()

	assert.NotEqual(t, string(text), string(e.Render(nil)), "the engine moved on")
	assert.Equal(t, string(text), string(s.AppendText(nil)), "the text of the snapshot is as it was")
	var again bytes.Buffer
	require.NoError(t, s.WriteProto(&again))
	assert.Equal(t, proto.Bytes(), again.Bytes(), "the protobuf of the snapshot is as it was")
}

// collectTicks samples every group due in n ticks of 100 ms.
func collectTicks(t *testing.T, e *Engine, clk *sourcetest.Clock, n int) {
	t.Helper()
	b := &batch{}
	for tick := 0; tick < n; tick++ {
		e.mu.RLock()
		groups := e.plan.groups
		e.mu.RUnlock()
		for gi, g := range groups {
			if tick%int(g.Interval/(100*time.Millisecond)) == 0 {
				require.NoError(t, e.collectOnce(context.Background(), gi, b))
			}
		}
		clk.Add(100 * time.Millisecond)
	}
}

// failingWriter takes n bytes, then fails every write.
type failingWriter struct{ n int }

var errWriterFull = errors.New("the client went away")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errWriterFull
	}
	w.n -= len(p)
	return len(p), nil
}

// countingWriter records the size of each write.
type countingWriter struct{ writes []int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return len(p), nil
}

// TestSnapshotWritesInBoundedPieces: both formats reach the writer in
// pieces of about chunkSize bytes, whatever the exposition's size, and a
// writer's error ends the write and is returned.
func TestSnapshotWritesInBoundedPieces(t *testing.T) {
	csv := func(tb testing.TB) string { return readCSV(tb, etc.DCPMetrics(), "") + perLinkCSV(tb) }
	e := newShapeEngine(t, protoShape{name: "per-link NVLink, MIG", csv: csv, mig: "7x1g.10gb"})
	s := e.Snapshot(nil, true)
	for name, write := range map[string]func(io.Writer) error{"text": s.WriteText, "protobuf": s.WriteProto} {
		t.Run(name, func(t *testing.T) {
			var cw countingWriter
			require.NoError(t, write(&cw))
			total := 0
			for _, n := range cw.writes {
				total += n
				assert.LessOrEqual(t, n, chunkSize+16<<10, "one write holds at most a chunk and a series")
			}
			assert.Greater(t, len(cw.writes), 10, "a %d-byte exposition goes out in pieces", total)
			err := write(&failingWriter{n: total / 2})
			assert.ErrorIs(t, err, errWriterFull)
		})
	}
	assert.True(t, strings.HasPrefix(string(s.AppendText(nil)), "# HELP"))
}

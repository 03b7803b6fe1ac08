package engine

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/etc"
	"github.com/gpuscope/gpuscope/internal/engine/window"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// benchSize is one node shape of the scrape benchmarks. All run the shipped
// etc/dcp-metrics.csv on eight simulated H100s (window 15s, 100ms profiling
// fields). The largest size adds the per-link fields of perLinkCSV, 18
// links' worth per GPU: what a link-level dashboard reads. DCGM reads the
// ..._L<n> fields on the GPU, one series per link index, and so does the sim.
type benchSize struct {
	name    string
	gpus    int
	mig     string
	perLink bool
	// procs, when set, turns the per-process series on with that many
	// processes on each GPU.
	procs int
}

var benchSizes = []benchSize{
	{name: "8gpu"},
	{name: "8gpu_mig", mig: "7x1g.10gb"},
	{name: "8gpu_mig_nvlink", mig: "7x1g.10gb", perLink: true},
}

// perLinkCSV is testdata/per-link-nvlink.csv: the per-link fields of the
// largest size, which scripts/bench.sh appends for the binary too.
func perLinkCSV(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "per-link-nvlink.csv"))
	if err != nil {
		tb.Fatal(err)
	}
	return "\n" + string(b)
}

func benchCounters(tb testing.TB, perLink bool) *counters.Set {
	tb.Helper()
	csv, err := io.ReadAll(etc.DCPMetrics())
	require.NoError(tb, err)
	text := string(csv)
	if perLink {
		text += perLinkCSV(tb)
	}
	set, err := counters.Parse("dcp-metrics.csv", strings.NewReader(text))
	require.NoError(tb, err)
	return set
}

// newBenchEngine builds an engine on a simulated node with a hand-driven
// clock and fills every window: 15 s of 100 ms samples (1 s for the slow
// group), so the window statistics run over full rings as in production.
func newBenchEngine(tb testing.TB, sz benchSize) (*Engine, *sourcetest.Clock) {
	tb.Helper()
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.MIG = sz.mig
	if sz.gpus > 0 {
		cfg.GPUs = sz.gpus
	}
	cfg.EventRate = 0
	cfg.Now = clk.Now
	src, err := sim.New(cfg)
	require.NoError(tb, err)
	var from source.Source = src
	if sz.procs > 0 {
		from = withProcesses(src, sz.procs)
	}
	e, err := New(Options{
		Source: from, Counters: benchCounters(tb, sz.perLink), DefaultInterval: time.Second, Window: 15 * time.Second,
		Hostname: "node-1", Now: clk.Now, Log: quietLog(), Processes: ProcessOptions{Enabled: sz.procs > 0},
	})
	require.NoError(tb, err)
	require.NoError(tb, src.Watch(e.plan.groups))
	e.refreshEntities()
	e.pollStatus()
	b := &batch{}
	for tick := 0; tick <= 160; tick++ {
		for gi, g := range e.plan.groups {
			if tick%int(g.Interval/(100*time.Millisecond)) == 0 {
				require.NoError(tb, e.collectOnce(context.Background(), gi, b))
			}
		}
		clk.Add(100 * time.Millisecond)
	}
	if sz.procs > 0 {
		e.refreshProcesses()
	}
	return e, clk
}

// manyProcesses is a sim node whose GPUs each run n processes.
type manyProcesses struct {
	*sim.Source
	list []source.Process
}

func (m *manyProcesses) Processes() []source.Process { return m.list }

func withProcesses(src *sim.Source, n int) *manyProcesses {
	m := &manyProcesses{Source: src}
	for _, ent := range src.Entities() {
		if ent.Kind != source.GPU {
			continue
		}
		for i := range n {
			m.list = append(m.list, source.Process{PID: uint32(1000*(ent.GPU+1) + i), UUID: ent.UUID, GPUInstanceID: -1,
				UsedMemoryBytes: uint64(i+1) << 28, SMUtil: float64(i % 100), Name: "/usr/bin/python3"})
		}
	}
	return m
}

// BenchmarkRenderProcesses is the cost the per-process series add to a
// scrape: eight GPUs without them, and with 64 processes (the default cap)
// on each. Run side by side:
//
//	go test -run '^$' -bench RenderProcesses -benchmem -count 5 ./internal/engine/
func BenchmarkRenderProcesses(b *testing.B) {
	for _, sz := range []benchSize{{name: "8gpu_off"}, {name: "8gpu_64procs", procs: DefaultMaxProcessesPerGPU}} {
		b.Run(sz.name, func(b *testing.B) { benchRender(b, sz) })
	}
}

// families parses the engine's own exposition into the metric families that
// client_golang's encoder would get from a registry, in exposition order.
func families(tb testing.TB, out []byte) ([]*dto.MetricFamily, int) {
	tb.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(bytes.NewReader(out))
	require.NoError(tb, err)
	mfs := make([]*dto.MetricFamily, 0, len(byName))
	series := 0
	for _, mf := range byName {
		mfs = append(mfs, mf)
		series += len(mf.Metric)
	}
	sort.Slice(mfs, func(i, j int) bool { return mfs[i].GetName() < mfs[j].GetName() })
	return mfs, series
}

// BenchmarkRender is the cost of one /metrics body for the GPU series,
// window statistics included. BenchmarkFloor encodes the same series, built
// once as metric families, with client_golang's text encoder: the cost of
// a scrape with nothing left to compute. Compare them side by side:
//
//	go test -run '^$' -bench 'Render|Floor|Collect' -benchmem ./internal/engine/
func BenchmarkRender(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) { benchRender(b, sz) })
	}
}

// benchRender times Engine.Render of one node shape into a reused buffer.
func benchRender(b *testing.B, sz benchSize) {
	e, _ := newBenchEngine(b, sz)
	buf := e.Render(nil)
	_, series := families(b, buf)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		buf = e.Render(buf[:0])
	}
	b.StopTimer()
	reportCPU(b, cpu)
	reportPerSeries(b, series)
}

// cpuTime is the CPU time the process has used. On a shared machine a
// benchmark's wall time counts the time other processes ran; its CPU time
// per operation does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start, GC included.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRenderScaling renders the largest shape on 1 to 16 GPUs: the
// ns/series column stays flat when the cost grows linearly with the series.
func BenchmarkRenderScaling(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8, 16} {
		sz := benchSizes[len(benchSizes)-1]
		sz.gpus = n
		b.Run("gpus="+strconv.Itoa(n), func(b *testing.B) { benchRender(b, sz) })
	}
}

func BenchmarkFloor(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			e, _ := newBenchEngine(b, sz)
			mfs, series := families(b, e.Render(nil))
			var out bytes.Buffer
			format := expfmt.NewFormat(expfmt.TypeTextPlain)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				out.Reset()
				enc := expfmt.NewEncoder(&out, format)
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			reportCPU(b, cpu)
			reportPerSeries(b, series)
		})
	}
}

func reportPerSeries(b *testing.B, series int) {
	b.ReportMetric(float64(series), "series")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(series), "ns/series")
}

// BenchmarkRenderFullWindow renders 16 simulated GPUs with seven MIG
// instances each, the shipped profiling fields, and every window ring full:
// 4096 samples a series, the most a ring holds (a 409.4 s window at
// 100 ms). It is the worst case of the window statistics.
//
//	go test -run '^$' -bench RenderFullWindow -benchmem ./internal/engine/
func BenchmarkRenderFullWindow(b *testing.B) {
	clk := newClock()
	cfg := sim.DefaultConfig()
	cfg.GPUs, cfg.MIG, cfg.EventRate, cfg.Now = 16, "7x1g.10gb", 0, clk.Now
	src, err := sim.New(cfg)
	require.NoError(b, err)
	const interval = 100 * time.Millisecond
	win := (window.MaxCapacity - 2) * interval
	e, err := New(Options{
		Source: src, Counters: benchCounters(b, false), DefaultInterval: time.Second, Window: win,
		Hostname: "node-1", Now: clk.Now, Log: quietLog(),
	})
	require.NoError(b, err)
	require.NoError(b, src.Watch(e.plan.groups))
	e.refreshEntities()
	e.pollStatus()
	for gi := range e.plan.groups {
		require.NoError(b, e.collectOnce(context.Background(), gi, &batch{}))
	}
	// Fill every ring the first collection made, oldest sample first.
	rng := rand.New(rand.NewPCG(1, 2))
	now := clk.Now().UnixNano()
	rings := 0
	for _, es := range e.order {
		for si := range es.vals {
			if es.vals[si].ring == nil {
				continue
			}
			r := newRing(&e.plan.slots[si])
			es.vals[si].ring = r
			rings++
			step := int64(e.plan.slots[si].interval)
			for i := r.Cap() - 1; i >= 0; i-- {
				r.Push(now-int64(i)*step, rng.Float64())
			}
		}
	}
	buf := e.Render(nil)
	_, series := families(b, buf)
	b.Logf("%d full rings of %d samples", rings, window.MaxCapacity)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		buf = e.Render(buf[:0])
	}
	b.StopTimer()
	reportCPU(b, cpu)
	reportPerSeries(b, series)
}

// BenchmarkProtobufScrape is the cost of the body of a scrape that
// negotiates the protobuf exposition, to set beside BenchmarkRender: the
// snapshot of the store, native histograms included, encoded delimited
// (what the server writes of it). BenchmarkFloorProto encodes the same
// families, decoded once into client_model's messages, with
// client_golang's protobuf encoder:
//
//	go test -run '^$' -bench 'Render$|ProtobufScrape|Floor' -benchmem ./internal/engine/
func BenchmarkProtobufScrape(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			e, _ := newBenchEngine(b, sz)
			out, err := e.AppendProto(nil)
			require.NoError(b, err)
			series := protoSeries(b, out)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				if out, err = e.AppendProto(out[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportCPU(b, cpu)
			b.ReportMetric(float64(len(out)), "bytes")
			reportPerSeries(b, series)
		})
	}
}

func BenchmarkFloorProto(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			e, _ := newBenchEngine(b, sz)
			body, err := e.AppendProto(nil)
			require.NoError(b, err)
			mfs := decodeFamilies(b, body)
			series := protoSeries(b, body)
			var out bytes.Buffer
			format := expfmt.NewFormat(expfmt.TypeProtoDelim)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				out.Reset()
				enc := expfmt.NewEncoder(&out, format)
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			reportCPU(b, cpu)
			reportPerSeries(b, series)
		})
	}
}

// decodeFamilies reads a delimited protobuf exposition into its families.
func decodeFamilies(tb testing.TB, body []byte) []*dto.MetricFamily {
	tb.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err == io.EOF {
			return out
		} else if err != nil {
			tb.Fatal(err)
		}
		out = append(out, mf)
	}
}

// protoSeries counts the series of a protobuf exposition.
func protoSeries(tb testing.TB, body []byte) int {
	n := 0
	for _, mf := range decodeFamilies(tb, body) {
		n += len(mf.Metric)
	}
	return n
}

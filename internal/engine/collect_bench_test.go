package engine

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// This file is the sampling benchmark alone, with no helper of its own
// outside it but newBenchEngine, so that scripts/bench.sh can build the
// same benchmark into an older tree of the engine and compare the two side
// by side (BENCH_ONLY=ingest).

// BenchmarkCollect is the steady-state sampling cost: one op is one
// simulated second of a node's sampling (ten rounds of the 100ms group, one
// of the 1s group): the sim's Collect plus the engine's apply into the
// per-series rings. core% is that second's CPU time in % of one core, the
// figure the process CPU run measures on the real binary; cpu-ns/sample is
// the process's CPU time per sample, which a shared machine's waits do not
// inflate. The sim's own share is BenchmarkSimCollect: the same Collects
// into a batch that is reset without being applied.
func BenchmarkCollect(b *testing.B) {
	for _, sz := range []benchSize{benchSizes[0], benchSizes[len(benchSizes)-1]} {
		b.Run(sz.name, func(b *testing.B) { benchSecond(b, sz, true) })
	}
}

func BenchmarkSimCollect(b *testing.B) {
	for _, sz := range []benchSize{benchSizes[0], benchSizes[len(benchSizes)-1]} {
		b.Run(sz.name, func(b *testing.B) { benchSecond(b, sz, false) })
	}
}

func benchSecond(b *testing.B, sz benchSize, apply bool) {
	e, clk := newBenchEngine(b, sz)
	ctx := context.Background()
	bt := &batch{}
	// second samples one simulated second and returns how many values the
	// source handed over.
	second := func() (samples int) {
		for tick := 0; tick < 10; tick++ {
			clk.Add(100 * time.Millisecond)
			for gi, g := range e.plan.groups {
				if tick%int(g.Interval/(100*time.Millisecond)) != 0 {
					continue
				}
				if err := e.src.Collect(ctx, gi, bt); err != nil {
					b.Fatal(err)
				}
				samples += len(bt.vals)
				if apply {
					e.apply(bt)
				}
				bt.reset()
			}
		}
		return samples
	}
	samples := second()
	require.NotZero(b, samples, "one second sampled nothing")
	// The set-up's garbage is collected before the clock starts: the
	// sampling itself allocates nothing, and a collection of the set-up
	// running beside the timed loop would charge the engine's heap size to
	// its sampling.
	runtime.GC()
	b.ReportAllocs()
	m0 := mallocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		second()
	}
	b.StopTimer()
	perSample(b, samples, mallocs()-m0, processCPU()-cpu)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e7, "core%")
}

// perSample reports the per-sample figures; allocs/sample counts every heap
// allocation of the timed loop, whoever made it.
func perSample(b *testing.B, samples int, allocs uint64, cpu time.Duration) {
	n := float64(b.N) * float64(samples)
	b.ReportMetric(float64(samples), "samples/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/sample")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/sample")
	b.ReportMetric(float64(allocs)/n, "allocs/sample")
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

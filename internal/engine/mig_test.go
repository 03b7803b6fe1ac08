package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// migSource is two GPUs: GPU 0 without MIG, GPU 1 with GPU instances 1 and
// 2 and a compute instance in instance 1. GPU-level fields have values on
// GPUs only and instance-level fields on instances only, as the sources
// read them.
func migSource() *sourcetest.Source {
	src := sourcetest.NewGPUs(2, func(e *source.Entity, f uint16, _ time.Time) (float64, bool) {
		gpuLevel := fieldid.Of(f).Level == fieldid.LevelGPU
		if gpuLevel != (e.Kind == source.GPU) {
			return 0, false
		}
		return float64(100*e.GPU + 10*max(e.GPUInstanceID, 0) + max(e.ComputeInstanceID, 0)), true
	})
	for _, id := range []int{1, 2} {
		gi := *src.Ents[1]
		gi.Kind, gi.GPUInstanceID, gi.GPUInstanceProfile = source.GPUInstance, id, "3g.40gb"
		src.Ents = append(src.Ents, &gi)
	}
	ci := *src.Ents[2]
	ci.Kind, ci.ComputeInstanceID = source.ComputeInstance, 0
	src.Ents = append(src.Ents, &ci)
	return src
}

// dcgm-exporter's default device option (-d f) monitors a GPU without MIG
// and the GPU instances of a MIG GPU, never the MIG GPU itself nor compute
// instances (internal/pkg/devicemonitoring/device_monitoring.go,
// GetMonitoredEntities and monitorAllGPUInstances with addFlexibly). DCGM
// answers a GPU-level field asked on a GPU instance with its GPU's value, so
// the instances carry power; the window-count families count by GPU and
// write one series per monitored entity (expcollector.go); health stays on
// GPUs (gpu_health_collector.go: its group holds GPUs only).
func TestMIGGPUIsExportedThroughItsInstances(t *testing.T) {
	clk := newClock()
	src := migSource()
	e := newTestEngine(t, "DCGM_FI_DEV_POWER_USAGE, gauge, p\nDCGM_FI_PROF_SM_ACTIVE, gauge, a\nDCGM_EXP_XID_ERRORS_COUNT, gauge, x\nDCGM_EXP_GPU_HEALTH_STATUS, gauge, h\n", src, clk)
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[1], Code: 31, At: clk.Now()}}
	collectAll(t, e)
	mfs := scrape(t, e)

	type row struct{ gpu, gi string }
	rows := func(family string) map[row]float64 {
		out := map[row]float64{}
		for _, m := range mfs[family].Metric {
			assert.False(t, hasLabel(m, "GPU_CI_ID"), "%s: no compute instance unless asked for", family)
			out[row{labelOf(m, "gpu"), labelOf(m, "GPU_I_ID")}] = value(m)
		}
		return out
	}
	assert.Equal(t, map[row]float64{{"0", ""}: 0, {"1", "1"}: 100, {"1", "2"}: 100}, rows("DCGM_FI_DEV_POWER_USAGE"),
		"GPU 1 is shown through its instances, each with the GPU's power")
	assert.Equal(t, map[row]float64{{"1", "1"}: 110, {"1", "2"}: 120}, rows("DCGM_FI_PROF_SM_ACTIVE"),
		"instance-level fields keep the instance's own value")
	assert.Equal(t, map[row]float64{{"0", ""}: 0, {"1", "1"}: 1, {"1", "2"}: 1}, rows("DCGM_EXP_XID_ERRORS_COUNT"),
		"the GPU's XIDs are counted on each of its instances")
	health := map[string]int{}
	for _, m := range mfs["DCGM_EXP_GPU_HEALTH_STATUS"].Metric {
		assert.False(t, hasLabel(m, "GPU_I_ID"))
		health[labelOf(m, "gpu")]++
	}
	assert.Equal(t, map[string]int{"0": 11, "1": 11}, health, "health stays per GPU")
}

// Compute instances, which dcgm-exporter never exports, come with
// GPU_CI_ID when asked for.
func TestComputeInstancesOnRequest(t *testing.T) {
	clk := newClock()
	src := migSource()
	src.Now = clk.Now
	e, err := New(Options{Source: src, Counters: parseSet(t, "DCGM_FI_PROF_SM_ACTIVE, gauge, a\nDCGM_FI_DEV_POWER_USAGE, gauge, p\n"), DefaultInterval: time.Second,
		Hostname: "node-1", ComputeInstances: true, Now: clk.Now, Log: quietLog()})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	collectAll(t, e)
	mfs := scrape(t, e)
	ci := series(mfs, "DCGM_FI_PROF_SM_ACTIVE", map[string]string{"GPU_CI_ID": "0"})
	require.Len(t, ci, 1)
	assert.Equal(t, "1", labelOf(ci[0], "GPU_I_ID"))
	assert.Equal(t, 110.0, value(ci[0]))
	ci = series(mfs, "DCGM_FI_DEV_POWER_USAGE", map[string]string{"GPU_CI_ID": "0"})
	require.Len(t, ci, 1)
	assert.Equal(t, 100.0, value(ci[0]), "GPU-level fields reach compute instances too")
}

package integration

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// A non-root gpuscope on a node whose GPU 0 is in MIG mode and is
// re-partitioned while it runs: every GPU is exported, GPU 0's instances
// with dcgm-exporter's GPU_I_ID and GPU_I_PROFILE labels, each GPU
// instance once however many compute instances it has, and the layout
// the scrape shows follows the GPU's.
func TestNVMLMIGLayoutThroughTheEngineAsNonRoot(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	ins := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_3_SLICE, gonvml.GPU_INSTANCE_PROFILE_1_SLICE)
	f.AddComputeInstance(0, ins[0])
	f.SetNonRoot(true)
	clk := newClock()
	src, err := nvml.New(nvml.Config{Lib: f, Hostname: "node-1", Logger: quietLog(), EventWait: 20 * time.Millisecond,
		Clock: clk, MIGPoll: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	set := parseCSV(t, "DCGM_FI_DEV_FB_USED, gauge, f\nDCGM_FI_DEV_GPU_TEMP, gauge, t\n")
	e, err := engine.New(engine.Options{Source: src, Counters: set, DefaultInterval: time.Second, Hostname: "node-1", Now: clk.Now, Log: quietLog()})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	scrape := func(d time.Duration) (instances []string, gpus int) {
		clk.Add(d)
		require.NoError(t, e.CollectAll(context.Background()))
		mfs := parse(t, e.Render(nil))
		for _, m := range mfs["DCGM_FI_DEV_FB_USED"].GetMetric() {
			if id := labelOf(m, "GPU_I_ID"); id != "" {
				instances = append(instances, id+"/"+labelOf(m, "GPU_I_PROFILE"))
			}
		}
		sort.Strings(instances)
		return instances, len(gpusOf(mfs["DCGM_FI_DEV_GPU_TEMP"]))
	}
	gi := func(in *nvmlfake.Instance, profile string) string {
		return strconv.Itoa(int(in.GI.Info.Id)) + "/" + profile
	}
	got, gpus := scrape(time.Second)
	assert.Equal(t, []string{gi(ins[0], "3g.40gb"), gi(ins[1], "1g.10gb")}, got)
	assert.Equal(t, 8, gpus, "every GPU is exported")

	added := f.EnableMIG(0, gonvml.GPU_INSTANCE_PROFILE_2_SLICE)
	got, _ = scrape(time.Second)
	assert.Equal(t, []string{gi(ins[0], "3g.40gb"), gi(ins[1], "1g.10gb")}, got, "a new instance waits for the poll")
	got, _ = scrape(30 * time.Second)
	assert.Equal(t, []string{gi(ins[0], "3g.40gb"), gi(ins[1], "1g.10gb"), gi(added[0], "2g.20gb")}, got)

	f.DestroyInstance(0, ins[1])
	scrape(time.Second) // its handle fails once
	got, gpus = scrape(time.Second)
	assert.Equal(t, []string{gi(ins[0], "3g.40gb"), gi(added[0], "2g.20gb")}, got, "a destroyed instance goes at the next read")
	assert.Equal(t, 8, gpus)
}

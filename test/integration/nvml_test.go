package integration

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// scrapeOnce renders what an engine over src exports after a few collections.
func scrapeOnce(t *testing.T, src source.Source, set *counters.Set, clk *sourcetest.Clock) map[string]*dto.MetricFamily {
	t.Helper()
	e, err := engine.New(engine.Options{Source: src, Counters: set, DefaultInterval: time.Second, Hostname: "node-1", Now: clk.Now, Log: quietLog()})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	for range 3 {
		clk.Add(time.Second)
		require.NoError(t, e.CollectAll(context.Background()))
	}
	return parse(t, e.Render(nil))
}

// TestNVMLSourceMatchesTheSimSeries is the NVML source's promise: on a DGX
// H100 with only a driver, every field of the shipped counters files that
// NVML can serve is exported for all 8 GPUs, the GPM profiling fields
// included, under the same names, types and labels as the sim source (and so
// as DCGM), so dashboards and alerts do not care which source feeds them.
func TestNVMLSourceMatchesTheSimSeries(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(testing.TB) *counters.Set
	}{{"default-counters", defaultSet}, {"dcp-metrics", dcpSet}} {
		t.Run(tc.name, func(t *testing.T) {
			set := tc.set(t)
			clk := newClock()
			// The source takes the engine's clock: GPM measures only
			// between samples at least 100 ms apart on it.
			nv, err := nvml.New(nvml.Config{Lib: nvmlfake.New(nvmlfake.DGXH100), Hostname: "node-1", Logger: quietLog(), EventWait: 20 * time.Millisecond, Clock: clk})
			require.NoError(t, err)
			defer nv.Close()
			nvmlFamilies := scrapeOnce(t, nv, set, clk)

			cfg := sim.DefaultConfig()
			cfg.Now = clk.Now
			sm, err := sim.New(cfg)
			require.NoError(t, err)
			simFamilies := scrapeOnce(t, sm, set, clk)

			nvmlSupport := nvml.Support()
			served := 0
			for _, f := range set.Fields {
				info, ok := counters.Lookup(f.Name)
				require.True(t, ok)
				if ok, _ := nvmlSupport.Serves(info.ID); f.Type == counters.Label || info.Exporter() || !ok {
					continue
				}
				served++
				mf := nvmlFamilies[f.Name]
				require.NotNil(t, mf, "%s: NVML serves it, so it must be exported", f.Name)
				assert.Len(t, gpusOf(mf), 8, "%s on all 8 GPUs", f.Name)
				sf := simFamilies[f.Name]
				if sf == nil {
					// A field the simulated H100 lacks (a fan: it is
					// passively cooled) is said so, never left silent.
					assert.NotEmpty(t, unsupportedOn(simFamilies, f.Name), "%s: the sim exports it too, or says why not", f.Name)
					continue
				}
				assert.Equal(t, sf.GetType(), mf.GetType(), f.Name)
				assert.Equal(t, labelNames(sf), labelNames(mf), "%s: same labels from both sources", f.Name)
				if len(f.Stats) > 0 {
					assert.NotNil(t, nvmlFamilies[f.Name+"_window"], "%s: window statistics", f.Name)
				}
			}
			assert.Greater(t, served, 20)
			if tc.name == "dcp-metrics" {
				for _, prof := range []string{"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"} {
					mf := nvmlFamilies[prof]
					require.NotNil(t, mf, "%s through GPM", prof)
					for _, m := range mf.Metric {
						v := gaugeOf(m)
						assert.True(t, v >= 0 && v <= 1, "%s is a ratio like DCGM's, got %v", prof, v)
					}
				}
			}
			// Fields NVML cannot serve are absent and said so, never 0.
			for _, f := range set.Fields {
				info, _ := counters.Lookup(f.Name)
				if ok, _ := nvmlSupport.Serves(info.ID); f.Type == counters.Label || info.Exporter() || ok {
					continue
				}
				assert.Nil(t, nvmlFamilies[f.Name], "%s: NVML cannot serve it", f.Name)
			}
		})
	}
}

// unsupportedOn lists the GPUs whose gpuscope_field_supported says they
// cannot serve field.
func unsupportedOn(mfs map[string]*dto.MetricFamily, field string) []string {
	var gpus []string
	if mf := mfs["gpuscope_field_supported"]; mf != nil {
		for _, m := range mf.Metric {
			if labelOf(m, "field") == field && labelOf(m, "reason") != "" {
				gpus = append(gpus, labelOf(m, "gpu"))
			}
		}
	}
	return gpus
}

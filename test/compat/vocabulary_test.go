package compat

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// Counters files in either DCGM vocabulary, and one mixing both. Names,
// IDs and units come from go-dcgm v1.4611.0's pkg/dcgm/dcgm_fields.h (DCGM
// 4.6.1): DCGM_FI_DEV_SM_CLOCK (100, MHz) and DCGM_FI_DEV_SM_CLOCK_HERTZ
// (1603, Hz); DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (156, mJ) and
// DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL (1611, J); DCGM_FI_DEV_GPU_TEMP, the
// deprecated name of DCGM_FI_DEV_GPU_TEMP_CELSIUS (150); and
// DCGM_FI_DRIVER_VERSION, the deprecated name of
// DCGM_FI_SYSTEM_DRIVER_VERSION (1). A label-type field is a label named as
// the file names it, so a new-style file gets dcgm-exporter 4.9's
// DCGM_FI_SYSTEM_DRIVER_VERSION label.
const (
	oldFile = "DCGM_FI_DEV_SM_CLOCK, gauge, clk\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, e\n" +
		"DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, d\n"
	newFile = "DCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, clk\nDCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL, counter, e\n" +
		"DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, t\nDCGM_FI_SYSTEM_DRIVER_VERSION, label, d\n"
	mixedFile = "DCGM_FI_DEV_SM_CLOCK, gauge, clk\nDCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, clk\n" +
		"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, e\nDCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL, counter, e\n" +
		"DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, t\nDCGM_FI_SYSTEM_DRIVER_VERSION, label, d\n"
)

// realisticGen is a host engine whose base-unit fields are its legacy
// fields in the new unit, as DCGM 4.6.1 reads both from the same NVML call.
func realisticGen(e dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
	if u, ok := fieldid.BaseUnitOf(field); ok {
		v, _ := realisticGen(e, u.Legacy, seq)
		return dcgm.Value{Kind: dcgm.KindFloat64, Float: source.Scale(u, float64(v.Int))}, true
	}
	switch field {
	case fieldid.SMClock:
		return dcgm.Value{Kind: dcgm.KindInt64, Int: 1410 + seq}, true
	case fieldid.TotalEnergyConsumption:
		return dcgm.Value{Kind: dcgm.KindInt64, Int: 5_000_000 + 1000*seq}, true
	case fieldid.DriverVersion:
		return dcgm.Value{Kind: dcgm.KindString, Str: "580.95.05"}, true
	}
	return dcgmfake.DefaultGen(e, field, seq)
}

func vocabularySources(t *testing.T) map[string]func(*sourcetest.Clock) source.Source {
	return map[string]func(*sourcetest.Clock) source.Source{
		"sim": func(clk *sourcetest.Clock) source.Source {
			cfg := sim.DefaultConfig()
			cfg.Now = clk.Now
			src, err := sim.New(cfg)
			require.NoError(t, err)
			return src
		},
		"nvml": func(*sourcetest.Clock) source.Source {
			src, err := nvml.New(nvml.Config{Lib: nvmlfake.New(nvmlfake.DGXH100), Hostname: "node-1", Logger: quietLog(), EventWait: 20 * time.Millisecond})
			require.NoError(t, err)
			return src
		},
		"dcgm 4.6.1": func(clk *sourcetest.Clock) source.Source { return dcgmAt(t, clk, "4.6.1") },
		"dcgm 4.5.2": func(clk *sourcetest.Clock) source.Source { return dcgmAt(t, clk, "4.5.2") },
	}
}

func dcgmAt(t *testing.T, clk *sourcetest.Clock, version string) source.Source {
	fake := dcgmfake.New(dcgmfake.WithClock(clk), dcgmfake.WithGen(realisticGen), dcgmfake.WithVersion(version))
	src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 15 * time.Second, Log: quietLog(), Clock: clk})
	require.NoError(t, err)
	return src
}

func TestBothVocabulariesOnEverySource(t *testing.T) {
	files := []struct {
		name, csv    string
		families     []string
		driverLabel  string
		noDriverWord string
	}{
		{"old", oldFile, []string{"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_TEMP"},
			"DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION"},
		{"new", newFile, []string{"DCGM_FI_DEV_SM_CLOCK_HERTZ", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"},
			"DCGM_FI_SYSTEM_DRIVER_VERSION", "DCGM_FI_DRIVER_VERSION"},
		{"mixed", mixedFile, []string{"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
			"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"},
			"DCGM_FI_SYSTEM_DRIVER_VERSION", "DCGM_FI_DRIVER_VERSION"},
	}
	for srcName, open := range vocabularySources(t) {
		for _, f := range files {
			t.Run(srcName+"/"+f.name, func(t *testing.T) {
				clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
				src := open(clk)
				t.Cleanup(func() { _ = src.Close() })
				mfs := render(t, src, f.csv, clk)
				for _, fam := range f.families {
					require.Contains(t, mfs, fam, "exported under the name the file gives")
					require.NotEmpty(t, mfs[fam].Metric)
					for _, m := range mfs[fam].Metric {
						assert.NotEmpty(t, labelOf(m, f.driverLabel), "%s carries the driver version as %s", fam, f.driverLabel)
						assert.Empty(t, labelOf(m, f.noDriverWord), "%s: no %s label", fam, f.noDriverWord)
					}
				}
				for name := range mfs {
					if strings.HasPrefix(name, "DCGM_FI_") {
						assert.Contains(t, f.families, name, "only the file's names are exported")
					}
				}
				if hz, ok := mfs["DCGM_FI_DEV_SM_CLOCK_HERTZ"]; ok {
					for _, m := range hz.Metric {
						assert.Greater(t, value(m), 1e8, "an SM clock in hertz")
					}
				}
				if j, ok := mfs["DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL"]; ok {
					assert.Equal(t, dto.MetricType_COUNTER, j.GetType())
				}
				if f.name == "mixed" {
					sameInBothUnits(t, mfs, "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ", 1e6)
					sameInBothUnits(t, mfs, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 1e-3)
				}
			})
		}
	}
}

// sameInBothUnits checks that each GPU's new-unit series is its legacy
// series times the factor between the units.
func sameInBothUnits(t *testing.T, mfs map[string]*dto.MetricFamily, legacy, base string, factor float64) {
	t.Helper()
	byGPU := map[string]float64{}
	for _, m := range mfs[legacy].Metric {
		byGPU[labelOf(m, "UUID")+"/"+labelOf(m, "GPU_I_ID")] = value(m)
	}
	require.NotEmpty(t, byGPU)
	for _, m := range mfs[base].Metric {
		k := labelOf(m, "UUID") + "/" + labelOf(m, "GPU_I_ID")
		want, ok := byGPU[k]
		require.True(t, ok, "%s has a %s series for %s", legacy, base, k)
		assert.InDelta(t, want*factor, value(m), want*factor*1e-9, "%s of %s", base, k)
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return m.GetUntyped().GetValue()
}

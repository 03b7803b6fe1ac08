package compat

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// DCGM 4.7's names (NVIDIA's DCGM 4.7.0 field reference, kept in
// counters/fieldid/dcgm47.go) beside their legacy fields, one DCGM 4.6.1
// base-unit field (go-dcgm v1.4611.0's dcgm_fields.h) and dcgm-exporter
// 4.10's PCIe name: each new name is its legacy series in the new unit.
const dcgm47File = "DCGM_FI_DEV_FB_USED, gauge, MiB\nDCGM_FI_DEV_FB_USED_BYTES, gauge, bytes\n" +
	"DCGM_FI_DEV_GPU_UTIL, gauge, percent\nDCGM_FI_DEV_GPU_UTIL_RATIO, gauge, ratio\n" +
	"DCGM_FI_DEV_SM_CLOCK, gauge, MHz\nDCGM_FI_DEV_SM_CLOCK_HERTZ, gauge, Hz\n" +
	"DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL, gauge, MB/s\nDCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND, gauge, bytes/s\n" +
	"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND, gauge, bytes/s\n"

// Legacy values of the DCGM fake's host engine, and what it answers for a
// DCGM 4.7 ID: a value no derivation gives, so that a source reading the
// documented ID instead of deriving it fails below.
const (
	fakeGPUUtil  = 37
	fakeFBUsed   = 1234
	fakeNVLink   = 5000
	fakePCIeTX   = 123456789
	fakeDCGM47ID = -7
)

func dcgm47Gen(e dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
	if fieldid.DerivedOnly(field) {
		return dcgm.Value{Kind: dcgm.KindFloat64, Float: fakeDCGM47ID}, true
	}
	switch field {
	case fieldid.GPUUtil:
		return dcgm.Value{Kind: dcgm.KindInt64, Int: fakeGPUUtil}, true
	case fieldid.FBUsed:
		return dcgm.Value{Kind: dcgm.KindInt64, Int: fakeFBUsed}, true
	case fieldid.NVLinkThroughputTotal:
		return dcgm.Value{Kind: dcgm.KindInt64, Int: fakeNVLink}, true
	case fieldid.ProfPCIeTXBytes:
		return dcgm.Value{Kind: dcgm.KindInt64, Int: fakePCIeTX}, true
	}
	return realisticGen(e, field, seq)
}

func TestDCGM47NamesServeOnEverySource(t *testing.T) {
	sources := vocabularySources(t)
	fakes := map[string]*dcgmfake.Fake{}
	for _, v := range []string{"4.6.1", "4.5.2"} {
		sources["dcgm "+v] = func(clk *sourcetest.Clock) source.Source {
			prof := map[uint][]uint16{}
			for gpu := range uint(8) {
				prof[gpu] = []uint16{fieldid.ProfPCIeTXBytes}
			}
			fake := dcgmfake.New(dcgmfake.WithClock(clk), dcgmfake.WithGen(dcgm47Gen), dcgmfake.WithVersion(v),
				dcgmfake.WithProfiling(prof))
			fakes["dcgm "+v] = fake
			src, err := dcgm.New(fake, dcgm.Config{Mode: dcgm.ModeEmbedded, Window: 15 * time.Second, Log: quietLog(), Clock: clk})
			require.NoError(t, err)
			return src
		}
	}
	for name, open := range sources {
		t.Run(name, func(t *testing.T) {
			clk := sourcetest.NewClock(time.Unix(1_750_000_000, 0))
			src := open(clk)
			t.Cleanup(func() { _ = src.Close() })
			mfs := render(t, src, dcgm47File, clk)
			for _, fam := range []string{"DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_SM_CLOCK_HERTZ",
				"DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND"} {
				require.Contains(t, mfs, fam, "served under the name the file gives")
				require.NotEmpty(t, mfs[fam].Metric, fam)
			}
			sameInBothUnits(t, mfs, "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED_BYTES", 1<<20)
			sameInBothUnits(t, mfs, "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO", 0.01)
			sameInBothUnits(t, mfs, "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ", 1e6)
			// The legacy "MB/s" is the KiB/s / 1000, truncated: the bytes are
			// within one legacy step of it (exactly it where derived, finer
			// where NVML computes them from the KiB/s).
			nvlinkLegacy := map[string]float64{}
			for _, m := range mfs["DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL"].Metric {
				nvlinkLegacy[labelOf(m, "UUID")] = value(m)
			}
			for _, m := range mfs["DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND"].Metric {
				legacy, ok := nvlinkLegacy[labelOf(m, "UUID")]
				require.True(t, ok, labelOf(m, "UUID"))
				assert.GreaterOrEqual(t, value(m), legacy*1000*1024)
				assert.Less(t, value(m), (legacy+1)*1000*1024)
			}
			for _, m := range mfs["DCGM_FI_DEV_GPU_UTIL_RATIO"].Metric {
				assert.InDelta(t, 0.5, value(m), 0.5, "a 0-1 ratio")
			}
			for _, m := range mfs["DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND"].Metric {
				assert.GreaterOrEqual(t, value(m), 0.0)
			}
			fake := fakes[name]
			if fake == nil {
				return
			}
			for _, m := range mfs["DCGM_FI_DEV_GPU_UTIL_RATIO"].Metric {
				assert.InDelta(t, 0.37, value(m), 1e-12)
			}
			for _, m := range mfs["DCGM_FI_DEV_FB_USED_BYTES"].Metric {
				assert.Equal(t, float64(fakeFBUsed<<20), value(m))
			}
			for _, m := range mfs["DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND"].Metric {
				assert.Equal(t, float64(fakeNVLink*1000*1024), value(m))
			}
			for _, m := range mfs["DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND"].Metric {
				assert.Equal(t, float64(fakePCIeTX), value(m), "the same ID as DCGM_FI_PROF_PCIE_TX_BYTES")
			}
			// The documented DCGM 4.7 IDs are never asked for.
			for _, g := range fake.LiveFieldGroups() {
				for _, id := range g {
					assert.False(t, fieldid.DerivedOnly(id), "field %d watched", id)
				}
			}
		})
	}
}

package sim

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
)

// emitted collects once with every given field watched on a node of each
// model that together serve them all (the H100 has NVLinks, the RTX 6000
// Ada a fan) and returns the IDs that got a value or a text on either.
func emitted(t *testing.T, ids []uint16) map[uint16]bool {
	t.Helper()
	out := map[uint16]bool{}
	for _, model := range []string{"h100", "rtx6000ada"} {
		cfg := DefaultConfig()
		cfg.GPUs, cfg.Model = 1, model
		s, c := newSim(t, cfg, ids...)
		rec := newRec()
		run(t, s, c, rec, time.Second, 0)
		if model == "h100" {
			for k := range rec.unsup {
				assert.Equal(t, fieldid.FanSpeed, k.field, "the H100 lacks only a fan")
			}
		}
		for k := range rec.values {
			out[k.field] = true
		}
		for k := range rec.texts {
			out[k.field] = true
		}
		if len(rec.health) > 0 {
			out[fieldid.ExpGPUHealthStatus] = true
		}
		if len(rec.p2p) > 0 {
			out[fieldid.ExpP2PStatus] = true
		}
	}
	return out
}

func TestSimSupportMatchesEmittedFields(t *testing.T) {
	table := FieldIDs()
	got := emitted(t, table)
	sup := Support()
	for _, id := range table {
		assert.True(t, got[id], "the field table lists %d (%s) but the simulator does not emit it", id, nameOf(id))
		ok, _ := sup.Reads(id)
		assert.True(t, ok, "Support omits %d (%s)", id, nameOf(id))
	}
	for _, e := range fieldid.Current() {
		ok, _ := sup.Reads(e.ID)
		assert.Equal(t, got[e.ID], ok, "Support says %v for %s", ok, e.Name)
	}
	inTable := map[uint16]bool{}
	for _, id := range table {
		inTable[id] = true
	}
	// MIG instances add no field of their own.
	cfg := DefaultConfig()
	cfg.GPUs, cfg.MIG = 1, "all"
	s, c := newSim(t, cfg, table...)
	rec := newRec()
	run(t, s, c, rec, time.Second, 0)
	for k := range rec.values {
		assert.True(t, inTable[k.field], "MIG emits %d", k.field)
	}
}

// legacyNames are the 1.x exporter's names whose DCGM name is not simply
// the upper-cased legacy one.
var legacyNames = map[string]string{
	"dcgm_sm_clock":                          "DCGM_FI_DEV_SM_CLOCK",
	"dcgm_memory_clock":                      "DCGM_FI_DEV_MEM_CLOCK",
	"dcgm_memory_temp":                       "DCGM_FI_DEV_MEMORY_TEMP",
	"dcgm_gpu_temp":                          "DCGM_FI_DEV_GPU_TEMP",
	"dcgm_power_usage":                       "DCGM_FI_DEV_POWER_USAGE",
	"dcgm_total_energy_consumption":          "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
	"dcgm_pcie_replay_counter":               "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
	"dcgm_gpu_utilization":                   "DCGM_FI_DEV_GPU_UTIL",
	"dcgm_mem_copy_utilization":              "DCGM_FI_DEV_MEM_COPY_UTIL",
	"dcgm_enc_utilization":                   "DCGM_FI_DEV_ENC_UTIL",
	"dcgm_dec_utilization":                   "DCGM_FI_DEV_DEC_UTIL",
	"dcgm_xid_errors":                        "DCGM_FI_DEV_XID_ERRORS",
	"dcgm_power_violation":                   "DCGM_FI_DEV_POWER_VIOLATION",
	"dcgm_thermal_violation":                 "DCGM_FI_DEV_THERMAL_VIOLATION",
	"dcgm_sync_boost_violation":              "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
	"dcgm_board_limit_violation":             "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
	"dcgm_low_util_violation":                "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
	"dcgm_reliability_violation":             "DCGM_FI_DEV_RELIABILITY_VIOLATION",
	"dcgm_fb_free":                           "DCGM_FI_DEV_FB_FREE",
	"dcgm_fb_used":                           "DCGM_FI_DEV_FB_USED",
	"dcgm_ecc_sbe_volatile_total":            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
	"dcgm_ecc_dbe_volatile_total":            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
	"dcgm_ecc_sbe_aggregate_total":           "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
	"dcgm_ecc_dbe_aggregate_total":           "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
	"dcgm_retired_pages_sbe":                 "DCGM_FI_DEV_RETIRED_SBE",
	"dcgm_retired_pages_dbe":                 "DCGM_FI_DEV_RETIRED_DBE",
	"dcgm_retired_pages_pending":             "DCGM_FI_DEV_RETIRED_PENDING",
	"dcgm_nvlink_flit_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
	"dcgm_nvlink_data_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
	"dcgm_nvlink_replay_error_count_total":   "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
	"dcgm_nvlink_recovery_error_count_total": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
	"dcgm_nvlink_bandwidth_total":            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
}

func compatDir(t *testing.T) string { return compattest.Dir(t) }

// compatFieldNames returns every field name of a counters file, those of
// commented-out lines included.
func compatFieldNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(sc.Text()), "#"))
		parts := strings.Split(line, ",")
		if len(parts) < 3 {
			continue
		}
		name := strings.TrimSpace(parts[0])
		typ := strings.TrimSpace(parts[1])
		if typ == "gauge" || typ == "counter" || typ == "label" {
			names = append(names, name)
		}
	}
	require.NoError(t, sc.Err())
	return names
}

func TestCompatFilesAreProduced(t *testing.T) {
	dir := compatDir(t)
	byName := map[string]uint16{
		"DCGM_EXP_XID_ERRORS_COUNT":   fieldid.ExpXIDErrorsCount,
		"DCGM_EXP_CLOCK_EVENTS_COUNT": fieldid.ExpClockEventsCount,
	}
	for id := range fieldsByID {
		byName[nameOf(id)] = id
	}
	resolve := func(name string) (uint16, bool) {
		if full, ok := legacyNames[name]; ok {
			name = full
		}
		id, ok := byName[strings.ToUpper(name)]
		return id, ok
	}
	var ids []uint16
	for _, file := range []string{"default-counters.csv", "dcp-metrics-included.csv", "1.x-compatibility-metrics.csv"} {
		names := compatFieldNames(t, filepath.Join(dir, file))
		require.Greater(t, len(names), 30, "%s: too few fields found", file)
		for _, n := range names {
			id, ok := resolve(n)
			require.True(t, ok, "%s: field %s is not simulated", file, n)
			switch id {
			case fieldid.ExpXIDErrorsCount:
				id = fieldid.XIDErrors // derived by the engine from XID events
			case fieldid.ExpClockEventsCount:
				id = fieldid.ClocksEventReasons
			}
			ids = append(ids, id)
		}
	}
	got := emitted(t, ids)
	for _, id := range ids {
		assert.True(t, got[id], "field %d (%s) is not produced", id, nameOf(id))
	}
}

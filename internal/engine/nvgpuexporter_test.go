package engine

import (
	"errors"
	"sort"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

const nvgpuExporterCSV = `nvidia_smi_gpu_info, gauge, info
nvidia_smi_index, gauge, index
name, label, name
cuda_version, label, cuda
nvidia_smi_memory_used_bytes, gauge, memory.used [MiB]
nvidia_smi_utilization_gpu_ratio, gauge, utilization.gpu [%]
nvidia_smi_clocks_event_reasons_hw_thermal_slowdown, gauge, r
nvidia_smi_clocks_event_reasons_gpu_idle, gauge, r
nvidia_smi_mig_sm_activity_ratio, gauge, a
nvidia_smi_mig_info, gauge, mig
nvidia_smi_xid_errors_total, counter, x
nvidia_smi_xid_last_timestamp_seconds, gauge, x
DCGM_FI_PROF_SM_ACTIVE, gauge, a
`

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.Label {
		out = append(out, l.GetName())
	}
	sort.Strings(out)
	return out
}

// A counters file of nvidia_gpu_exporter names renders that exporter's
// series: its names, units and labels, per GPU whether MIG or not, MIG
// series per GPU instance, no host label.
func TestNvidiaGPUExporterLayout(t *testing.T) {
	clk := newClock()
	src := migSource()
	values := src.Values
	src.Values = func(e *source.Entity, f uint16, ts time.Time) (float64, bool) {
		switch f {
		case fieldid.FBUsed:
			return 1024, e.Kind == source.GPU
		case fieldid.GPUUtil:
			return 87, e.Kind == source.GPU
		case fieldid.ClocksEventReasons:
			return 0x41, e.Kind == source.GPU
		}
		return values(e, f, ts)
	}
	src.Texts = map[uint16]string{fieldid.Name: "NVIDIA H100 80GB HBM3", fieldid.CUDADriverVersion: "12080"}
	e := newTestEngine(t, nvgpuExporterCSV, src, clk)
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[1], Code: 79, At: clk.Now()}}
	collectAll(t, e)
	mfs := scrape(t, e)

	tests := []struct {
		family string
		want   map[string]float64 // by uuid and gpu_instance_id
		labels []string
	}{
		{"nvidia_smi_memory_used_bytes", map[string]float64{"00000000-0000-0000-0000-000000000000": 1 << 30, "00000001-0000-0000-0000-000000000000": 1 << 30}, []string{"uuid"}},
		{"nvidia_smi_utilization_gpu_ratio", map[string]float64{"00000000-0000-0000-0000-000000000000": 0.87, "00000001-0000-0000-0000-000000000000": 0.87}, []string{"uuid"}},
		{"nvidia_smi_clocks_event_reasons_hw_thermal_slowdown", map[string]float64{"00000000-0000-0000-0000-000000000000": 1, "00000001-0000-0000-0000-000000000000": 1}, []string{"uuid"}},
		{"nvidia_smi_clocks_event_reasons_gpu_idle", map[string]float64{"00000000-0000-0000-0000-000000000000": 1, "00000001-0000-0000-0000-000000000000": 1}, []string{"uuid"}},
		{"nvidia_smi_index", map[string]float64{"00000000-0000-0000-0000-000000000000": 0, "00000001-0000-0000-0000-000000000000": 1}, []string{"uuid"}},
		{"DCGM_FI_PROF_SM_ACTIVE", map[string]float64{}, []string{"uuid"}},
		{"nvidia_smi_mig_sm_activity_ratio", map[string]float64{"00000001-0000-0000-0000-000000000000/1": 110, "00000001-0000-0000-0000-000000000000/2": 120}, []string{"gpu_instance_id", "uuid"}},
		{"nvidia_smi_mig_info", map[string]float64{"00000001-0000-0000-0000-000000000000/1": 1, "00000001-0000-0000-0000-000000000000/2": 1}, []string{"gpu_instance_id", "mig_uuid", "profile", "uuid"}},
		{"nvidia_smi_xid_errors_total", map[string]float64{"00000001-0000-0000-0000-000000000000": 1}, []string{"uuid", "xid"}},
		{"nvidia_smi_gpu_info", map[string]float64{"00000000-0000-0000-0000-000000000000": 1, "00000001-0000-0000-0000-000000000000": 1}, []string{"cuda_version", "index", "name", "pci_bus_id", "uuid"}},
	}
	for _, tt := range tests {
		t.Run(tt.family, func(t *testing.T) {
			got := map[string]float64{}
			if mf := mfs[tt.family]; mf != nil {
				for _, m := range mf.Metric {
					assert.Equal(t, tt.labels, labelNames(m))
					k := labelOf(m, "uuid")
					if gi := labelOf(m, "gpu_instance_id"); gi != "" {
						k += "/" + gi
					}
					got[k] = value(m)
				}
			}
			assert.InDeltaMapValues(t, tt.want, got, 1e-9)
		})
	}
	info := series(mfs, "nvidia_smi_gpu_info", map[string]string{"index": "1"})
	require.Len(t, info, 1)
	assert.Equal(t, "12.8", labelOf(info[0], "cuda_version"))
	assert.Equal(t, "NVIDIA H100 80GB HBM3", labelOf(info[0], "name"))
	assert.Equal(t, "00000000:02:00.0", labelOf(info[0], "pci_bus_id"))
	assert.Nil(t, mfs["gpuscope_clock_event_active"], "one reason's bit is not gpuscope's clock-event family")
	assert.Nil(t, mfs["gpuscope_xid_errors_total"], "the XID roles are not gpuscope's XID family")
}

// The collection roles summarise the field groups as that exporter reports
// its single collection.
func TestCollectStats(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var c collectStats
	_, ok := c.value(counters.RoleCollectSuccess, 2)
	assert.False(t, ok, "nothing before the first collection")
	c.note(0, t0, 10*time.Millisecond, nil)
	c.note(1, t0.Add(time.Second), 30*time.Millisecond, nil)
	c.note(1, t0.Add(2*time.Second), 20*time.Millisecond, errors.New("lost"))
	tests := []struct {
		role counters.Role
		want float64
		ok   bool
	}{
		{counters.RoleCollectSuccess, 0, true},
		{counters.RoleCollectTimestamp, 1000, true},
		{counters.RoleCollectDuration, 0.02, true},
		{counters.RoleCollectFailures, 1, true},
	}
	for _, tt := range tests {
		v, ok := c.value(tt.role, 2)
		assert.Equal(t, tt.ok, ok, "role %d", tt.role)
		assert.InDelta(t, tt.want, v, 1e-9, "role %d", tt.role)
	}
	v, _ := c.value(counters.RoleCollectSuccess, 1)
	assert.Equal(t, 1.0, v, "groups past the plan's count are not read")
	c.note(maxGroups, t0, 0, nil)
	assert.Len(t, c.groups, 2, "bounded by the plan's groups")
}

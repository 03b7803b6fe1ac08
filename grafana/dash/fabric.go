package dash

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
)

// fabricRow shows, per GPU, what the fabric alerts read: the fabric
// manager's status, NVML's health summary and the conditions of its mask.
func fabricRow(b *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	return b.WithRow(dashboard.NewRowBuilder("NVLink fabric (NVSwitch systems)")).
		WithPanel(fabricPanel("Fabric manager", "DCGM_FI_DEV_FABRIC_MANAGER_STATUS: the GPU's registration with the fabric manager (dcgmFabricManagerStatus_t). n/a where the counters file does not ask for it.",
			fabricManagerMappings, q(ng("DCGM_FI_DEV_FABRIC_MANAGER_STATUS", ""), gpuLegend))).
		WithPanel(fabricPanel("Fabric health", "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY (NVML_GPU_FABRIC_HEALTH_SUMMARY_*); GPUFabricUnhealthy and GPUFabricDegraded read it.",
			fabricHealthMappings, q(ng("DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", ""), gpuLegend))).
		WithPanel(fabricPanel("Fabric conditions", "The conditions of DCGM_FI_DEV_FABRIC_HEALTH_MASK (NVML_GPU_FABRIC_HEALTH_MASK_*), active while NVML reports them true.",
			clockEventMappings, fabricConditions()...))
}

// fabricPanel is a state timeline of one fabric field per GPU, its values
// shown as the words DCGM and NVML give them.
func fabricPanel(title, desc string, mappings []dashboard.ValueMapping, qs ...query) *statetimeline.PanelBuilder {
	p := statetimeline.NewPanelBuilder().Title(title).Description(desc).
		Datasource(ds).NoValue(noValue).Span(8).Height(8).Mappings(mappings).
		ShowValue(common.VisibilityModeNever).MergeValues(true)
	for _, t := range rangeTargets(qs) {
		p.WithTarget(t)
	}
	return p
}

func valueWords(words map[string][2]string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for v, w := range words {
		opts[v] = dashboard.ValueMappingResult{Text: ptr(w[0]), Color: ptr(w[1])}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// dcgmFabricManagerStatus_t, dcgm_structs.h (go-dcgm v1.4611.0).
var fabricManagerMappings = valueWords(map[string][2]string{
	"0": {"not supported", "transparent"}, "1": {"not started", "blue"}, "2": {"in progress", "blue"},
	"3": {"success", "green"}, "4": {"failure", "red"}, "5": {"unrecognized", "orange"}, "6": {"NVML too old", "orange"},
})

// NVML_GPU_FABRIC_HEALTH_SUMMARY_*, nvml.h.
var fabricHealthMappings = valueWords(map[string][2]string{
	"0": {"not supported", "transparent"}, "1": {"healthy", "green"}, "2": {"unhealthy", "red"}, "3": {"limited capacity", "orange"},
})

// fabricConditions reads the two-bit conditions of the health mask as 0/1,
// as NVML_GPU_FABRIC_HEALTH_TEST(mask, X, _TRUE) does: (mask >> shift) & 3 == 1.
func fabricConditions() []query {
	var out []query
	for _, c := range []struct {
		name  string
		shift uint
	}{{"bandwidth degraded", 0}, {"route recovery", 2}, {"route unhealthy", 4}, {"access-timeout recovery", 6}} {
		expr := fmt.Sprintf(`floor((%s) / %d) %% 4 == bool 1`, ng("DCGM_FI_DEV_FABRIC_HEALTH_MASK", ""), 1<<c.shift)
		out = append(out, q(expr, c.name+" · "+gpuLegend))
	}
	return out
}

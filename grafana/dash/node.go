package dash

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/statushistory"
)

// The host label is `Hostname` as dcgm-exporter's releases and gpuscope by
// default write it, or `hostname` as dcgm-exporter's main branch does: a
// selector cannot match either, so every query is the union of one per
// spelling (a series carries one of them, so nothing is counted twice).
const (
	nodeSelUpper = `cluster=~"$cluster", Hostname=~"$node", gpu=~"$gpu"`
	nodeSelLower = `cluster=~"$cluster", hostname=~"$node", gpu=~"$gpu"`
)

// eitherHost is expr written once per spelling of the host label, joined.
func eitherHost(expr func(sel string) string) string {
	return expr(nodeSelUpper) + " or " + expr(nodeSelLower)
}

// ng is a node-dashboard query over the selected GPUs, legend-ready.
func ng(metric, extra string) string {
	return shortUUID(eitherHost(func(sel string) string {
		if extra != "" {
			sel += ", " + extra
		}
		return metric + "{" + sel + "}"
	}))
}

// ngRate is the per-second rate of a counter over the selected GPUs;
// label_replace goes outside, as a range needs a plain selector.
func ngRate(metric string) string {
	return shortUUID(eitherHost(func(sel string) string { return "rate(" + metric + "{" + sel + "}[$__rate_interval])" }))
}

// hostVar lists the nodes whichever host label they carry: label_values
// reads one label, so it is a query_result whose regex takes the value of
// either.
func hostVar() *dashboard.QueryVariableBuilder {
	expr := MustBilingual(`query_result(group by (Hostname, hostname) (DCGM_FI_DEV_GPU_TEMP{cluster=~"$cluster"}))`)
	return dashboard.NewQueryVariableBuilder("node").Label("Node").
		Query(dashboard.StringOrMap{String: ptr(expr)}).Definition(expr).Regex(`/[Hh]ostname="([^"]+)"/`).
		Datasource(ds).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortNaturalAsc).Multi(false).IncludeAll(false)
}

// gpuVar lists the GPUs of the node, whichever host label it carries.
func gpuVar() *dashboard.QueryVariableBuilder {
	expr := MustBilingual(`query_result(group by (gpu) (DCGM_FI_DEV_GPU_TEMP{cluster=~"$cluster", Hostname=~"$node"} or DCGM_FI_DEV_GPU_TEMP{cluster=~"$cluster", hostname=~"$node"}))`)
	return dashboard.NewQueryVariableBuilder("gpu").Label("GPU").
		Query(dashboard.StringOrMap{String: ptr(expr)}).Definition(expr).Regex(`/gpu="([^"]+)"/`).
		Datasource(ds).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortNaturalAsc).Multi(true).IncludeAll(true).AllValue(".*")
}

// heat is a status-history grid: one row per GPU, one cell per interval,
// coloured by value, which reads as a heatmap across the node's GPUs.
func heat(title, desc, unit string, expr string, steps []dashboard.Threshold) *statushistory.PanelBuilder {
	return statushistory.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).
		NoValue(noValue).Span(12).Height(9).ShowValue(common.VisibilityModeNever).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdThresholds)).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)).
		WithTarget(rangeTargets([]query{q(expr, gpuLegend)})[0]).MaxDataPoints(60)
}

func step(v *float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: v, Color: color}
}

// clockEventMappings shows the 0/1 of gpuscope_clock_event_active as words.
var clockEventMappings = []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
	Type: dashboard.MappingTypeValueToText,
	Options: map[string]dashboard.ValueMappingResult{
		"0": {Text: ptr("clear"), Color: ptr("transparent")},
		"1": {Text: ptr("active"), Color: ptr("orange")},
	},
}}}

func Node() (dashboard.Dashboard, error) {
	toPod := link("Pod ${__data.fields.namespace}/${__data.fields.pod}", PodUID,
		"namespace", "${__data.fields.namespace}", "pod", "${__data.fields.pod}")
	b := base(NodeUID, "gpuscope / Node",
		"The GPUs of one node: a row per GPU with activity, memory, temperature, power, clocks and traffic; clock events and errors.").
		WithVariable(clusterVar()).
		WithVariable(hostVar()).
		WithVariable(gpuVar()).
		WithRow(dashboard.NewRowBuilder("GPUs of $node")).
		WithPanel(tablePanel("GPUs",
			"Every GPU of the node and the pod holding it. Click a pod to open it.", 24, 7).
			WithTarget(instantTable(eitherHost(func(sel string) string { return `DCGM_FI_DEV_GPU_UTIL{` + sel + `}` }))).
			DataLinks([]cogLink{toPod}).
			WithTransformation(organize(
				map[string]bool{"Time": true, "__name__": true, "instance": true, "job": true, "Hostname": true, "hostname": true, "cluster": true},
				map[string]string{"Value": "GPU util %", "gpu": "GPU", "modelName": "Model"}))).
		WithPanel(heat("Temperature across GPUs", "", "celsius", ng("DCGM_FI_DEV_GPU_TEMP", ""),
			[]dashboard.Threshold{step(nil, "blue"), step(ptr(50.0), "green"), step(ptr(75.0), "yellow"), step(ptr(85.0), "orange"), step(ptr(95.0), "red")})).
		WithPanel(heat("Memory used across GPUs", "", "percentunit",
			shortUUID(eitherHost(func(sel string) string {
				return `DCGM_FI_DEV_FB_USED{` + sel + `} / (DCGM_FI_DEV_FB_USED{` + sel + `} + DCGM_FI_DEV_FB_FREE{` + sel + `})`
			})),
			[]dashboard.Threshold{step(nil, "blue"), step(ptr(0.25), "green"), step(ptr(0.75), "yellow"), step(ptr(0.9), "red")})).
		// One row per GPU: Grafana repeats the row and the panels under it
		// for every value of $gpu.
		WithRow(dashboard.NewRowBuilder("GPU $gpu").Repeat("gpu")).
		WithPanel(timeSeries("Utilisation", "DCGM_FI_DEV_GPU_UTIL and memory-copy utilisation.", "percent", 8, 7,
			q(ng("DCGM_FI_DEV_GPU_UTIL", ""), "util · "+gpuLegend),
			q(ng("DCGM_FI_DEV_MEM_COPY_UTIL", ""), "mem copy · "+gpuLegend))).
		WithPanel(timeSeries("SM, tensor and DRAM activity", "Profiling ratios; absent (n/a) where the GPU has no profiling counters.", "percentunit", 8, 7,
			q(ng("DCGM_FI_PROF_SM_ACTIVE", ""), "SM · "+gpuLegend),
			q(ng("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", ""), "tensor · "+gpuLegend),
			q(ng("DCGM_FI_PROF_DRAM_ACTIVE", ""), "DRAM · "+gpuLegend))).
		WithPanel(timeSeries("Memory", "", "decmbytes", 8, 7,
			q(ng("DCGM_FI_DEV_FB_USED", ""), "used · "+gpuLegend),
			q(ng("DCGM_FI_DEV_FB_TOTAL", ""), "total · "+gpuLegend))).
		WithPanel(timeSeries("Temperatures", "", "celsius", 8, 7,
			q(ng("DCGM_FI_DEV_GPU_TEMP", ""), "GPU · "+gpuLegend),
			q(ng("DCGM_FI_DEV_MEMORY_TEMP", ""), "memory · "+gpuLegend))).
		WithPanel(timeSeries("Power against limit", "", "watt", 8, 7,
			q(ng("DCGM_FI_DEV_POWER_USAGE", ""), "power · "+gpuLegend),
			q(ng("DCGM_FI_DEV_POWER_MGMT_LIMIT", ""), "limit · "+gpuLegend))).
		WithPanel(timeSeries("Clocks", "", "rotmhz", 8, 7,
			q(ng("DCGM_FI_DEV_SM_CLOCK", ""), "SM · "+gpuLegend),
			q(ng("DCGM_FI_DEV_MEM_CLOCK", ""), "memory · "+gpuLegend))).
		WithPanel(timeSeries("PCIe traffic", "", "Bps", 12, 7,
			q(ng("DCGM_FI_PROF_PCIE_TX_BYTES", ""), "tx · "+gpuLegend),
			q(ng("DCGM_FI_PROF_PCIE_RX_BYTES", ""), "rx · "+gpuLegend))).
		WithPanel(timeSeries("NVLink traffic", "", "Bps", 12, 7,
			q(ng("DCGM_FI_PROF_NVLINK_TX_BYTES", ""), "tx · "+gpuLegend),
			q(ng("DCGM_FI_PROF_NVLINK_RX_BYTES", ""), "rx · "+gpuLegend))).
		WithRow(dashboard.NewRowBuilder("Clock events")).
		WithPanel(statetimeline.NewPanelBuilder().Title("Clock-event reasons").
			Description("Why the clocks were below their maximum. gpu_idle is left out: it is the normal state of an idle GPU.").
			Datasource(ds).NoValue(noValue).Span(24).Height(10).Mappings(clockEventMappings).
			ShowValue(common.VisibilityModeNever).MergeValues(true).
			WithTarget(rangeTargets([]query{q(ng("gpuscope_clock_event_active", `clock_event!="gpu_idle"`), "GPU {{gpu}} · {{clock_event}}")})[0])).
		WithRow(dashboard.NewRowBuilder("Errors")).
		WithPanel(timeSeries("Last XID", "DCGM_FI_DEV_XID_ERRORS: the code of the last XID, 0 when none.", "none", 8, 7,
			q(ng("DCGM_FI_DEV_XID_ERRORS", ""), gpuLegend))).
		WithPanel(timeSeries("ECC errors (volatile)", "", "none", 8, 7,
			q(ng("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", ""), "double-bit · "+gpuLegend),
			q(ng("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", ""), "single-bit · "+gpuLegend))).
		WithPanel(timeSeries("Memory repair", "Remapped rows and pages pending retirement.", "none", 8, 7,
			q(ng("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", ""), "uncorrectable remapped rows · "+gpuLegend),
			q(ng("DCGM_FI_DEV_ROW_REMAP_FAILURE", ""), "remap failure · "+gpuLegend),
			q(ng("DCGM_FI_DEV_RETIRED_PENDING", ""), "pages pending retirement · "+gpuLegend))).
		WithPanel(timeSeries("PCIe replays", "", "ops", 12, 7,
			q(ngRate("DCGM_FI_DEV_PCIE_REPLAY_COUNTER"), gpuLegend))).
		WithPanel(timeSeries("Throttled time", "Share of time clocks were held by power or thermal limits.", "percentunit", 12, 7,
			q(ngRate("DCGM_FI_DEV_POWER_VIOLATION")+" / 1e9", "power · "+gpuLegend),
			q(ngRate("DCGM_FI_DEV_THERMAL_VIOLATION")+" / 1e9", "thermal · "+gpuLegend)))
	return fabricRow(b).Build()
}

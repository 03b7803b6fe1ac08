package dash

import (
	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
)

// The cluster dashboard reads the recording rules of
// deploy/prometheus/gpuscope-recording.yml, so it stays fast on 10,000 GPUs;
// only the idle-but-allocated table reads per-GPU series, filtered hard.
const cl = `cluster=~"$cluster"`

func statPanel(title, desc, unit, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).
		NoValue(noValue).Span(4).Height(4).GraphMode(common.BigValueGraphModeArea).
		WithTarget(rangeTargets([]query{q(expr, "")})[0])
}

func bars(title, desc, unit string, w uint32, expr, legend string, links ...*dashboard.DashboardLinkBuilder) *bargauge.PanelBuilder {
	p := bargauge.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).
		NoValue(noValue).Span(w).Height(8).Orientation(common.VizOrientationHorizontal).
		DisplayMode(common.BarGaugeDisplayModeGradient).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(rangeTargets([]query{q(expr, legend)})[0])
	if len(links) > 0 {
		p.DataLinks(asLinkBuilders(links))
	}
	return p
}

func Cluster() (dashboard.Dashboard, error) {
	toNode := link("Node ${__data.fields.Hostname}", NodeUID, "node", "${__data.fields.Hostname}")
	toPod := link("Pod ${__data.fields.namespace}/${__data.fields.pod}", PodUID,
		"namespace", "${__data.fields.namespace}", "pod", "${__data.fields.pod}")
	toNodeSeries := link("Node ${__field.labels.Hostname}", NodeUID, "node", "${__field.labels.Hostname}")
	toPodSeries := link("Pod ${__field.labels.namespace}/${__field.labels.pod}", PodUID,
		"namespace", "${__field.labels.namespace}", "pod", "${__field.labels.pod}")

	b := base(ClusterUID, "gpuscope / Cluster",
		"Every GPU of the cluster: inventory, allocation against real activity, who uses the GPUs, power and health.").
		WithVariable(clusterVar()).
		WithRow(dashboard.NewRowBuilder("Inventory")).
		WithPanel(statPanel("GPUs", "GPUs reporting to Prometheus.", "none",
			`sum(node_model:gpuscope_gpus:count{`+cl+`})`)).
		WithPanel(statPanel("Allocated", "GPUs held by a pod.", "none",
			`sum(node:gpuscope_gpus_allocated:count{`+cl+`})`)).
		WithPanel(statPanel("Busy", "Sum of SM activity: how many GPUs' worth of work is running.", "none",
			`sum(node:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`})`)).
		WithPanel(statPanel("Allocated GPU efficiency", "Mean SM activity of the GPUs held by pods.", "percentunit",
			`sum(node_allocated:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`}) / sum(node:gpuscope_gpus_allocated:count{`+cl+`})`)).
		WithPanel(statPanel("Power", "Power drawn by all GPUs.", "watt",
			`sum(node:DCGM_FI_DEV_POWER_USAGE:sum{`+cl+`})`)).
		WithPanel(statPanel("Energy in range", "Energy used by all GPUs over the dashboard's time range.", "kwatth",
			`sum(avg_over_time(node:DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION:rate5m_watts{`+cl+`}[$__range])) * $__range_s / 3600 / 1000`)).
		WithPanel(tablePanel("GPUs by model and node",
			"Click a node to open its dashboard.", 12, 9).
			WithTarget(instantTable(`node_model:gpuscope_gpus:count{` + cl + `}`)).
			DataLinks(asLinkBuilders([]*dashboard.DashboardLinkBuilder{toNode})).
			WithTransformation(organize(map[string]bool{"Time": true}, map[string]string{"Value": "GPUs", "Hostname": "Node", "modelName": "Model"}))).
		WithPanel(bars("GPUs by model", "", "none", 12,
			`sum by (modelName) (node_model:gpuscope_gpus:count{`+cl+`})`, "{{modelName}}")).
		WithRow(dashboard.NewRowBuilder("Allocation versus activity")).
		WithPanel(timeSeries("Allocated versus busy",
			"Busy is the sum of SM activity of the allocated GPUs: the gap to allocated is paid for and unused.", "none", 12, 8,
			q(`sum(node_model:gpuscope_gpus:count{`+cl+`})`, "GPUs"),
			q(`sum(node:gpuscope_gpus_allocated:count{`+cl+`})`, "allocated"),
			q(`sum(node_allocated:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`})`, "busy (allocated)"))).
		WithPanel(timeSeries("SM activity by model", "", "percentunit", 12, 8,
			q(`model:DCGM_FI_PROF_SM_ACTIVE:avg{`+cl+`}`, "{{modelName}}"))).
		WithPanel(tablePanel("Idle but allocated",
			"GPUs held by a pod whose SM activity averaged under 5% over the time range: paid for, unused. Click to open the pod.", 24, 8).Unit("percentunit").
			WithTarget(instantTable(`avg_over_time(DCGM_FI_PROF_SM_ACTIVE{` + cl + `, pod!=""}[$__range]) < 0.05`)).
			DataLinks(asLinkBuilders([]*dashboard.DashboardLinkBuilder{toPod})).
			WithTransformation(organize(
				map[string]bool{"Time": true, "__name__": true, "device": true, "pci_bus_id": true, "DCGM_FI_DRIVER_VERSION": true, "instance": true, "job": true},
				map[string]string{"Value": "mean SM activity"}))).
		WithRow(dashboard.NewRowBuilder("Who uses the GPUs")).
		WithPanel(bars("GPU-hours held by namespace", "GPUs held, integrated over the time range.", "none", 8,
			`topk(10, avg_over_time(namespace:gpuscope_gpus_allocated:count{`+cl+`}[$__range]) * $__range_s / 3600)`, "{{namespace}}")).
		WithPanel(bars("Busy GPU-hours by namespace", "SM activity, integrated over the time range.", "none", 8,
			`topk(10, avg_over_time(namespace:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`}[$__range]) * $__range_s / 3600)`, "{{namespace}}")).
		WithPanel(bars("Busy GPU-hours by pod", "Click a pod to open it.", "none", 8,
			`topk(10, avg_over_time(namespace_pod:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`}[$__range]) * $__range_s / 3600)`, "{{namespace}}/{{pod}}", toPodSeries)).
		WithRow(dashboard.NewRowBuilder("Power and energy")).
		WithPanel(timeSeries("Power by node", "Click a node to open it.", "watt", 12, 8,
			q(`node:DCGM_FI_DEV_POWER_USAGE:sum{`+cl+`}`, "{{Hostname}}")).
			DataLinks(asLinkBuilders([]*dashboard.DashboardLinkBuilder{toNodeSeries}))).
		WithPanel(timeSeries("Power by model, against the limits", "", "watt", 12, 8,
			q(`model:DCGM_FI_DEV_POWER_USAGE:sum{`+cl+`}`, "{{modelName}}"),
			q(`sum(node:DCGM_FI_DEV_POWER_MGMT_LIMIT:sum{`+cl+`})`, "sum of power limits"))).
		WithRow(dashboard.NewRowBuilder("Health")).
		WithPanel(bars("GPUs whose last XID is not 0, by node", "From DCGM_FI_DEV_XID_ERRORS; 0 on a healthy node.", "none", 6,
			`node:gpuscope_gpus_last_xid_nonzero:count{`+cl+`}`, "{{Hostname}}", toNodeSeries)).
		WithPanel(bars("Uncorrectable ECC errors by node", "Volatile double-bit errors since the last driver load.", "none", 6,
			`node:DCGM_FI_DEV_ECC_DBE_VOL_TOTAL:sum{`+cl+`}`, "{{Hostname}}", toNodeSeries)).
		WithPanel(timeSeries("GPUs throttled, by reason", "GPUs with each clock-event reason set.", "none", 6, 8,
			q(`sum by (clock_event) (node_clock_event:gpuscope_clock_event_active:sum{`+cl+`, clock_event!="gpu_idle"})`, "{{clock_event}}"))).
		WithPanel(bars("Hottest GPU per node", "", "celsius", 6,
			`node:DCGM_FI_DEV_GPU_TEMP:max{`+cl+`}`, "{{Hostname}}", toNodeSeries))
	return b.Build()
}

func asLinkBuilders(links []*dashboard.DashboardLinkBuilder) []cogLink {
	out := make([]cogLink, 0, len(links))
	for _, l := range links {
		out = append(out, l)
	}
	return out
}

// organize hides and renames table columns.
func organize(hide map[string]bool, rename map[string]string) dashboard.DataTransformerConfig {
	return dashboard.DataTransformerConfig{
		Id:      "organize",
		Options: map[string]any{"excludeByName": hide, "renameByName": rename},
	}
}

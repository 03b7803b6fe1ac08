package dash

import (
	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
)

// The cluster dashboard reads only the recording rules of
// deploy/prometheus/gpuscope-recording.yml, never a per-GPU series, so its
// cost follows the number of nodes, pods and jobs, not of GPUs: the stat
// panels read one series per cluster, the tables and bars one per node,
// pod or job (grafana/verify checks this, scripts/fleet.sh times it).
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
	toNode := link("Node ${__data.fields.node}", NodeUID, "node", "${__data.fields.node}")
	toPod := link("Pod ${__data.fields.namespace}/${__data.fields.pod}", PodUID,
		"namespace", "${__data.fields.namespace}", "pod", "${__data.fields.pod}")
	toNodeSeries := link("Node ${__field.labels.node}", NodeUID, "node", "${__field.labels.node}")
	toPodSeries := link("Pod ${__field.labels.namespace}/${__field.labels.pod}", PodUID,
		"namespace", "${__field.labels.namespace}", "pod", "${__field.labels.pod}")

	b := base(ClusterUID, "gpuscope / Cluster",
		"Every GPU of the cluster: inventory, allocation against real activity, who uses the GPUs, power and health.").
		// One series per cluster, rather than every GPU's.
		WithVariable(labelVar("cluster", "Cluster", "cluster:gpuscope_gpus:count", "cluster", false)).
		WithVariable(workloadVar()).
		WithRow(dashboard.NewRowBuilder("Inventory")).
		WithPanel(statPanel("GPUs", "GPUs reporting to Prometheus.", "none",
			`sum(cluster:gpuscope_gpus:count{`+cl+`})`)).
		WithPanel(statPanel("Allocated", "GPUs held by a pod.", "none",
			`sum(cluster:gpuscope_gpus_allocated:count{`+cl+`})`)).
		WithPanel(statPanel("Busy", "Sum of SM activity: how many GPUs' worth of work is running.", "none",
			`sum(cluster:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`})`)).
		WithPanel(statPanel("Allocated GPU efficiency", "Mean SM activity of the GPUs held by pods.", "percentunit",
			`sum(cluster_allocated:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`}) / sum(cluster:gpuscope_gpus_allocated:count{`+cl+`})`)).
		WithPanel(statPanel("Power", "Power drawn by all GPUs.", "watt",
			`sum(cluster:DCGM_FI_DEV_POWER_USAGE:sum{`+cl+`})`)).
		WithPanel(statPanel("Energy in range", "Energy used by all GPUs over the dashboard's time range, from their energy counters.", "kwatth",
			`sum(sum_over_time(cluster:gpuscope_energy_joules:increase1m{`+cl+`}[$__range])) / `+joulesPerKWh)).
		WithPanel(tablePanel("GPUs by model and node",
			"Click a node to open its dashboard.", 12, 9).
			WithTarget(instantTable(withNode(`node_model:gpuscope_gpus:count{` + cl + `}`))).
			DataLinks(asLinkBuilders([]*dashboard.DashboardLinkBuilder{toNode})).
			WithTransformation(organize(map[string]bool{"Time": true, "Hostname": true, "hostname": true},
				map[string]string{"Value": "GPUs", "node": "Node", "modelName": "Model"}))).
		WithPanel(bars("GPUs by model", "", "none", 12,
			`sum by (modelName) (model:gpuscope_gpus:count{`+cl+`})`, "{{modelName}}")).
		WithRow(dashboard.NewRowBuilder("Allocation versus activity")).
		WithPanel(timeSeries("Allocated versus busy",
			"Busy is the sum of SM activity of the allocated GPUs: the gap to allocated is paid for and unused.", "none", 8, 8,
			q(`sum(cluster:gpuscope_gpus:count{`+cl+`})`, "GPUs"),
			q(`sum(cluster:gpuscope_gpus_allocated:count{`+cl+`})`, "allocated"),
			q(`sum(cluster_allocated:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`})`, "busy (allocated)"))).
		WithPanel(timeSeries("SM activity by model", "Mean SM activity of the GPUs of each model.", "percentunit", 8, 8,
			q(`model:DCGM_FI_PROF_SM_ACTIVE:avg{`+cl+`}`, "{{modelName}}"))).
		WithPanel(timeSeries("Peak SM activity by model",
			"The busiest GPU of each model over the last window (stat=\"max\" of the window statistics): a burst between two scrapes shows here. Empty when the counters file asks for no max of DCGM_FI_PROF_SM_ACTIVE.", "percentunit", 8, 8,
			q(`model:DCGM_FI_PROF_SM_ACTIVE_window_max:max{`+cl+`}`, "{{modelName}}"))).
		WithPanel(timeSeries("Activity percentiles of every sample",
			"p50 and p99 over the last 5 minutes of every 100 ms sample of every GPU, from gpuscope's native histograms: they aggregate where per-GPU window statistics cannot. Empty unless Prometheus scrapes native histograms (docs/kubernetes.md).", "percentunit", 24, 8,
			q(`max(cluster:DCGM_FI_PROF_SM_ACTIVE:p99_5m{`+cl+`})`, "SM p99"),
			q(`max(cluster:DCGM_FI_PROF_SM_ACTIVE:p50_5m{`+cl+`})`, "SM p50"),
			q(`max(cluster:DCGM_FI_PROF_PIPE_TENSOR_ACTIVE:p99_5m{`+cl+`})`, "tensor p99"),
			q(`max(cluster:DCGM_FI_PROF_PIPE_TENSOR_ACTIVE:p50_5m{`+cl+`})`, "tensor p50"),
			q(`max(cluster:DCGM_FI_PROF_DRAM_ACTIVE:p99_5m{`+cl+`})`, "DRAM p99"),
			q(`max(cluster:DCGM_FI_PROF_DRAM_ACTIVE:p50_5m{`+cl+`})`, "DRAM p50")).Max(1).Min(0)).
		WithPanel(tablePanel("Pods idle but allocated",
			"Pods holding GPUs that run nothing, as GPUIdleButAllocated counts them (docs/answers.md): how many of a pod's GPUs or MIG instances ran a kernel less than 5% of the time, on average over the time range; 1 is one GPU idle throughout. Paid for, unused. Click to open the pod.", 24, 8).
			WithTarget(instantTable(`avg_over_time(namespace_pod:gpuscope_gpus_held_idle:sum{` + cl + `}[$__range]) >= 0.5`)).
			DataLinks(asLinkBuilders([]*dashboard.DashboardLinkBuilder{toPod})).
			WithTransformation(organize(
				map[string]bool{"Time": true, "__name__": true},
				map[string]string{"Value": "idle GPUs"}))).
		WithRow(dashboard.NewRowBuilder("Who uses the GPUs")).
		WithPanel(bars("GPU-hours held by namespace", "GPUs held, integrated over the time range.", "none", 8,
			`topk(10, avg_over_time(namespace:gpuscope_gpus_allocated:count{`+cl+`}[$__range]) * $__range_s / 3600)`, "{{namespace}}")).
		WithPanel(bars("Busy GPU-hours by namespace", "SM activity, integrated over the time range.", "none", 8,
			`topk(10, avg_over_time(namespace:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`}[$__range]) * $__range_s / 3600)`, "{{namespace}}")).
		WithPanel(bars("Busy GPU-hours by pod", "Click a pod to open it.", "none", 8,
			`topk(10, avg_over_time(namespace_pod:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`}[$__range]) * $__range_s / 3600)`, "{{namespace}}/{{pod}}", toPodSeries)).
		WithPanel(bars("Median SM activity by pod", "p50 of every 100 ms sample of the pod's GPUs over the last 5 minutes (native histograms). Click a pod to open it.", "percentunit", 12,
			`topk(10, namespace_pod:DCGM_FI_PROF_SM_ACTIVE:p50_5m{`+cl+`})`, "{{namespace}}/{{pod}}", toPodSeries)).
		WithPanel(bars("Nodes with the lowest median SM activity", "p50 of every 100 ms sample of the node's GPUs over the last 5 minutes (native histograms): the least busy nodes. Click a node to open it.", "percentunit", 12,
			withNode(`bottomk(10, node:DCGM_FI_PROF_SM_ACTIVE:p50_5m{`+cl+`})`), "{{node}}", toNodeSeries)).
		WithRow(dashboard.NewRowBuilder("HPC jobs")).
		WithPanel(bars("GPUs by HPC job", "GPUs whose --hpc-job-mapping-dir file names the job.", "none", 8,
			`topk(10, hpc_job:gpuscope_gpus:count{`+cl+`})`, "{{hpc_job}}")).
		WithPanel(bars("Busy GPUs by HPC job", "Sum of SM activity of each job's GPUs.", "none", 8,
			`topk(10, hpc_job:DCGM_FI_PROF_SM_ACTIVE:sum{`+cl+`})`, "{{hpc_job}}")).
		WithPanel(bars("Power by HPC job", "", "watt", 8,
			`topk(10, hpc_job:DCGM_FI_DEV_POWER_USAGE:sum{`+cl+`})`, "{{hpc_job}}"))
	b = useAndCost(b, toPodSeries)
	b = clusterEfficiency(b, toPodSeries)
	b.WithRow(dashboard.NewRowBuilder("Workload insight (gpuscope --insight)")).
		WithPanel(tablePanel("Top stalled jobs",
			"Pods whose GPUs stall most between steps (mean stall ratio over their GPUs). Click to open the pod.", 12, 8).Unit("percentunit").
			WithTarget(instantTable(`topk(10, namespace_pod:gpuscope_gpu_stall_ratio:avg{` + cl + `})`)).
			DataLinks(asLinkBuilders([]*dashboard.DashboardLinkBuilder{toPod})).
			WithTransformation(organize(map[string]bool{"Time": true, "__name__": true}, map[string]string{"Value": "stall ratio"}))).
		WithPanel(bars("What the allocated GPUs are bound by", "GPUs' worth of time in each class, over all namespaces (docs/insight.md).", "none", 12,
			`sum by (bound) (namespace_bound:gpuscope_gpu_bound_ratio:sum{`+cl+`})`, "{{bound}}")).
		WithPanel(bars("Step period by pod", "Mean over the pod's GPUs. Click a pod to open it.", "s", 12,
			`topk(10, namespace_pod:gpuscope_gpu_step_period_seconds:avg{`+cl+`})`, "{{namespace}}/{{pod}}", toPodSeries)).
		WithPanel(bars("Top stalled HPC jobs", "Mean stall ratio over the GPUs of each HPC job (--hpc-job-mapping-dir).", "percentunit", 12,
			`topk(10, hpc_job:gpuscope_gpu_stall_ratio:avg{`+cl+`})`, "job {{hpc_job}}"))
	b = acrossModels(b)
	b.WithRow(dashboard.NewRowBuilder("Power and energy")).
		WithPanel(timeSeries("Power by node", "Click a node to open it.", "watt", 12, 8,
			q(withNode(`node:DCGM_FI_DEV_POWER_USAGE:sum{`+cl+`}`), "{{node}}")).
			DataLinks(asLinkBuilders([]*dashboard.DashboardLinkBuilder{toNodeSeries}))).
		WithPanel(timeSeries("Power by model, against the limits", "", "watt", 12, 8,
			q(`model:DCGM_FI_DEV_POWER_USAGE:sum{`+cl+`}`, "{{modelName}}"),
			q(`sum(cluster:DCGM_FI_DEV_POWER_MGMT_LIMIT:sum{`+cl+`})`, "sum of power limits"))).
		WithRow(dashboard.NewRowBuilder("Health")).
		WithPanel(bars("GPUs whose last XID is not 0, by node", "From DCGM_FI_DEV_XID_ERRORS; 0 on a healthy node.", "none", 6,
			withNode(`node:gpuscope_gpus_last_xid_nonzero:count{`+cl+`}`), "{{node}}", toNodeSeries)).
		WithPanel(bars("Uncorrectable ECC errors by node", "Volatile double-bit errors since the last driver load.", "none", 6,
			withNode(`node:DCGM_FI_DEV_ECC_DBE_VOL_TOTAL:sum{`+cl+`}`), "{{node}}", toNodeSeries)).
		WithPanel(timeSeries("GPUs throttled, by reason", "GPUs with each clock-event reason set.", "none", 6, 8,
			q(`sum by (clock_event) (cluster_clock_event:gpuscope_clock_event_active:sum{`+cl+`, clock_event!="gpu_idle"})`, "{{clock_event}}"))).
		WithPanel(bars("Hottest GPU per node", "", "celsius", 6,
			withNode(`node:DCGM_FI_DEV_GPU_TEMP:max{`+cl+`}`), "{{node}}", toNodeSeries))
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

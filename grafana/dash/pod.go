package dash

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

const podSel = `cluster=~"$cluster", namespace="$namespace", pod="$pod"`

// podHolders are the series that name the pods holding GPUs: a GPU's own
// series carry the pod that holds it alone, gpuscope_pod_gpu_allocation
// every pod holding a GPU, shared ones included, so that a pod that only
// shares GPUs can be picked too.
var podHolders = EitherName("DCGM_FI_DEV_GPU_TEMP") + "|gpuscope_pod_gpu_allocation"

func pg(metric, extra string) string {
	sel := podSel
	if extra != "" {
		sel += ", " + extra
	}
	return shortUUID(metric + "{" + sel + "}")
}

// burst puts a profiling ratio's window max beside its window average: a
// gap between them is the stall or burst that a scrape-rate average hides.
func burst(title, desc, field string) *timeseries.PanelBuilder {
	return timeSeries(title, desc, "percentunit", 8, 8,
		q(pg(field+"_window", `stat="max"`), "max · "+gpuLegend),
		q(pg(field+"_window", `stat="avg"`), "avg · "+gpuLegend)).Max(1).Min(0)
}

// percentiles shows the p50 and p99 of every 100 ms sample of the pod's
// GPUs over 5 minutes, which the recording rules read from the native
// histograms: unlike the window statistics, they are the pod's, not a GPU's.
func percentiles(title, field string) *timeseries.PanelBuilder {
	sel := `{cluster=~"$cluster", namespace="$namespace", pod="$pod"}`
	return timeSeries(title, "p50 and p99 of every sample of the pod's GPUs over the last 5 minutes. Empty unless Prometheus scrapes native histograms (docs/kubernetes.md).", "percentunit", 8, 8,
		q(`max(namespace_pod:`+field+`:p99_5m`+sel+`)`, "p99"),
		q(`max(namespace_pod:`+field+`:p50_5m`+sel+`)`, "p50")).Max(1).Min(0)
}

func Pod() (dashboard.Dashboard, error) {
	toNode := link("Node ${__data.fields.node}", NodeUID, "node", "${__data.fields.node}")
	b := base(PodUID, "gpuscope / Pod",
		"Is my job using its GPUs well? The GPUs a pod holds and what it does with them.").
		WithVariable(clusterVar()).
		WithVariable(labelVar("namespace", "Namespace", `{__name__=~"`+podHolders+`", cluster=~"$cluster", namespace!=""}`, "namespace", false).IncludeAll(false)).
		WithVariable(labelVar("pod", "Pod", `{__name__=~"`+podHolders+`", cluster=~"$cluster", namespace="$namespace", pod!=""}`, "pod", false).IncludeAll(false)).
		WithRow(dashboard.NewRowBuilder("$namespace/$pod")).
		WithPanel(statPanel("GPUs held", "", "none", `count(DCGM_FI_DEV_GPU_TEMP{`+podSel+`})`)).
		WithPanel(statPanel("SM activity", "Mean over the pod's GPUs.", "percentunit", `avg(DCGM_FI_PROF_SM_ACTIVE{`+podSel+`})`)).
		WithPanel(statPanel("Tensor activity", "Mean over the pod's GPUs.", "percentunit", `avg(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{`+podSel+`})`)).
		WithPanel(statPanel("DRAM activity", "Mean over the pod's GPUs.", "percentunit", `avg(DCGM_FI_PROF_DRAM_ACTIVE{`+podSel+`})`)).
		WithPanel(statPanel("Memory used", "Sum over the pod's GPUs.", "decmbytes", `sum(DCGM_FI_DEV_FB_USED{`+podSel+`})`)).
		WithPanel(statPanel("Power", "Sum over the pod's GPUs.", "watt", `sum(DCGM_FI_DEV_POWER_USAGE{`+podSel+`})`)).
		WithPanel(tablePanel("GPUs held",
			"Where the pod runs. Click a node to open it.", 24, 6).
			WithTarget(instantTable(withNode(`DCGM_FI_DEV_GPU_UTIL{` + podSel + `}`))).
			DataLinks([]cogLink{toNode}).
			WithTransformation(organize(
				map[string]bool{"Time": true, "__name__": true, "instance": true, "job": true, "cluster": true, "Hostname": true, "hostname": true},
				map[string]string{"Value": "GPU util %", "gpu": "GPU", "modelName": "Model", "node": "Node"}))).
		WithRow(dashboard.NewRowBuilder("Activity: window max beside average")).
		WithPanel(burst("SM activity", "Share of cycles with at least one warp on an SM.", "DCGM_FI_PROF_SM_ACTIVE")).
		WithPanel(burst("Tensor-pipe activity", "Share of cycles the tensor pipes are busy.", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")).
		WithPanel(burst("DRAM activity", "Share of cycles the memory interface is busy.", "DCGM_FI_PROF_DRAM_ACTIVE")).
		WithRow(dashboard.NewRowBuilder("Percentiles of every sample (native histograms)")).
		WithPanel(percentiles("SM activity", "DCGM_FI_PROF_SM_ACTIVE")).
		WithPanel(percentiles("Tensor-pipe activity", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")).
		WithPanel(percentiles("DRAM activity", "DCGM_FI_PROF_DRAM_ACTIVE")).
		WithRow(dashboard.NewRowBuilder("Workload insight (gpuscope --insight)")).
		WithPanel(statPanel("Step period", "Mean training-step period of the pod's GPUs: the dominant period of SM activity over the last window. n/a without clear steps.", "s",
			`avg(gpuscope_gpu_step_period_seconds{`+podSel+`})`)).
		WithPanel(statPanel("Stall ratio", "Mean share of the busy time the pod's GPUs stall between steps (data loader, synchronisation).", "percentunit",
			`avg(gpuscope_gpu_stall_ratio{`+podSel+`})`)).
		WithPanel(statPanel("Stalls per minute", "Stall episodes on the pod's GPUs.", "none",
			`sum(rate(gpuscope_gpu_stalls_total{`+podSel+`}[5m])) * 60`)).
		WithPanel(bars("Bound by, per GPU", "Each GPU's dominant class over the last window and its share: compute, memory, communication, input or idle (docs/insight.md).", "percentunit", 12,
			`topk by (gpu) (1, gpuscope_gpu_bound_ratio{`+podSel+`})`, "GPU {{gpu}} · {{bound}}")).
		WithPanel(timeSeries("Step period", "Per GPU; a gap is a window without clear periodicity.", "s", 12, 8,
			q(pg("gpuscope_gpu_step_period_seconds", ""), gpuLegend))).
		WithPanel(timeSeries("Bound classes", "Share of each window's samples per class, per GPU.", "percentunit", 12, 8,
			q(pg("gpuscope_gpu_bound_ratio", ""), "{{bound}} · "+gpuLegend)).Max(1).Min(0)).
		WithPanel(timeSeries("Stall ratio", "Per GPU.", "percentunit", 12, 8,
			q(pg("gpuscope_gpu_stall_ratio", ""), gpuLegend)).Max(1).Min(0))
	b = podUseAndCost(b)
	b = podEfficiency(b)
	b = podShares(b)
	b.WithRow(dashboard.NewRowBuilder("Memory and power")).
		WithPanel(timeSeries("Memory used against total", "", "decmbytes", 12, 8,
			q(pg("DCGM_FI_DEV_FB_USED", ""), "used · "+gpuLegend),
			q(pg("DCGM_FI_DEV_FB_TOTAL", ""), "total · "+gpuLegend))).
		WithPanel(timeSeries("Power against limit", "", "watt", 12, 8,
			q(pg("DCGM_FI_DEV_POWER_USAGE", ""), "power · "+gpuLegend),
			q(pg("DCGM_FI_DEV_POWER_MGMT_LIMIT", ""), "limit · "+gpuLegend)))
	return b.Build()
}

// podUseAndCost is the pod's row of energy, energy per step and GPU-hours
// held and idle, from the gpuscope.accounting rules: its share of each GPU it
// held, whichever pod held the GPU before or after.
func podUseAndCost(b *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	return b.WithRow(dashboard.NewRowBuilder("Use and cost")).
		WithPanel(statPanel("Energy in range", "kWh the pod's GPUs used over the time range (its share of each, for a shared GPU or a MIG instance).", "kwatth",
			`sum(sum_over_time(namespace_pod:gpuscope_energy_joules:increase1m{`+podSel+`}[$__range])) / `+joulesPerKWh)).
		WithPanel(statPanel("Energy per step", "Joules of one training step: the pod's power times its step period (gpuscope --insight). n/a without clear steps.", "joule",
			`avg(namespace_pod:gpuscope_energy_per_step_joules:avg1m{`+podSel+`})`)).
		WithPanel(statPanel("GPU-hours held", "Over the time range; a MIG instance counts its share of the GPU.", "none",
			`sum(sum_over_time(namespace_pod:gpuscope_gpu_hours_allocated:sum1m{`+podSel+`}[$__range]))`)).
		WithPanel(statPanel("GPU-hours held idle", "Held while a kernel ran less than 5% of the time: the idleness GPUIdleButAllocated alerts on.", "none",
			`sum(sum_over_time(namespace_pod:gpuscope_gpu_hours_allocated_idle:sum1m{`+podSel+`}[$__range]))`)).
		WithPanel(timeSeries("Power, from the energy counters", "The pod's mean power over each minute: its GPUs' energy counters, its share of each GPU.", "watt", 12, 8,
			q(`sum(namespace_pod:gpuscope_energy_joules:increase1m{`+podSel+`}) / 60`, "power"))).
		WithPanel(timeSeries("Energy per step", "Joules of one training step over time: falls when a step gets cheaper.", "joule", 12, 8,
			q(`sum(namespace_pod:gpuscope_energy_per_step_joules:avg1m{`+podSel+`})`, "energy per step")))
}

// podShares shows what the pod uses of each GPU it shares with others
// (time-slicing, MPS), from --kubernetes-shared-gpu-attribution: a shared
// GPU's own series carry no pod, so only these say which pod used what.
func podShares(b *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	const legend = "GPU {{gpu}} · {{uuid}} · {{container}}"
	return b.WithRow(dashboard.NewRowBuilder("Shared GPUs: the pod's share")).
		WithPanel(timeSeries("Memory of the pod's processes", "GPU memory the pod's processes hold on each GPU or MIG instance, shared ones included (gpuscope_pod_gpu_memory_used_bytes; needs --kubernetes-shared-gpu-attribution).", "bytes", 12, 8,
			q(pg("gpuscope_pod_gpu_memory_used_bytes", ""), legend))).
		WithPanel(timeSeries("SM share of the pod's processes", "The pod's share of each GPU's SM time over the driver's last sampling period (gpuscope_pod_gpu_sm_utilization). None inside a MIG instance, where the driver gives no per-process figure (docs/metrics.md).", "percentunit", 12, 8,
			q(pg("gpuscope_pod_gpu_sm_utilization", ""), legend)).Max(1).Min(0))
}

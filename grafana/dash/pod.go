package dash

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

const podSel = `cluster=~"$cluster", namespace="$namespace", pod="$pod"`

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
	toNode := link("Node ${__data.fields.Hostname}", NodeUID, "node", "${__data.fields.Hostname}")
	b := base(PodUID, "gpuscope / Pod",
		"Is my job using its GPUs well? The GPUs a pod holds and what it does with them.").
		WithVariable(clusterVar()).
		WithVariable(labelVar("namespace", "Namespace", `DCGM_FI_DEV_GPU_TEMP{cluster=~"$cluster", namespace!=""}`, "namespace", false).IncludeAll(false)).
		WithVariable(labelVar("pod", "Pod", `DCGM_FI_DEV_GPU_TEMP{cluster=~"$cluster", namespace="$namespace", pod!=""}`, "pod", false).IncludeAll(false)).
		WithRow(dashboard.NewRowBuilder("$namespace/$pod")).
		WithPanel(statPanel("GPUs held", "", "none", `count(DCGM_FI_DEV_GPU_TEMP{`+podSel+`})`)).
		WithPanel(statPanel("SM activity", "Mean over the pod's GPUs.", "percentunit", `avg(DCGM_FI_PROF_SM_ACTIVE{`+podSel+`})`)).
		WithPanel(statPanel("Tensor activity", "Mean over the pod's GPUs.", "percentunit", `avg(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{`+podSel+`})`)).
		WithPanel(statPanel("DRAM activity", "Mean over the pod's GPUs.", "percentunit", `avg(DCGM_FI_PROF_DRAM_ACTIVE{`+podSel+`})`)).
		WithPanel(statPanel("Memory used", "Sum over the pod's GPUs.", "decmbytes", `sum(DCGM_FI_DEV_FB_USED{`+podSel+`})`)).
		WithPanel(statPanel("Power", "Sum over the pod's GPUs.", "watt", `sum(DCGM_FI_DEV_POWER_USAGE{`+podSel+`})`)).
		WithPanel(tablePanel("GPUs held",
			"Where the pod runs. Click a node to open it.", 24, 6).
			WithTarget(instantTable(`DCGM_FI_DEV_GPU_UTIL{` + podSel + `}`)).
			DataLinks([]cogLink{toNode}).
			WithTransformation(organize(
				map[string]bool{"Time": true, "__name__": true, "instance": true, "job": true, "cluster": true},
				map[string]string{"Value": "GPU util %", "gpu": "GPU", "modelName": "Model", "Hostname": "Node"}))).
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
			q(pg("gpuscope_gpu_stall_ratio", ""), gpuLegend)).Max(1).Min(0)).
		WithRow(dashboard.NewRowBuilder("Memory and power")).
		WithPanel(timeSeries("Memory used against total", "", "decmbytes", 12, 8,
			q(pg("DCGM_FI_DEV_FB_USED", ""), "used · "+gpuLegend),
			q(pg("DCGM_FI_DEV_FB_TOTAL", ""), "total · "+gpuLegend))).
		WithPanel(timeSeries("Power against limit", "", "watt", 12, 8,
			q(pg("DCGM_FI_DEV_POWER_USAGE", ""), "power · "+gpuLegend),
			q(pg("DCGM_FI_DEV_POWER_MGMT_LIMIT", ""), "limit · "+gpuLegend)))
	return b.Build()
}

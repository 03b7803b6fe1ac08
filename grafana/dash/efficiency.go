package dash

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// The efficiency and cost panels read the gpuscope.efficiency and
// gpuscope.cost recording rules: OFU (Overall FLOP Utilization, tensor pipe
// activity times SM clock over the maximum SM clock) and money, which the
// rules record only where prices are set (the chart value
// prometheusRule.pricePerGPUHour); without them the cost panels say n/a.

// ofuDesc says what OFU is, once for every panel that shows it.
const ofuDesc = "Overall FLOP Utilization: tensor pipe activity times SM clock over the maximum SM clock, the share of the GPU's peak " +
	"tensor throughput it delivers. FP32/FP64 work on the CUDA cores is not counted (docs/answers.md#efficiency-in-one-number-ofu)."

// costDesc says where the money comes from.
const costDesc = "GPU-hours times the price per GPU-hour of the GPU's model, in the prices' currency; n/a where no price is set " +
	"(chart value prometheusRule.pricePerGPUHour, docs/answers.md#cost-in-money)."

// clusterEfficiency is the cluster dashboard's row of OFU and cost.
func clusterEfficiency(b *dashboard.DashboardBuilder, toPodSeries *dashboard.DashboardLinkBuilder) *dashboard.DashboardBuilder {
	return b.WithRow(dashboard.NewRowBuilder("Efficiency (OFU) and cost")).
		WithPanel(statPanel("OFU", "Mean over every GPU and MIG instance, held or not. "+ofuDesc, "percentunit",
			`avg(cluster:gpuscope_ofu:avg{`+cl+`})`).Span(6)).
		WithPanel(statPanel("Cost held in range", "What the GPUs held by pods and HPC jobs cost over the time range. "+costDesc, "none",
			`sum(sum_over_time(cluster:gpuscope_cost:sum1m{`+cl+`}[$__range]))`).Span(6)).
		WithPanel(statPanel("Cost held idle in range", "Of that, what GPUs held idle cost: paid for, unused. "+costDesc, "none",
			`sum(sum_over_time(cluster:gpuscope_cost_idle:sum1m{`+cl+`}[$__range]))`).Span(6)).
		WithPanel(statPanel("Cost per hour now", "What the held GPUs cost per hour at the last minute accounted for. "+costDesc, "none",
			`sum(cluster:gpuscope_cost:sum1m{`+cl+`}) * 60`).Span(6)).
		WithPanel(timeSeries("OFU by model", "Mean OFU of the GPUs of each model. "+ofuDesc, "percentunit", 12, 8,
			q(`model:gpuscope_ofu:avg{`+cl+`}`, "{{modelName}}")).Max(1).Min(0)).
		WithPanel(bars("Lowest OFU by pod", "Mean OFU of the pod's GPUs: the pods that get the least of their GPUs' tensor throughput. Click a pod to open it. "+ofuDesc, "percentunit", 12,
			`bottomk(10, namespace_pod:gpuscope_ofu:avg{`+cl+`})`, "{{namespace}}/{{pod}}", toPodSeries)).
		WithPanel(bars("Cost by namespace", "Over the time range. "+costDesc, "none", 6,
			`topk(10, sum_over_time(namespace:gpuscope_cost:sum1m{`+cl+`}[$__range]))`, "{{namespace}}")).
		WithPanel(bars("Cost held idle by namespace", "Over the time range. "+costDesc, "none", 6,
			`topk(10, sum_over_time(namespace:gpuscope_cost_idle:sum1m{`+cl+`}[$__range]))`, "{{namespace}}")).
		WithPanel(bars("Cost by workload and model", "Over the time range; the workload as the accounting rules derive it. "+costDesc, "none", 6,
			`topk(10, sum_over_time(workload_model:gpuscope_cost:sum1m{`+cl+`}[$__range]))`, "{{workload}} · {{modelName}}")).
		WithPanel(bars("Cost per step by pod", "The cost of one training step: the pod's cost per second times its step period (gpuscope --insight). Click a pod to open it. "+costDesc, "none", 6,
			`topk(10, namespace_pod:gpuscope_cost_per_step:avg1m{`+cl+`})`, "{{namespace}}/{{pod}}", toPodSeries))
}

// podEfficiency is the pod dashboard's row of OFU and cost.
func podEfficiency(b *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	return b.WithRow(dashboard.NewRowBuilder("Efficiency (OFU) and cost")).
		WithPanel(statPanel("OFU", "Mean over the pod's GPUs. "+ofuDesc, "percentunit",
			`avg(namespace_pod:gpuscope_ofu:avg{`+podSel+`})`).Span(6)).
		WithPanel(statPanel("Cost in range", "What the pod's GPUs cost over the time range (its share of each, for a shared GPU or a MIG instance). "+costDesc, "none",
			`sum(sum_over_time(namespace_pod:gpuscope_cost:sum1m{`+podSel+`}[$__range]))`).Span(6)).
		WithPanel(statPanel("Cost held idle in range", "Of that, the cost of its GPUs while idle. "+costDesc, "none",
			`sum(sum_over_time(namespace_pod:gpuscope_cost_idle:sum1m{`+podSel+`}[$__range]))`).Span(6)).
		WithPanel(statPanel("Cost per step", "The cost of one training step: the pod's cost per second times its step period (gpuscope --insight). "+costDesc, "none",
			`avg(namespace_pod:gpuscope_cost_per_step:avg1m{`+podSel+`})`).Span(6)).
		WithPanel(timeSeries("OFU per GPU", "Against the tensor activity it comes from: a gap between them is a clock below its maximum (power or thermal capping). "+ofuDesc, "percentunit", 24, 8,
			q(pg("gpu:gpuscope_ofu:ratio", ""), "OFU · "+gpuLegend),
			q(pg("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", ""), "tensor · "+gpuLegend)).Max(1).Min(0))
}

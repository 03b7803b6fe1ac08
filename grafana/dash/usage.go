package dash

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// The use-and-cost panels read the gpuscope.accounting recording rules: one
// sample a minute, each the GPU-hours or joules of that minute, so a
// sum_over_time over the dashboard's range is that range's total.

// joulesPerKWh converts the rules' joules into the kWh panels show.
const joulesPerKWh = "3.6e6"

// withNode copies the host label, whichever spelling the exporter writes
// (`Hostname` or, as dcgm-exporter's main branch does, `hostname`), into
// `node`, so that legends, columns and links read one label.
func withNode(expr string) string {
	return fmt.Sprintf(`label_replace(label_replace(%s, "node", "$1", "Hostname", "(.+)"), "node", "$1", "hostname", "(.+)")`, expr)
}

// instantTableRef is an instant table query with its own refId, for tables
// that merge several queries into one row per label set.
func instantTableRef(expr, ref string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(MustBilingual(expr)).RefId(ref).Instant().
		Format(prometheus.PromQueryFormatTable).Datasource(ds)
}

// merge joins the rows of a table's queries on their labels.
var merge = dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}

// byName gives the column of that name a unit.
func unitOf(column, unit string) (dashboard.MatcherConfig, []dashboard.DynamicConfigValue) {
	return dashboard.MatcherConfig{Id: "byName", Options: column}, []dashboard.DynamicConfigValue{{Id: "unit", Value: unit}}
}

func sortDesc(column string) []cog.Builder[common.TableSortByFieldState] {
	return []cog.Builder[common.TableSortByFieldState]{common.NewTableSortByFieldStateBuilder().DisplayName(column).Desc(true)}
}

// byOwner sums a per-namespace and a per-HPC-job rule over the range into
// one column keyed by `owner` ("namespace ml", "HPC job 4242").
func byOwner(nsRule, jobRule, scale string) string {
	one := func(rule, label, prefix string) string {
		return fmt.Sprintf(`sum by (cluster, owner) (label_replace(sum_over_time(%s{%s}[$__range]), "owner", "%s $1", "%s", "(.+)"))%s`,
			rule, cl, prefix, label, scale)
	}
	return one(nsRule, "namespace", "namespace") + " or " + one(jobRule, "hpc_job", "HPC job")
}

// useAndCost is the cluster dashboard's row of who used the GPUs, what it
// cost in GPU-hours and energy, and what was held idle: the idleness of the
// gpuscope.activity rules, the one GPUIdleButAllocated reads.
func useAndCost(b *dashboard.DashboardBuilder, toPodSeries *dashboard.DashboardLinkBuilder) *dashboard.DashboardBuilder {
	const (
		held, idle, share, energy = "GPU-hours held", "GPU-hours held idle", "idle share", "energy (kWh)"
	)
	held1 := byOwner("namespace:gpuscope_gpu_hours_allocated:sum1m", "hpc_job:gpuscope_gpu_hours_allocated:sum1m", "")
	idle1 := byOwner("namespace:gpuscope_gpu_hours_allocated_idle:sum1m", "hpc_job:gpuscope_gpu_hours_allocated_idle:sum1m", "")
	waste := tablePanel("Waste: GPU-hours held and held idle, by namespace and HPC job",
		"Over the time range: the GPU-hours each namespace and HPC job held (a MIG instance counts its share of the GPU), those held idle "+
			"(a kernel ran less than 5% of the time: the idleness GPUIdleButAllocated alerts on, docs/answers.md), the idle share, and the energy "+
			"its GPUs used. Sorted by idle GPU-hours: the waste first.", 24, 9).
		WithTarget(instantTableRef(held1, "A")).
		WithTarget(instantTableRef(idle1, "B")).
		WithTarget(instantTableRef("("+idle1+") / ("+held1+")", "C")).
		WithTarget(instantTableRef(byOwner("namespace:gpuscope_energy_joules:increase1m", "hpc_job:gpuscope_energy_joules:increase1m", " / "+joulesPerKWh), "D")).
		WithTransformation(merge).
		WithTransformation(organize(map[string]bool{"Time": true},
			map[string]string{"owner": "who", "Value #A": held, "Value #B": idle, "Value #C": share, "Value #D": energy})).
		SortBy(sortDesc(idle)).
		WithOverride(unitOf(share, "percentunit")).
		WithOverride(unitOf(energy, "kwatth"))
	return b.WithRow(dashboard.NewRowBuilder("Use and cost")).
		WithPanel(statPanel("GPU-hours held", "GPU-hours held by pods and HPC jobs over the time range.", "none",
			`sum(sum_over_time(cluster:gpuscope_gpu_hours_allocated:sum1m{`+cl+`}[$__range]))`).Span(6)).
		WithPanel(statPanel("GPU-hours held idle", "Of those, the GPU-hours held idle: paid for, unused.", "none",
			`sum(sum_over_time(cluster:gpuscope_gpu_hours_allocated_idle:sum1m{`+cl+`}[$__range]))`).Span(6)).
		WithPanel(statPanel("Idle share of held GPU-hours", "", "percentunit",
			`sum(sum_over_time(cluster:gpuscope_gpu_hours_allocated_idle:sum1m{`+cl+`}[$__range])) / sum(sum_over_time(cluster:gpuscope_gpu_hours_allocated:sum1m{`+cl+`}[$__range]))`).Span(6)).
		WithPanel(statPanel("GPU-hours in all", "GPU-hours of every GPU present, held or not, over the time range.", "none",
			`sum(sum_over_time(cluster:gpuscope_gpu_hours:sum1m{`+cl+`}[$__range]))`).Span(6)).
		WithPanel(waste).
		WithPanel(bars("Energy by namespace", "kWh over the time range.", "kwatth", 6,
			`topk(10, sum_over_time(namespace:gpuscope_energy_joules:increase1m{`+cl+`}[$__range]) / `+joulesPerKWh+`)`, "{{namespace}}")).
		WithPanel(bars("Energy by HPC job", "kWh over the time range.", "kwatth", 6,
			`topk(10, sum_over_time(hpc_job:gpuscope_energy_joules:increase1m{`+cl+`}[$__range]) / `+joulesPerKWh+`)`, "job {{hpc_job}}")).
		WithPanel(bars("Energy by GPU model", "kWh over the time range, every GPU of the model, held or not.", "kwatth", 6,
			`sum by (modelName) (sum_over_time(model:gpuscope_energy_joules:increase1m{`+cl+`}[$__range])) / `+joulesPerKWh, "{{modelName}}")).
		WithPanel(bars("Energy per step by pod", "Joules of one training step: the pod's power times its step period (gpuscope --insight). Click a pod to open it.", "joule", 6,
			`topk(10, namespace_pod:gpuscope_energy_per_step_joules:avg1m{`+cl+`})`, "{{namespace}}/{{pod}}", toPodSeries))
}

// workloadVar lists the workloads of the cross-model rules.
func workloadVar() *dashboard.QueryVariableBuilder {
	return labelVar("workload", "Workload", `workload_model:gpuscope_gpus:count{`+cl+`}`, "workload", true)
}

// acrossModels puts one workload's runs on each GPU model side by side: a
// run on A100 and one on H100 of the same workload, over the time range.
func acrossModels(b *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	sel := cl + `, workload=~"$workload"`
	const gpus, step, sm, tensor, perStep = "GPUs", "step period", "SM activity", "tensor activity", "energy per step"
	t := tablePanel("Workloads across GPU models",
		"One row per workload and GPU model, averaged over the time range (pick a range that covers both runs): the GPUs and MIG instances it "+
			"held, its mean step period, SM and tensor activity, and the energy of one step (its power on that model, all its GPUs, times the step "+
			"period). The workload is the pod's name without its controller's suffixes, an HPC job's ID, or a `workload` label of the series "+
			"(docs/answers.md#the-same-workload-across-gpu-models).", 24, 8).
		WithTarget(instantTableRef(`max_over_time(workload_model:gpuscope_gpus:count{`+sel+`}[$__range])`, "A")).
		WithTarget(instantTableRef(`avg_over_time(workload_model:gpuscope_gpu_step_period_seconds:avg{`+sel+`}[$__range])`, "B")).
		WithTarget(instantTableRef(`avg_over_time(workload_model:DCGM_FI_PROF_SM_ACTIVE:avg{`+sel+`}[$__range])`, "C")).
		WithTarget(instantTableRef(`avg_over_time(workload_model:DCGM_FI_PROF_PIPE_TENSOR_ACTIVE:avg{`+sel+`}[$__range])`, "D")).
		WithTarget(instantTableRef(`avg_over_time(workload_model:gpuscope_energy_per_step_joules:avg1m{`+sel+`}[$__range])`, "E")).
		WithTransformation(merge).
		WithTransformation(organize(map[string]bool{"Time": true}, map[string]string{
			"modelName": "model", "Value #A": gpus, "Value #B": step, "Value #C": sm, "Value #D": tensor, "Value #E": perStep})).
		WithOverride(unitOf(step, "s")).
		WithOverride(unitOf(sm, "percentunit")).
		WithOverride(unitOf(tensor, "percentunit")).
		WithOverride(unitOf(perStep, "joule"))
	return b.WithRow(dashboard.NewRowBuilder("Workloads across GPU models")).
		WithPanel(t).
		WithPanel(timeSeries("Energy per step by model", "The selected workloads' joules per training step on each GPU model.", "joule", 12, 8,
			q(`workload_model:gpuscope_energy_per_step_joules:avg1m{`+sel+`}`, "{{workload}} · {{modelName}}"))).
		WithPanel(timeSeries("Step period by model", "The selected workloads' mean step period on each GPU model: shorter is faster.", "s", 12, 8,
			q(`workload_model:gpuscope_gpu_step_period_seconds:avg{`+sel+`}`, "{{workload}} · {{modelName}}")))
}

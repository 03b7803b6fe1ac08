// Package dash builds gpuscope's Grafana dashboards (cluster, node, pod)
// from code, so that every query is reviewed, tested and verified against a
// real Prometheus instead of living only in hand-edited JSON.
package dash

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Dashboard UIDs, fixed so that drill-down links survive re-imports.
const (
	ClusterUID = "gpuscope-cluster"
	NodeUID    = "gpuscope-node"
	PodUID     = "gpuscope-pod"
)

// noValue is what a panel shows when its series are absent: gpuscope does
// not export fields a GPU cannot read, and a 0 there would be a lie.
const noValue = "n/a"

// tag groups the three dashboards so that each links to the others.
const tag = "gpuscope"

// cogLink is what the SDK takes for panel and data links.
type cogLink = cog.Builder[dashboard.DashboardLink]

func ptr[T any](v T) *T { return &v }

// ds points every panel and variable at the dashboard's datasource variable.
var ds = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

// query is one PromQL target of a panel.
type query struct {
	expr   string
	legend string
}

func q(expr, legend string) query { return query{expr: expr, legend: legend} }

func refID(i int) string { return string(rune('A' + i)) }

func rangeTargets(qs []query) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(qs))
	for i, x := range qs {
		out = append(out, prometheus.NewDataqueryBuilder().
			Expr(MustBilingual(x.expr)).LegendFormat(x.legend).RefId(refID(i)).Range().Datasource(ds))
	}
	return out
}

func instantTable(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(MustBilingual(expr)).RefId("A").Instant().
		Format(prometheus.PromQueryFormatTable).Datasource(ds)
}

func timeSeries(title, desc, unit string, w, h uint32, qs ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).
		Datasource(ds).NoValue(noValue).Span(w).Height(h).FillOpacity(10).
		ShowPoints(common.VisibilityModeNever)
	for _, t := range rangeTargets(qs) {
		p.WithTarget(t)
	}
	return p
}

// link is a drill-down into another gpuscope dashboard; vars are appended
// as var-NAME=VALUE pairs and may use Grafana's data-link interpolation.
func link(title, uid string, vars ...string) *dashboard.DashboardLinkBuilder {
	var b strings.Builder
	fmt.Fprintf(&b, "/d/%s?${__url_time_range}&var-datasource=${datasource}&var-cluster=${cluster}", uid)
	for i := 0; i+1 < len(vars); i += 2 {
		fmt.Fprintf(&b, "&var-%s=%s", vars[i], vars[i+1])
	}
	return dashboard.NewDashboardLinkBuilder(title).Type(dashboard.DashboardLinkTypeLink).Url(b.String())
}

func datasourceVar() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")
}

// labelVar is a query variable over label_values; "All" selects ".*", which
// also matches series without the label (a single cluster has no cluster label).
func labelVar(name, label, selector, labelName string, multi bool) *dashboard.QueryVariableBuilder {
	expr := fmt.Sprintf("label_values(%s, %s)", selector, labelName)
	return dashboard.NewQueryVariableBuilder(name).Label(label).
		Query(dashboard.StringOrMap{String: ptr(expr)}).Definition(expr).
		Datasource(ds).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortNaturalAsc).Multi(multi).IncludeAll(true).AllValue(".*")
}

// clusterVar chains under the datasource; every other variable chains under it.
func clusterVar() *dashboard.QueryVariableBuilder {
	return labelVar("cluster", "Cluster", `{__name__=~"`+EitherName("DCGM_FI_DEV_GPU_TEMP")+`"}`, "cluster", false)
}

func base(uid, title, desc string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Description(desc).
		Tags([]string{tag}).Editable().Refresh("30s").Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("gpuscope").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{tag}).AsDropdown(true).IncludeVars(true).KeepTime(true)).
		WithVariable(datasourceVar())
}

// shortUUID adds a "uuid" label with the first 8 hex digits of the GPU
// UUID, enough to tell GPUs apart at a glance.
func shortUUID(expr string) string {
	return fmt.Sprintf(`label_replace(%s, "uuid", "$1", "UUID", "GPU-([0-9a-fA-F]{8}).*")`, expr)
}

// gpuLegend names a GPU the way people read it: index, model, short UUID.
const gpuLegend = "GPU {{gpu}} · {{modelName}} · {{uuid}}"

// Render is the JSON that is checked in for a dashboard.
func Render(d dashboard.Dashboard) ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding dashboard %q: %w", ptrString(d.Uid), err)
	}
	return append(b, '\n'), nil
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// All builds every dashboard, keyed by its file name.
func All() (map[string]dashboard.Dashboard, error) {
	builders := map[string]func() (dashboard.Dashboard, error){
		"gpuscope-cluster.json": Cluster,
		"gpuscope-node.json":    Node,
		"gpuscope-pod.json":     Pod,
	}
	out := make(map[string]dashboard.Dashboard, len(builders))
	for name, build := range builders {
		d, err := build()
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", name, err)
		}
		numberPanels(&d)
		out[name] = d
	}
	return out, nil
}

// ConfigMap wraps rendered dashboards into a ConfigMap that Grafana's
// dashboard sidecar picks up by its grafana_dashboard label.
func ConfigMap(files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("# gpuscope's Grafana dashboards for the dashboard sidecar, generated by `go run ./gen -configmap FILE` in grafana/.\n")
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gpuscope-dashboards\n  labels:\n    grafana_dashboard: \"1\"\ndata:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: |\n", n)
		for _, line := range strings.Split(strings.TrimRight(string(files[n]), "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return []byte(b.String())
}

// Files renders every dashboard, keyed by file name.
func Files() (map[string][]byte, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(all))
	for name, d := range all {
		b, err := Render(d)
		if err != nil {
			return nil, err
		}
		files[name] = b
	}
	return files, nil
}

// numberPanels gives every panel and row a distinct id: Grafana keys panel
// state, links to a single panel and repeats on it.
func numberPanels(d *dashboard.Dashboard) {
	var id uint32
	for i := range d.Panels {
		id++
		switch {
		case d.Panels[i].Panel != nil:
			d.Panels[i].Panel.Id = ptr(id)
		case d.Panels[i].RowPanel != nil:
			d.Panels[i].RowPanel.Id = id
		}
	}
}

// tablePanel is a table with an explicit (hidden) footer: Grafana's schema
// requires the footer's reducer list even when the footer is off.
func tablePanel(title, desc string, w, h uint32) *table.PanelBuilder {
	return table.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).NoValue(noValue).
		Span(w).Height(h).Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"}))
}

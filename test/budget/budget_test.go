// Package budget holds the cardinality budget test: it runs the real
// gpuscope binary on the sim source with each shipped counters file (and
// dcgm-exporter's default one), measures what Prometheus would store from
// its exposition, and checks those numbers against the table in
// docs/scale.md. A change that raises any of them by more than 10% fails
// until the table is regenerated:
//
//	go test ./test/budget -update
package budget

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/cost"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/engine/labelbudget"
	"github.com/gpuscope/gpuscope/internal/enrich/hpcjob"
	"github.com/gpuscope/gpuscope/internal/enrich/simpods"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

var update = flag.Bool("update", false, "rewrite the budget table of docs/scale.md from this run")

const (
	docPath  = "docs/scale.md"
	begin    = "<!-- budget:begin -->"
	end      = "<!-- budget:end -->"
	nodeGPUs = 8
	// tolerance is how much a number may rise over the documented one.
	tolerance = 1.10
	// preserved counts the labels Prometheus adds to every stored series:
	// __name__, job and instance.
	preserved = 3
	// window is gpuscope's default --window, which the window families'
	// HELP text names.
	window = 15 * time.Second
)

// columns of the table, in order; the first column is the counters file.
var columns = []string{
	"series per GPU", "series per MIG instance", "series per NvSwitch", "series per 8-GPU node",
	"bytes per scrape", "bytes per scrape, gzip", "samples/s at a 15 s scrape", "samples/s at a 5 s scrape",
	"most labels on a series",
}

// variant is one row of the table: a counters file, optionally edited, and
// the families a metric_relabel_configs rule would drop.
type variant struct {
	name, path string
	edit       func(string) string
	drop       func(name string) bool
}

// dropStats removes the window-statistics column of every CSV line.
func dropStats(csv string) string {
	lines := strings.Split(csv, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if cells := strings.Split(l, ","); len(cells) == 5 {
			lines[i] = strings.Join(cells[:4], ",")
		}
	}
	return strings.Join(lines, "\n")
}

type row struct {
	file   string
	values []float64
}

func TestCardinalityBudget(t *testing.T) {
	e2etest.RequireTool(t, "go")
	root := e2etest.RepoRoot()
	dcp := filepath.Join(root, "etc", "dcp-metrics.csv")
	files := []variant{
		{name: "etc/default-counters.csv", path: filepath.Join(root, "etc", "default-counters.csv")},
		{name: "etc/dcp-metrics.csv", path: dcp},
	}
	if dir := compattest.DirOrEmpty(t); dir != "" {
		files = append(files, variant{name: upstreamRow, path: filepath.Join(dir, "default-counters.csv")})
	} else if *update {
		t.Fatal("-update needs dcgm-exporter's counters files in ../shared so that the table keeps its row")
	}
	// The cost-cutting options of docs/scale.md, measured the same way.
	files = append(files,
		variant{name: "dcp-metrics.csv, window stats cut to max avg", path: dcp,
			edit: func(csv string) string { return strings.ReplaceAll(csv, "min max avg p50 p90 p99", "max avg") }},
		variant{name: "dcp-metrics.csv, no window stats", path: dcp, edit: dropStats},
		variant{name: "dcp-metrics.csv, relabel drops go_, process_", path: dcp,
			drop: func(name string) bool {
				return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
			}},
	)
	jobs := t.TempDir()
	for i := range nodeGPUs {
		require.NoError(t, os.WriteFile(filepath.Join(jobs, strconv.Itoa(i)), []byte(fmt.Sprintf("slurm-%d\n", 1000+i)), 0o600))
	}
	var rows []row
	for _, f := range files {
		rows = append(rows, measure(t, f, jobs))
		if f.name == upstreamRow {
			checkSeriesPerValueField(t, f.path, rows[len(rows)-1])
		}
	}
	docFile := filepath.Join(root, docPath)
	doc, err := os.ReadFile(docFile)
	require.NoError(t, err)
	if *update {
		out, err := replaceTable(string(doc), render(rows))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(docFile, []byte(out), 0o644))
		t.Logf("rewrote the budget table of %s", docPath)
		return
	}
	documented, err := parseTable(string(doc))
	require.NoError(t, err, "%s: run `go test ./test/budget -update`", docPath)
	for _, r := range rows {
		want, ok := documented[r.file]
		if !ok {
			t.Errorf("%s has no row for %s: run `go test ./test/budget -update`", docPath, r.file)
			continue
		}
		for i, v := range r.values {
			switch {
			case v > want[i]*tolerance+1e-9:
				t.Errorf("%s, %s: %s is now %s, %.0f%% over the %s that %s documents; if the rise is meant, update the doc: go test ./test/budget -update",
					r.file, columns[i], columns[i], format(v), 100*(v/want[i]-1), format(want[i]), docPath)
			case v < want[i]/tolerance:
				t.Logf("%s, %s: %s is below the documented %s; `go test ./test/budget -update` would lower it", r.file, columns[i], format(v), format(want[i]))
			}
		}
	}
}

// upstreamRow is the row of dcgm-exporter's own default file.
const upstreamRow = "dcgm-exporter default-counters.csv"

// checkSeriesPerValueField: on dcgm-exporter's default file a GPU has at
// most 10% more series than the file has value fields. dcgm-exporter writes
// one series per value field and GPU (internal/pkg/collector/
// gpu_collector.go, toMetric) and label fields become labels; a per-field
// self-metric that says "supported" on every GPU would double that.
func checkSeriesPerValueField(t *testing.T, path string, r row) {
	t.Helper()
	set, err := counters.Load(path)
	require.NoError(t, err)
	values := 0
	for _, f := range set.Fields {
		if f.Type != counters.Label {
			values++
		}
	}
	require.LessOrEqual(t, r.values[0], math.Floor(float64(values)*tolerance),
		"%s: %s series per GPU for %d value fields", upstreamRow, format(r.values[0]), values)
}

// measure runs gpuscope on an 8-GPU simulated node with pod and HPC job
// labels, then on the same node in MIG mode, and reads the numbers of one
// table row from their expositions.
func measure(t *testing.T, v variant, jobs string) row {
	t.Helper()
	name, csv := v.name, v.path
	if v.edit != nil {
		raw, err := os.ReadFile(v.path)
		require.NoError(t, err)
		csv = filepath.Join(t.TempDir(), "counters.csv")
		require.NoError(t, os.WriteFile(csv, []byte(v.edit(string(raw))), 0o600))
	}
	set, err := counters.Load(csv)
	require.NoError(t, err)
	common := []string{"--source=sim", "--sim-gpus=" + strconv.Itoa(nodeGPUs), "--sim-model=h100", "--sim-pods",
		// Events off: the XID and clock-event families grow with what
		// happened, and the budget is taken on a quiet node.
		"--sim-event-rate=0", "--hpc-job-mapping-dir=" + jobs, "--collectors=" + csv}

	base, _ := e2etest.GPUScope(t, common...)
	x := stableExposition(t, base, v.drop)
	all := x.Series
	gz := gzipSize(t, base)
	var gpuSeries, widest int
	for _, s := range all {
		if _, ok := s.Labels["gpu"]; ok {
			gpuSeries++
		}
		widest = max(widest, len(s.Labels)+preserved)
	}
	checkModel(t, name, set, x)

	migBase, _ := e2etest.GPUScope(t, append(common, "--sim-mig=all")...)
	migX := stableExposition(t, migBase, v.drop)
	instances := map[string]bool{}
	var migSeries int
	for _, s := range migX.Series {
		if id, ok := s.Labels["GPU_I_ID"]; ok {
			migSeries++
			instances[s.Labels["gpu"]+"/"+id] = true
		}
		widest = max(widest, len(s.Labels)+preserved)
	}
	require.NotEmpty(t, instances, "%s: no MIG instance series with --sim-mig=all", name)
	checkModel(t, name+", MIG", set, migX)

	// The sim has no NvSwitch: a switch gets one series per NvSwitch field
	// of the file (per port for the link fields), counted from the catalog.
	var switchFields int
	for _, f := range set.Fields {
		if info, ok := counters.ByID(f.ID); ok && info.Level == fieldid.LevelNvSwitch && f.Type != counters.Label {
			switchFields++
		}
	}

	// The label budget holds on what was measured: the widest series plus
	// an external label (cluster) stays within the limit and within the
	// bound that startup checks.
	shape := engine.SeriesShape{Counters: set, HostnameLabel: engine.DefaultHostnameLabel,
		EnricherLabels: append(append([]string(nil), simpods.LabelNames...), hpcjob.LabelJob)}
	bound := shape.Widest().Stored()
	require.LessOrEqual(t, widest+1, bound, "%s: the widest series (%d labels stored, plus cluster) exceeds the bound startup checks (%d)", name, widest, bound)
	require.LessOrEqual(t, widest+1, labelbudget.Limit, "%s: the widest series exceeds %d labels", name, labelbudget.Limit)

	return row{file: name, values: []float64{
		round1(float64(gpuSeries) / nodeGPUs),
		round1(float64(migSeries) / float64(len(instances))),
		float64(switchFields),
		float64(len(all)),
		float64(x.Bytes),
		float64(gz),
		round1(cost.SamplesPerSecond(len(all), cost.Scrape)),
		round1(cost.SamplesPerSecond(len(all), 5*time.Second)),
		float64(widest),
	}}
}

// checkModel holds the cost model that the /fields page prices a selection
// with to what was measured: for every field of the file that the node
// exports, the modelled series equal the measured ones, and the modelled
// bytes of all of them are within 5% of the measured bytes.
func checkModel(t *testing.T, name string, set *counters.Set, x cost.Exposition) {
	t.Helper()
	node := cost.NodeOf(x, window)
	var modelled, measured cost.Family
	seen := map[string]bool{}
	for _, f := range set.Fields {
		got := x.Field(f.Name)
		// A field the sim does not serve is absent, and exporter-side
		// fields (events, derived fields) render labels of their own.
		if seen[f.Name] || got.Series == 0 || fieldid.IsExporter(f.ID) {
			continue
		}
		seen[f.Name] = true
		want := node.Field(f).With(len(f.Stats))
		require.Equal(t, got.Series, want.Series, "%s, %s: modelled series", name, f.Name)
		modelled, measured = modelled.Add(want), measured.Add(got)
	}
	require.NotZero(t, measured.Series, "%s: no field series measured", name)
	require.InEpsilon(t, measured.Bytes, modelled.Bytes, 0.05, "%s: modelled bytes of the fields' series", name)
}

// stableExposition scrapes until every sampled field has reached the
// exposition: the same series three scrapes in a row, half a second apart.
func stableExposition(t *testing.T, base string, drop func(string) bool) cost.Exposition {
	t.Helper()
	var prev []string
	same := 0
	var x cost.Exposition
	settled := testwait.Every(60*time.Second, 500*time.Millisecond, func() bool {
		body := get(t, base+"/metrics", false)
		var err error
		x, err = cost.Parse(body, drop)
		require.NoError(t, err)
		keys := make([]string, len(x.Series))
		for i, s := range x.Series {
			keys[i] = s.Name + fmt.Sprint(s.Labels)
		}
		if len(x.Series) > 0 && strings.Join(keys, "\n") == strings.Join(prev, "\n") {
			same++
		} else {
			same = 0
		}
		prev = keys
		return same == 2
	})
	if !settled {
		t.Fatalf("%s/metrics did not settle within 60s", base)
	}
	return x
}

func gzipSize(t *testing.T, base string) int {
	t.Helper()
	return len(get(t, base+"/metrics", true))
}

// get returns the body as sent: compressed when gzip is asked for.
func get(t *testing.T, url string, gz bool) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	// Prometheus' own Accept header; setting Accept-Encoding by hand keeps
	// Go's transport from decompressing the body.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1")
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	} else {
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if gz {
		require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"), "gzip was asked for")
		zr, err := gzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, zr)
		require.NoError(t, err, "the gzip body does not decompress")
	}
	return body
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

func format(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func render(rows []row) string {
	var b strings.Builder
	b.WriteString("| counters file | " + strings.Join(columns, " | ") + " |\n")
	b.WriteString("| --- |" + strings.Repeat(" ---: |", len(columns)) + "\n")
	for _, r := range rows {
		cells := make([]string, len(r.values))
		for i, v := range r.values {
			cells[i] = format(v)
		}
		b.WriteString("| " + r.file + " | " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

func replaceTable(doc, table string) (string, error) {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("%s: no %s ... %s markers", docPath, begin, end)
	}
	return doc[:i+len(begin)] + "\n" + table + doc[j:], nil
}

func parseTable(doc string) (map[string][]float64, error) {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return nil, fmt.Errorf("no %s ... %s markers", begin, end)
	}
	out := map[string][]float64{}
	for n, line := range strings.Split(strings.TrimSpace(doc[i+len(begin):j]), "\n") {
		if n < 2 {
			continue // header and alignment
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != len(columns)+1 {
			return nil, fmt.Errorf("table line %q: %d cells, want %d", line, len(cells), len(columns)+1)
		}
		vals := make([]float64, len(columns))
		for k, c := range cells[1:] {
			v, err := strconv.ParseFloat(strings.TrimSpace(c), 64)
			if err != nil {
				return nil, fmt.Errorf("table line %q, %s: %w", line, columns[k], err)
			}
			vals[k] = v
		}
		out[strings.TrimSpace(cells[0])] = vals
	}
	return out, nil
}

// Command fleetreport prints the table of a fleet run (scripts/fleet.sh):
// Prometheus' own figures, every query of the cluster dashboard timed
// against Prometheus for a tenth of the fleet and for the whole fleet,
// beside the raw-series version of the same query and the answer of Thanos
// Query, and the gpuscope processes' CPU and RSS that the script measured.
// It talks only to loopback URLs.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/grafana/dash"
)

// runs is how many times each query is timed.
const runs = 5

type config struct {
	prometheus, thanos, rules, dashboard, small, load string
	nodes, gpus, procs                                int
	duration                                          time.Duration
	procsCPU                                          float64
	procsRSSMiB                                       int
}

func main() {
	var c config
	flag.StringVar(&c.prometheus, "prometheus", "", "Prometheus base URL (loopback)")
	flag.StringVar(&c.thanos, "thanos", "", "Thanos Query base URL (loopback); empty: no Thanos column")
	flag.StringVar(&c.rules, "rules", "deploy/prometheus/gpuscope-recording.yml", "recording rules file")
	flag.StringVar(&c.load, "load", "", "the machine's load average during the run, as the script measured it")
	flag.StringVar(&c.dashboard, "dashboard", "grafana/dashboards/gpuscope-cluster.json", "cluster dashboard JSON")
	flag.StringVar(&c.small, "small", "small", "value of the cluster label of the tenth of the fleet")
	flag.IntVar(&c.nodes, "nodes", 0, "nodes of the fleet")
	flag.IntVar(&c.gpus, "gpus", 0, "GPUs per node")
	flag.IntVar(&c.procs, "procs", 0, "gpuscope processes measured")
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "length of the run, the dashboards' time range")
	flag.Float64Var(&c.procsCPU, "procs-cpu", 0, "CPU of the gpuscope processes, summed, in % of one core")
	flag.IntVar(&c.procsRSSMiB, "procs-rss-mib", 0, "largest sum of the gpuscope processes' RSS, MiB")
	flag.Parse()
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetreport:", err)
		os.Exit(1)
	}
}

// run checks the Prometheus and Thanos addresses are on this host, then
// writes the fleet's figures and the timing of every dashboard query.
func run(c config, w io.Writer) error {
	for _, u := range []string{c.prometheus, c.thanos} {
		if err := loopback(u); err != nil {
			return err
		}
	}
	rules, err := readRules(c.rules)
	if err != nil {
		return err
	}
	groups, err := readRuleGroups(c.rules)
	if err != nil {
		return err
	}
	qs, err := readDashboard(c.dashboard)
	if err != nil {
		return err
	}
	// Evaluate everything at one instant a minute back, so that the remote
	// write into Thanos has caught up with it.
	r := &queryReport{c: c, rules: rules, groups: groups, prom: client{base: c.prometheus}, at: time.Now().Add(-time.Minute).Truncate(15 * time.Second), t: &table{}}
	if c.thanos != "" {
		r.thanos = &client{base: c.thanos, drop: []string{"receive", "tenant_id"}}
	}
	r.fleetFigures()
	if err := r.groupFigures(); err != nil {
		return err
	}
	for _, q := range qs {
		if err := r.query(q); err != nil {
			return err
		}
	}
	r.summary()
	r.t.print(w)
	if r.mismatches > 0 {
		return fmt.Errorf("%d queries answered differently by Thanos Query", r.mismatches)
	}
	return nil
}

// queryReport builds the report's table: the fleet's figures, then each
// dashboard query timed on a tenth of the fleet and on all of it, with its
// recording rules expanded, and on Thanos.
type queryReport struct {
	c                    config
	rules                map[string]string
	groups               map[string]string
	prom                 client
	thanos               *client
	at                   time.Time
	t                    *table
	slowSmall, slowAll   time.Duration
	slowSmallQ, slowAllQ string
	mismatches           int
}

// fleetFigures adds the fleet's size, the figures read from Prometheus and
// the gpuscope processes' cost.
func (r *queryReport) fleetFigures() {
	c, t := r.c, r.t
	t.add(fmt.Sprintf("fleet: %d nodes x %d GPUs = %d GPUs, %s run", c.nodes, c.gpus, c.nodes*c.gpus, c.duration), "", "", "", "")
	for _, f := range figures {
		v, err := r.prom.scalar(f.expr, r.at)
		cell := f.format(v)
		if err != nil {
			cell = "error: " + err.Error()
		}
		t.add(f.what, "", cell, "", "")
	}
	t.add(fmt.Sprintf("gpuscope processes (%d): CPU, summed", c.procs), "", fmt.Sprintf("%.1f%% of one core", c.procsCPU), "", "")
	t.add(fmt.Sprintf("gpuscope processes (%d): RSS, summed (max)", c.procs), "", fmt.Sprintf("%d MiB", c.procsRSSMiB), "", "")
	if c.load != "" {
		t.add("the machine's load average during the run (1-minute, sampled every 30 s)", "", c.load, "", "")
	}
}

// query times one dashboard query and adds its row, keeping the slowest
// and counting the answers Thanos gives differently.
func (r *queryReport) query(q dash.Query) error {
	c := r.c
	name := q.Panel + " " + q.RefID
	small := substitute(q.Expr, c.small, c.duration)
	all := substitute(q.Expr, ".*", c.duration)
	rawExpr, err := expandRules(all, r.rules)
	if err != nil {
		return fmt.Errorf("panel %q: %w", q.Panel, err)
	}
	whyNoRaw := noRaw(all, r.groups)
	ts, _, err := r.prom.timed(small, q.Instant, r.at, c.duration)
	if err != nil {
		return fmt.Errorf("panel %q, %s: %w", q.Panel, small, err)
	}
	ta, want, err := r.prom.timed(all, q.Instant, r.at, c.duration)
	if err != nil {
		return fmt.Errorf("panel %q, %s: %w", q.Panel, all, err)
	}
	cellRaw := "same query"
	switch {
	case whyNoRaw != "":
		cellRaw = whyNoRaw
	case rawExpr != all:
		tr, _, err := r.prom.timed(rawExpr, q.Instant, r.at, c.duration)
		if err != nil {
			return fmt.Errorf("panel %q, raw %s: %w", q.Panel, rawExpr, err)
		}
		cellRaw = tr.String()
	}
	cellThanos := ""
	if r.thanos != nil {
		tt, got, err := r.thanos.timed(all, q.Instant, r.at, c.duration)
		if err != nil {
			return fmt.Errorf("thanos, panel %q, %s: %w", q.Panel, all, err)
		}
		verdict := "same answer"
		if why := compare(want, got); why != "" {
			verdict = "DIFFERENT: " + why
			r.mismatches++
		}
		cellThanos = tt.String() + ", " + verdict
	}
	if ts.p50 > r.slowSmall {
		r.slowSmall, r.slowSmallQ = ts.p50, name
	}
	if ta.p50 > r.slowAll {
		r.slowAll, r.slowAllQ = ta.p50, name
	}
	r.t.add("query: "+name, ts.String(), ta.String(), cellRaw, cellThanos)
	return nil
}

// summary adds the slowest query on a tenth of the fleet and on all of it,
// and the count of Thanos' differing answers.
func (r *queryReport) summary() {
	ratio := float64(r.slowAll) / float64(max(r.slowSmall, time.Microsecond))
	r.t.add("slowest dashboard query p50: tenth of the fleet / whole fleet (ratio)",
		ms(r.slowSmall)+" ("+r.slowSmallQ+")", ms(r.slowAll)+" ("+r.slowAllQ+")", fmt.Sprintf("ratio %.2f", ratio), "")
	if r.thanos != nil {
		r.t.add("queries whose Thanos answer differs from Prometheus'", "", "", "", strconv.Itoa(r.mismatches))
	}
}

func readDashboard(path string) ([]dash.Query, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	qs, _, err := dash.Extract(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return qs, nil
}

// figure is one of Prometheus' own figures, read from its self-scrape.
type figure struct {
	what, expr string
	format     func(float64) string
}

func num(f string) func(float64) string {
	return func(v float64) string { return fmt.Sprintf(f, v) }
}

var figures = []figure{
	{"Prometheus: head series", `prometheus_tsdb_head_series{job="prometheus"}`, num("%.0f")},
	{"Prometheus: samples appended per second (5m rate)", `rate(prometheus_tsdb_head_samples_appended_total{job="prometheus"}[5m])`, num("%.0f")},
	{"Prometheus: samples per scrape of one node (median)", `quantile(0.5, scrape_samples_scraped{job="gpuscope"})`, num("%.0f")},
	{"Prometheus: scrape duration of one node, median (s)", `quantile(0.5, scrape_duration_seconds{job="gpuscope"})`, num("%.4f")},
	{"Prometheus: scrape duration, slowest node over 5m (s)", `max(max_over_time(scrape_duration_seconds{job="gpuscope"}[5m]))`, num("%.4f")},
	{"Prometheus: recording rules, last evaluation (s)", `sum(prometheus_rule_group_last_duration_seconds{job="prometheus", rule_group=~".*gpuscope-recording.yml;.*"})`, num("%.4f")},
	{"Prometheus: recording rules, slowest evaluation over 5m (s)", `sum(max_over_time(prometheus_rule_group_last_duration_seconds{job="prometheus", rule_group=~".*gpuscope-recording.yml;.*"}[5m]))`, num("%.4f")},
	{"Prometheus: alert rules, last evaluation (s)", `sum(prometheus_rule_group_last_duration_seconds{job="prometheus", rule_group=~".*gpuscope-alerts.yml;.*"})`, num("%.4f")},
	{"Prometheus: rule evaluation failures during the run", `sum(prometheus_rule_evaluation_failures_total{job="prometheus"})`, num("%.0f")},
	{"Prometheus: alerts firing", `count(ALERTS{alertstate="firing"}) or vector(0)`, num("%.0f")},
	{"Prometheus: RSS (MiB)", `process_resident_memory_bytes{job="prometheus"} / 2^20`, num("%.0f")},
	{"Prometheus: CPU, 5m rate (% of one core)", `100 * rate(process_cpu_seconds_total{job="prometheus"}[5m])`, num("%.1f")},
	{"Thanos Receive: head series (none without Thanos)", `sum(prometheus_tsdb_head_series{job="thanos", component="receive"}) or vector(0)`, num("%.0f")},
	{"Thanos Receive: RSS (MiB)", `sum(process_resident_memory_bytes{job="thanos", component="receive"}) / 2^20 or vector(0)`, num("%.0f")},
	{"Thanos Query: RSS (MiB)", `sum(process_resident_memory_bytes{job="thanos", component="query"}) / 2^20 or vector(0)`, num("%.0f")},
}

// substitute fills in the dashboard's variables the way Grafana does for a
// time range of the whole run.
func substitute(expr, cluster string, rng time.Duration) string {
	secs := strconv.Itoa(int(rng.Seconds()))
	return strings.NewReplacer(
		"${cluster}", cluster, "$cluster", cluster, "$workload", ".*",
		"$__range_s", secs, "$__range", secs+"s",
		"$__rate_interval", "1m", "$__interval", "15s",
	).Replace(expr)
}

func loopback(u string) error {
	if u == "" {
		return nil
	}
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("%q: %w", u, err)
	}
	if h := p.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return fmt.Errorf("%s: only loopback URLs are allowed", u)
	}
	return nil
}

type client struct {
	base string
	// drop are labels the engine adds of its own (Thanos Receive's
	// external and tenant labels), left out when answers are compared.
	drop []string
}

// series is one series of a query answer.
type series struct {
	labels string
	metric map[string]string
	values []float64
}

type timing struct{ p50, max time.Duration }

func (t timing) String() string { return ms(t.p50) + " / " + ms(t.max) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// timed runs a query runs times and returns the median and slowest wall
// time and the last answer. Range queries span the whole run at a 15 s
// step, as a dashboard over that range would ask.
func (c client) timed(expr string, instant bool, at time.Time, rng time.Duration) (timing, []series, error) {
	var ds []time.Duration
	var ans []series
	for range runs {
		start := time.Now()
		var err error
		ans, err = c.query(expr, instant, at, rng)
		if err != nil {
			return timing{}, nil, err
		}
		ds = append(ds, time.Since(start))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return timing{p50: ds[len(ds)/2], max: ds[len(ds)-1]}, ans, nil
}

func (c client) scalar(expr string, at time.Time) (float64, error) {
	s, err := c.query(expr, true, at, 0)
	if err != nil {
		return 0, err
	}
	if len(s) == 0 || len(s[0].values) == 0 {
		return math.NaN(), nil
	}
	return s[0].values[0], nil
}

func (c client) query(expr string, instant bool, at time.Time, rng time.Duration) ([]series, error) {
	v := url.Values{"query": {expr}}
	path := "/api/v1/query"
	if instant {
		v.Set("time", strconv.FormatInt(at.Unix(), 10))
	} else {
		path = "/api/v1/query_range"
		v.Set("start", strconv.FormatInt(at.Add(-rng).Unix(), 10))
		v.Set("end", strconv.FormatInt(at.Unix(), 10))
		v.Set("step", "15")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(v.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decoding the answer to %s: %w", expr, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, body.Error)
	}
	var out []series
	for _, r := range body.Data.Result {
		for _, d := range c.drop {
			delete(r.Metric, d)
		}
		s := series{labels: labelString(r.Metric), metric: r.Metric}
		points := r.Values
		if body.Data.ResultType == "vector" {
			points = [][2]any{r.Value}
		}
		for _, p := range points {
			str, _ := p[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %v: %w", expr, p[1], err)
			}
			s.values = append(s.values, f)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].labels < out[j].labels })
	return out, nil
}

func labelString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + strconv.Quote(m[k]) + ",")
	}
	return b.String()
}

// compare says how two answers differ; "" when they carry the same series
// and values. Sums may be added in another order by another engine, so
// values agree to a relative 1e-9.
func compare(want, got []series) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d series, Prometheus %d", len(got), len(want))
	}
	for i := range want {
		if want[i].labels != got[i].labels {
			return fmt.Sprintf("series {%s} where Prometheus has {%s}", got[i].labels, want[i].labels)
		}
		if len(want[i].values) != len(got[i].values) {
			return fmt.Sprintf("{%s}: %d points, Prometheus %d", want[i].labels, len(got[i].values), len(want[i].values))
		}
		for k, w := range want[i].values {
			g := got[i].values[k]
			if w == g || (math.IsNaN(w) && math.IsNaN(g)) {
				continue
			}
			if math.Abs(w-g) > 1e-9*math.Max(math.Abs(w), math.Abs(g)) {
				return fmt.Sprintf("{%s} point %d: %v, Prometheus %v", want[i].labels, k, g, w)
			}
		}
	}
	return ""
}

type table struct{ rows [][5]string }

func (t *table) add(what, small, all, raw, thanos string) {
	t.rows = append(t.rows, [5]string{what, small, all, raw, thanos})
}

func (t *table) print(w io.Writer) {
	fmt.Fprintln(w, "| what | tenth of the fleet (rules) | whole fleet (rules) | whole fleet, raw series | whole fleet, Thanos Query |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, r := range t.rows {
		for i := range r {
			r[i] = strings.ReplaceAll(r[i], "|", `\|`)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3], r[4])
	}
	fmt.Fprintf(w, "\nQuery cells: p50 / max of %d runs, wall time seen by the client.\n", runs)
}

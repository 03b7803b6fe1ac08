package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/client/report"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// rawSeries is one series of a range-vector answer.
type rawSeries struct {
	labels map[string]string
	ts     []int64 // Unix milliseconds
	vals   []float64
}

// rawQuery reads every raw sample of a range vector at t, keeping those in
// (from, t]: the test's own reading of what Prometheus holds, apart from
// the report's.
func rawQuery(t *testing.T, prom, expr string, at, from time.Time) []rawSeries {
	t.Helper()
	q := url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	resp, err := http.Get(prom + "/api/v1/query?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, "success", body.Status, expr)
	var out []rawSeries
	for _, r := range body.Data.Result {
		s := rawSeries{labels: r.Metric}
		for _, p := range r.Values {
			ts := int64(math.Round(p[0].(float64) * 1000))
			v, err := strconv.ParseFloat(p[1].(string), 64)
			require.NoError(t, err)
			if ts > from.UnixMilli() {
				s.ts, s.vals = append(s.ts, ts), append(s.vals, v)
			}
		}
		if len(s.ts) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// expected is what the test computes itself from the raw samples.
type expected struct {
	gpus                  int
	gpuHours              float64
	smMean, smP99         float64
	tensorMean, tensorP99 float64
	bound                 map[string]float64
	stall                 float64
	memPeak               int64
	energyJ               float64
	idle                  int
	ofu                   float64
	cost, costIdle        float64
}

func device(l map[string]string) string { return l["Hostname"] + "/" + l["gpu"] + "/" + l["GPU_I_ID"] }

// meanP99 is the mean and quantile_over_time's p99 of values.
func meanP99(t *testing.T, all []float64) (float64, float64) {
	t.Helper()
	require.NotEmpty(t, all)
	sort.Float64s(all)
	sum := 0.0
	for _, v := range all {
		sum += v
	}
	rank := 0.99 * float64(len(all)-1)
	lo := math.Floor(rank)
	return sum / float64(len(all)), all[int(lo)] + (rank-lo)*(all[int(math.Ceil(rank))]-all[int(lo)])
}

// expectFor reads, sample by sample, what the report must say about the
// series matching sel in (start, end], scraped every scrape.
func expectFor(t *testing.T, prom, sel string, start, end time.Time, scrape time.Duration) expected {
	t.Helper()
	rng := strconv.FormatInt(end.Sub(start).Milliseconds(), 10) + "ms"
	raw := func(metric, extra string) []rawSeries {
		return rawQuery(t, prom, metric+"{"+sel+extra+"}["+rng+"]", end, start)
	}
	values := func(metric, extra string) []float64 {
		var all []float64
		for _, s := range raw(metric, extra) {
			all = append(all, s.vals...)
		}
		return all
	}
	var e expected
	held := map[string]int{}
	peak := 0.0
	for _, s := range raw("DCGM_FI_DEV_FB_USED", "") {
		held[device(s.labels)] = max(held[device(s.labels)], len(s.ts))
		for _, v := range s.vals {
			peak = math.Max(peak, v)
		}
	}
	e.gpus, e.memPeak = len(held), int64(peak)<<20
	for _, n := range held {
		e.gpuHours += float64(n) * scrape.Hours()
	}
	e.smMean, e.smP99 = meanP99(t, values("DCGM_FI_PROF_SM_ACTIVE", ""))
	e.tensorMean, e.tensorP99 = meanP99(t, values("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", ""))
	e.stall, _ = meanP99(t, values("gpuscope_gpu_stall_ratio", ""))
	e.bound = map[string]float64{}
	for _, c := range []string{"compute", "memory", "communication", "input", "idle"} {
		e.bound[c], _ = meanP99(t, values("gpuscope_gpu_bound_ratio", `,bound="`+c+`"`))
	}
	perDevice := map[string]float64{}
	for _, s := range raw("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "") {
		inc := 0.0
		for i := 1; i < len(s.vals); i++ {
			if d := s.vals[i] - s.vals[i-1]; d >= 0 {
				inc += d
			} else {
				inc += s.vals[i]
			}
		}
		perDevice[device(s.labels)] = math.Max(perDevice[device(s.labels)], inc)
	}
	for _, j := range perDevice {
		e.energyJ += j / 1000
	}
	activity := rawActivity(raw)
	for d, n := range held {
		if v, ok := activity[d]; ok && v < report.IdleBelow {
			e.idle++
			e.costIdle += float64(n) * scrape.Hours() * reportPrice
		}
		e.cost += float64(n) * scrape.Hours() * reportPrice
	}
	e.ofu = rawOFU(raw, held)
	return e
}

// rawOFU is the devices' OFU as the gpuscope.efficiency rules define it,
// from every raw sample: each device's mean tensor activity (the window
// means, which the shipped dcp-metrics.csv asks for) times its mean SM
// clock over the highest SM clock of the range (the file has no
// DCGM_FI_DEV_MAX_SM_CLOCK), weighted by its held samples.
func rawOFU(raw func(metric, extra string) []rawSeries, held map[string]int) float64 {
	mean := func(metric, extra string, f func(a, b float64) float64) map[string]float64 {
		sum, n := map[string]float64{}, map[string]float64{}
		for _, s := range raw(metric, extra) {
			for _, v := range s.vals {
				if f != nil {
					sum[device(s.labels)] = f(sum[device(s.labels)], v)
					n[device(s.labels)] = 1
					continue
				}
				sum[device(s.labels)] += v
				n[device(s.labels)]++
			}
		}
		for d := range sum {
			sum[d] /= n[d]
		}
		return sum
	}
	tensor := mean("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE_window", `,stat="avg"`, nil)
	clock := mean("DCGM_FI_DEV_SM_CLOCK", "", nil)
	top := mean("DCGM_FI_DEV_SM_CLOCK", "", math.Max)
	var sum, weight float64
	for d, n := range held {
		if top[d] > 0 {
			sum += float64(n) * tensor[d] * math.Min(clock[d]/top[d], 1)
			weight += float64(n)
		}
	}
	return sum / weight
}

// reportPrice is the price per GPU-hour the test records for the sim's
// GPU model, as the chart does from prometheusRule.pricePerGPUHour.
const reportPrice = 2.5

// reportPrices writes the rule file the chart renders from
// prometheusRule.pricePerGPUHour for the sim's model (source/sim/models.go).
func reportPrices(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gpuscope-prices.yml")
	require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(`groups:
- name: gpuscope.prices
  rules:
  - record: model:gpuscope_price_per_gpu_hour:value
    expr: vector(%g)
    labels:
      modelName: NVIDIA H100 80GB HBM3
`, reportPrice)), 0o644))
	return p
}

// rawActivity is each device's activity as the gpuscope.activity rules
// define it, from every raw sample: the largest sample of the first of
// GR_ENGINE_ACTIVE, GPU_UTIL / 100 and SM_ACTIVE that the device has.
func rawActivity(raw func(metric, extra string) []rawSeries) map[string]float64 {
	out := map[string]float64{}
	for _, f := range []struct {
		metric string
		div    float64
	}{{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1}, {"DCGM_FI_DEV_GPU_UTIL", 100}, {"DCGM_FI_PROF_SM_ACTIVE", 1}} {
		this := map[string]float64{}
		for _, s := range raw(f.metric, `,GPU_CI_ID=""`) {
			for _, v := range s.vals {
				this[device(s.labels)] = math.Max(this[device(s.labels)], v/f.div)
			}
		}
		for d, v := range this {
			if _, ok := out[d]; !ok {
				out[d] = v
			}
		}
	}
	return out
}

// runReport runs `gpuscope report` and returns its output and exit status.
func runReport(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.Binary(t), append([]string{"report"}, args...)...)
	cmd.Env = os.Environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running gpuscope report: %v", err)
	}
	return out.String(), errOut.String(), code
}

// reportNode is a simulated node under a real Prometheus that loads the
// shipped recording rules: pods (a training job on GPUs 0-3, a notebook on
// 4-5 that leaves GPU 5 idle), HPC job 4242 on GPUs 0 and 1, insight on;
// and a range of at least 15 scrapes, whose ends fall midway between two
// scrapes.
type reportNode struct {
	target, prom string
	start, end   time.Time
}

const reportScrape = time.Second

func startReportNode(t *testing.T) reportNode {
	t.Helper()
	root := e2etest.RepoRoot()
	jobs := t.TempDir()
	for _, gpu := range []string{"0", "1"} {
		require.NoError(t, os.WriteFile(filepath.Join(jobs, gpu), []byte("4242\n"), 0o644))
	}
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--collectors", filepath.Join(root, "etc", "dcp-metrics.csv"),
		"--sim-seed", "7", "--sim-pods", "--insight", "--insight-window", "4s", "--hpc-job-mapping-dir", jobs)
	prom := e2etest.Prometheus(t, []string{strings.TrimPrefix(base, "http://")},
		filepath.Join(root, "deploy", "prometheus", "gpuscope-recording.yml"), reportPrices(t))
	e2etest.Eventually(t, prom, `count_over_time(gpuscope_gpu_stall_ratio{gpu="0",hpc_job="4242"}[1m])`, 90*time.Second,
		func(s []e2etest.Sample) error {
			if len(s) != 1 || s[0].Value < 15 {
				return fmt.Errorf("want 15 scrapes with insight, have %v", s)
			}
			return nil
		})
	now := time.Now()
	scrapes := rawQuery(t, prom, `DCGM_FI_DEV_FB_USED{gpu="0",hpc_job="4242"}[1m]`, now, now.Add(-time.Minute))
	require.Len(t, scrapes, 1)
	ts := scrapes[0].ts
	return reportNode{target: strings.TrimPrefix(base, "http://"), prom: prom,
		start: time.UnixMilli(ts[0] + 500), end: time.UnixMilli(ts[len(ts)-1] + 500)}
}

func (n reportNode) args(sel ...string) []string {
	return append([]string{"--prometheus.url", n.prom, "--format", "json",
		"--start", fmt.Sprintf("%.3f", float64(n.start.UnixMilli())/1000), "--end", fmt.Sprintf("%.3f", float64(n.end.UnixMilli())/1000)}, sel...)
}

// TestReport runs `gpuscope report` against a real Prometheus scraping a
// simulated node.
func TestReport(t *testing.T) {
	n := startReportNode(t)
	t.Run("agrees with what Prometheus holds", func(t *testing.T) { reportAgrees(t, n) })
	t.Run("table and chunked reads", func(t *testing.T) { reportTableAndChunks(t, n) })
	t.Run("errors", func(t *testing.T) { reportErrors(t, n) })
	t.Run("idle from the recorded activity", func(t *testing.T) { reportReadsRecordedIdle(t, n) })
}

// reportReadsRecordedIdle: over a range longer than the rules' 2-minute
// window, the report judges idleness from the gpu:gpuscope_engine_active:max2m
// the shipped rules record, and finds the idle GPUs the test finds from
// the raw samples by the same definition.
func reportReadsRecordedIdle(t *testing.T, n reportNode) {
	// 145 scrapes of GPU 5: the range from n.start spans 2 minutes and more.
	e2etest.Eventually(t, n.prom, `count_over_time(DCGM_FI_DEV_FB_USED{namespace="research",gpu="5"}[10m])`, 4*time.Minute,
		func(s []e2etest.Sample) error {
			if len(s) != 1 || s[0].Value < 145 {
				return fmt.Errorf("want 145 scrapes of GPU 5, have %v", s)
			}
			return nil
		})
	end := time.Now()
	require.Greater(t, end.Sub(n.start), 2*time.Minute)
	base, err := report.ParseURL(n.prom)
	require.NoError(t, err)
	sel := `namespace="research"`
	got, err := report.Build(context.Background(), &report.Client{Base: base},
		report.Options{Selection: report.Selection{Namespace: "research"}, Start: n.start, End: end})
	require.NoError(t, err)
	assert.Equal(t, "the recorded gpu:gpuscope_engine_active:max2m", got.IdleFrom)
	rng := strconv.FormatInt(end.Sub(n.start).Milliseconds(), 10) + "ms"
	activity := rawActivity(func(metric, extra string) []rawSeries {
		return rawQuery(t, n.prom, metric+"{"+sel+extra+"}["+rng+"]", end, n.start)
	})
	var idle []string
	for d, v := range activity {
		if v < report.IdleBelow {
			idle = append(idle, d)
		}
	}
	assert.Equal(t, []string{"e2e-node/5/"}, idle, "idle by the test's own reading of the raw samples: %v", activity)
	assert.Equal(t, len(idle), got.Idle)
	assert.Equal(t, []string{"e2e-node GPU 5"}, got.IdleDevices)
	assert.Equal(t, 2, got.GPUs)

	out, errOut, code := runReport(t, "--prometheus.url", n.prom, "--namespace", "research", "--format", "table",
		"--start", fmt.Sprintf("%.3f", float64(n.start.UnixMilli())/1000), "--end", fmt.Sprintf("%.3f", float64(end.UnixMilli())/1000))
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Contains(t, out, "1 of 2: e2e-node GPU 5; idle: activity under 5% throughout, from the recorded gpu:gpuscope_engine_active:max2m")
}

// reportAgrees: the report on a simulated pod, a namespace and an HPC job
// gives the numbers the test computes itself from every raw sample
// Prometheus holds for them.
func reportAgrees(t *testing.T, n reportNode) {
	tests := []struct {
		name     string
		flags    []string
		matchers string
		wantGPUs int
		wantIdle int
	}{
		{"pod", []string{"--namespace", "ml-training", "--pod", "llama-train-0"}, `namespace="ml-training",pod="llama-train-0"`, 4, 0},
		{"namespace", []string{"--namespace", "research"}, `namespace="research"`, 2, 1},
		{"HPC job", []string{"--hpc-job", "4242"}, `hpc_job="4242"`, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runReport(t, n.args(tt.flags...)...)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			assert.Less(t, len(out), 600, "a summary small enough for a scheduler's comment field: %s", out)
			var got report.Summary
			require.NoError(t, json.Unmarshal([]byte(out), &got), out)
			want := expectFor(t, n.prom, tt.matchers, n.start, n.end, reportScrape)
			checkSummary(t, got, want)
			assert.Equal(t, tt.wantGPUs, got.GPUs)
			assert.Equal(t, tt.wantIdle, got.Idle)
		})
	}
}

// checkSummary compares a report with the test's own computation, to the
// report's rounding (4 decimals of ratios, 0.1 J) and, for GPU-hours, one
// step of its resolution at each end of each GPU's hold.
func checkSummary(t *testing.T, got report.Summary, want expected) {
	t.Helper()
	assert.Equal(t, report.SchemaVersion, got.Version)
	assert.Equal(t, want.gpus, got.GPUs, "GPUs")
	assert.InDelta(t, want.gpuHours, got.GPUHours, float64(want.gpus)*2*reportScrape.Hours()+1e-4, "GPU-hours")
	require.NotNil(t, got.SM)
	require.NotNil(t, got.Tensor)
	assert.InDelta(t, want.smMean, got.SM.Mean, 1e-4, "SM mean")
	assert.InDelta(t, want.smP99, got.SM.P99, 2e-4, "SM p99")
	assert.InDelta(t, want.tensorMean, got.Tensor.Mean, 1e-4, "tensor mean")
	assert.InDelta(t, want.tensorP99, got.Tensor.P99, 2e-4, "tensor p99")
	require.NotNil(t, got.Stall)
	assert.InDelta(t, want.stall, *got.Stall, 1e-4, "stall share")
	for c, v := range want.bound {
		assert.InDelta(t, v, got.Bound[c], 1e-4, "bound share %s", c)
	}
	assert.Equal(t, want.memPeak, got.MemPeakBytes, "memory peak")
	require.NotNil(t, got.EnergyJoules)
	assert.InDelta(t, want.energyJ, *got.EnergyJoules, 0.1, "energy")
	assert.Positive(t, *got.EnergyJoules)
	assert.Equal(t, want.idle, got.Idle, "idle GPUs")
	require.NotNil(t, got.OFU)
	assert.InDelta(t, want.ofu, *got.OFU, 1e-3, "OFU")
	require.NotNil(t, got.Cost, "the price the rules record")
	require.NotNil(t, got.CostIdle)
	tol := (float64(want.gpus)*2*reportScrape.Hours() + 1e-4) * reportPrice
	assert.InDelta(t, want.cost, *got.Cost, tol, "cost")
	assert.InDelta(t, want.costIdle, *got.CostIdle, tol, "cost of the idle GPUs")
	assert.Zero(t, got.CostExcluded)
}

// reportTableAndChunks: the table says the same as the JSON, for people;
// reading the raw samples a few at a time gives the same summary as
// reading them at once.
func reportTableAndChunks(t *testing.T, n reportNode) {
	out, errOut, code := runReport(t, append(n.args("--namespace", "research"), "--format", "table")...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	for _, want := range []string{"GPU report of namespace research", "GPUs", "GPU-hours", "SM activity", "mean ", "p99 ",
		"Bound by", "compute ", "Memory peak", "Energy", "kWh", "Idle GPUs", "1 of 2: e2e-node GPU 5",
		"OFU", "of peak tensor throughput", "Cost", "of it on GPUs idle throughout"} {
		assert.Contains(t, out, want)
	}

	base, err := report.ParseURL(n.prom)
	require.NoError(t, err)
	c := &report.Client{Base: base}
	o := report.Options{Selection: report.Selection{HPCJob: "4242"}, Start: n.start, End: n.end}
	whole, err := report.Build(context.Background(), c, o)
	require.NoError(t, err)
	o.ChunkSamples = 7
	chunked, err := report.Build(context.Background(), c, o)
	require.NoError(t, err)
	assert.Equal(t, whole, chunked)
}

// reportErrors: a Prometheus that is down, one that refuses the query, a
// job that does not exist and a bad command line each end with their own
// exit status and a message that says what happened.
func reportErrors(t *testing.T, n reportNode) {
	// A Prometheus that loads at most one sample per query refuses the
	// report's first query once it holds a scrape of the job.
	strict := e2etest.PrometheusWithFlags(t, []string{"--query.max-samples=1"}, []string{n.target})
	e2etest.Eventually(t, strict, `DCGM_FI_DEV_FB_USED{gpu="0",hpc_job="4242"}`, 30*time.Second, func(s []e2etest.Sample) error {
		if len(s) != 1 {
			return fmt.Errorf("want the job's GPU 0, have %v", s)
		}
		return nil
	})
	down := "http://" + e2etest.FreePort(t)
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"Prometheus down", append(n.args("--hpc-job", "4242"), "--prometheus.url", down), 1,
			[]string{"cannot reach Prometheus at " + down, "is it running"}},
		{"a refused query", []string{"--prometheus.url", strict, "--hpc-job", "4242", "--since", "1m"}, 1,
			[]string{"refused the query", "too many samples"}},
		{"no such job", n.args("--hpc-job", "no-such-job"), 3,
			[]string{`no GPU series for HPC job no-such-job`, "no such job in this Prometheus"}},
		{"no such pod", n.args("--namespace", "ml-training", "--pod", "gone-0"), 3,
			[]string{"pod ml-training/gone-0"}},
		{"a pod without its namespace", n.args("--pod", "llama-train-0"), 2, []string{"--pod", "a pod needs its namespace"}},
		{"an empty range", append(n.args("--hpc-job", "4242"), "--end", fmt.Sprint(n.start.Unix()-10)), 2,
			[]string{"the start must be before the end"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runReport(t, tt.args...)
			assert.Equal(t, tt.code, code, "stdout: %s\nstderr: %s", out, errOut)
			assert.Empty(t, out, "no summary on stdout")
			for _, w := range tt.want {
				assert.Contains(t, errOut, w)
			}
		})
	}
}

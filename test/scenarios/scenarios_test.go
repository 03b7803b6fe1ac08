// Package scenarios runs each trouble and each healthy control the sim
// knows (--sim-scenario) through the real gpuscope binary on a manual
// clock, records what a Prometheus scraping it every 30 s would store over
// three hours, and has promtool evaluate the shipped rules over it: each
// trouble fires its alert, where it happens, and no other alert; each
// control fires nothing; and every rule, recording rules too, evaluates
// without an error on the scenario's series.
package scenarios

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/rulesubset"
	"github.com/gpuscope/gpuscope/source/sim"
)

// expectation is what the shipped rules must make of a scenario.
type expectation struct {
	scenario string
	// alert is the one alert the scenario must fire; empty for a control.
	alert string
	// where is a label the alert must carry, and its value: the GPU, MIG
	// instance, pod or job in trouble.
	where [2]string
}

var expectations = []expectation{
	{"idle-pod", "GPUIdleButAllocated", [2]string{"gpu", "2"}},
	{"zombie", "GPUMemoryHeldByNoWorkload", [2]string{"gpu", "2"}},
	{"leak", "GPUMemoryLeakSuspected", [2]string{"gpu", "2"}},
	{"fan-stopped", "GPUFanFailing", [2]string{"gpu", "1"}},
	{"ecc-rising", "GPUCorrectableECCErrorsRising", [2]string{"gpu", "2"}},
	{"collective-hang", "GPUCollectiveHang", [2]string{"pod", "llama-train-0"}},
	{"mig-idle", "GPUIdleButAllocated", [2]string{"GPU_I_ID", "2"}},
	{"slurm-idle", "GPUIdleButAllocated", [2]string{"hpc_job", "4243"}},
	{"power-imbalance", "GPUPowerImbalance", [2]string{"gpu", "2"}},
	{"overload", "GPUComputeSaturated", [2]string{"gpu", "2"}},
	{"fabric-degraded", "GPUFabricDegraded", [2]string{"gpu", "2"}},
	{"oom-loop", "GPUOutOfMemoryLoop", [2]string{"gpu", "2"}},
	{"memory-runs-out", "GPUFramebufferRunningOut", [2]string{"gpu", "2"}},
	{"pcie-x8", "GPUPCIeLinkDegraded", [2]string{"gpu", "2"}},
	{"pcie-gen-low", "GPUPCIeLinkDegraded", [2]string{"gpu", "2"}},
	{"multinode-straggler", "GPUWorkloadStragglerNode", [2]string{"pod", "bert-ddp-worker-2"}},
	{"multinode-power-capped", "GPUWorkloadStragglerNode", [2]string{"pod", "pt-llama-worker-1"}},
	{"healthy-training", "", [2]string{}},
	{"checkpoint", "", [2]string{}},
	{"model-loading", "", [2]string{}},
	{"bursty-inference", "", [2]string{}},
	{"free-idle", "", [2]string{}},
	{"preallocated-inference", "", [2]string{}},
	{"steady-full-training", "", [2]string{}},
	{"warmup-fill", "", [2]string{}},
	{"evaluation-pause", "", [2]string{}},
	{"bare-metal-checkpoint", "", [2]string{}},
	{"gpu-reset", "", [2]string{}},
	{"multinode-healthy", "", [2]string{}},
	{"consumer-idle", "", [2]string{}},
}

// leftOut are the fields a scenario's GPUs lack by design, which the
// operator of such a node leaves out of the counters file: GeForce cards
// have no ECC, no row remapping or page retirement and no memory
// temperature sensor (nvidia-smi shows N/A: the sim's consumer models),
// and GPUFieldUnsupported would rightly say so for a file that asks.
var leftOut = map[string][]string{
	"consumer-idle": {"DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
		"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE",
		"DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
		"DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_PENDING"},
}

// Scrapes are 30 s apart, as a ServiceMonitor's often are, over three
// hours: longer than any range, offset and for clause of the rules put
// together. The rules are evaluated every minute, Prometheus's default.
const (
	step     = 30 * time.Second
	duration = 3 * time.Hour
	evalStep = time.Minute
)

func TestEveryScenarioHasAnExpectation(t *testing.T) {
	var names []string
	for _, e := range expectations {
		names = append(names, e.scenario)
	}
	assert.Equal(t, sim.ScenarioNames(), names, "one expectation per scenario, in the sim's order")
	for _, sc := range sim.Scenarios() {
		for _, e := range expectations {
			if e.scenario == sc.Name {
				assert.Equal(t, sc.Control, e.alert == "", "%s: a control expects no alert, a trouble one", sc.Name)
			}
		}
	}
}

// TestEachScenarioFiresExactlyItsAlert is the proof that the shipped rules
// answer the troubles and stay quiet on healthy work, on series the
// exporter wrote. The binary runs with the profiling counters, as the chart
// installs it, plus the opt-in fabric fields the rules read (every other
// scenario's healthy fabric, or none, must stay quiet), without --insight: no alert reads the insight metrics
// (TestNoAlertReadsInsight), and on the manual clock insight would triple
// the binary's work. Every other scenario names its host label hostname,
// as dcgm-exporter's main branch does, so the rules are held to both
// spellings.
func TestEachScenarioFiresExactlyItsAlert(t *testing.T) {
	runScenarios(t, filepath.Join(e2etest.RepoRoot(), "etc", "dcp-metrics.csv"))
}

// TestEachScenarioFiresExactlyItsAlertInTheNewVocabulary runs the same
// scenarios with the profiling counters file written in DCGM 4.6/4.7's
// names (grafana/dash/vocabulary.tsv), as dcgm-exporter 4.9 writes them:
// the sim then serves the new names and units, and the rules must give the
// same answers. It skips, naming the field, while the binary does not know
// a name of the new vocabulary.
func TestEachScenarioFiresExactlyItsAlertInTheNewVocabulary(t *testing.T) {
	root := e2etest.RepoRoot()
	counters := newVocabularyCounters(t, filepath.Join(root, "etc", "dcp-metrics.csv"))
	bin := e2etest.Binary(t)
	if out, err := exec.Command(bin, "counters", "check", counters).CombinedOutput(); err != nil {
		if !strings.Contains(string(out), "unknown field") {
			t.Fatalf("counters check %s: %v: %s", counters, err, out)
		}
		t.Skipf("gpuscope does not know the new vocabulary yet (the catalog of DCGM 4.6's names): counters check %s: %s",
			filepath.Base(counters), strings.TrimSpace(string(out)))
	}
	runScenarios(t, counters)
}

// newVocabularyCounters writes src with every legacy name of the
// vocabulary replaced by its current one.
func newVocabularyCounters(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	names := vocabulary(t)
	lines := strings.Split(string(b), "\n")
	renamed := 0
	for i, line := range lines {
		field, rest, ok := strings.Cut(line, ",")
		if cur, known := names[strings.TrimSpace(field)]; ok && known && !strings.HasPrefix(line, "#") {
			lines[i] = cur + "," + rest
			renamed++
		}
	}
	require.Positive(t, renamed, "%s names no renamed field", src)
	path := filepath.Join(t.TempDir(), "dcp-metrics-new-names.csv")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
	return path
}

// vocabulary maps each legacy name of grafana/dash/vocabulary.tsv to its
// current one.
func vocabulary(t *testing.T) map[string]string {
	t.Helper()
	voc, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "grafana", "dash", "vocabulary.tsv"))
	require.NoError(t, err)
	names := map[string]string{}
	for _, line := range strings.Split(string(voc), "\n") {
		if f := strings.Split(line, "\t"); !strings.HasPrefix(line, "#") && len(f) == 6 {
			names[f[0]] = f[1]
		}
	}
	require.NotEmpty(t, names)
	return names
}

// runScenarios runs every scenario on the sim with the counters file and
// has promtool judge the recording with the shipped rules.
func runScenarios(t *testing.T, counters string) {
	// The current promtool where scripts/test.sh names the one it built,
	// else the distribution's: the rules' own tests run on both.
	promtool := os.Getenv("GPUSCOPE_PROMTOOL3")
	if promtool == "" {
		promtool = e2etest.RequireTool(t, "promtool")
	}
	ruleFiles := shippedRuleFiles(t)
	// The alerts, and the recording rules they read: the others record for
	// dashboards and reports and cannot change which alerts fire.
	rulesDir := t.TempDir()
	if keepDir := os.Getenv("GPUSCOPE_SCENARIO_DIR"); keepDir != "" {
		rulesDir = filepath.Join(keepDir, "alerting-rules")
		require.NoError(t, os.MkdirAll(rulesDir, 0o755))
	}
	alertRuleFiles, err := rulesubset.Write(ruleFiles, nil, []string{firedExpr(duration, "alertname")}, rulesDir)
	require.NoError(t, err)
	keep := readBy(ruleTexts(t, ruleFiles)...)
	bin := e2etest.Binary(t)
	counters = withFabricOptIn(t, counters, keep)
	for i, e := range expectations {
		t.Run(e.scenario, func(t *testing.T) {
			t.Parallel()
			hostLabel := "Hostname"
			if i%2 == 1 {
				hostLabel = "hostname"
			}
			sc, err := sim.ScenarioByName(e.scenario)
			require.NoError(t, err)
			counters := withoutFields(t, counters, leftOut[e.scenario])
			// A scenario across nodes runs a gpuscope per node, each a
			// target of its own, as a DaemonSet's pods are.
			var recs []*recording
			for n := range sc.NodeCount() {
				name, host := e.scenario, "node-"+e.scenario
				if sc.NodeCount() > 1 {
					name, host = fmt.Sprintf("%s/%d", e.scenario, n), fmt.Sprintf("node-%s-%d", e.scenario, n)
				}
				addr := e2etest.FreePort(t)
				e2etest.Start(t, bin, "--address", addr, "--hostname", host, "--hostname-label", hostLabel,
					"--source=sim", "--sim-scenario", name, "--sim-clock=manual", "--collectors", counters)
				base := "http://" + addr
				e2etest.WaitHTTP(t, base+"/ready", 30*time.Second)
				target := map[string]string{"job": "gpuscope", "instance": addr}
				rec := record(t, base, int(duration/step), step, target, keep)
				t.Logf("recorded %s: %s", name, rec.describe())
				recs = append(recs, rec)
			}
			dir := t.TempDir()
			if keepDir := os.Getenv("GPUSCOPE_SCENARIO_DIR"); keepDir != "" {
				dir = keepDir
			}
			paths := writeTest(t, dir, e.scenario, recs, step, evalStep, alertRuleFiles, ruleFiles, e.alert, e.where)
			runPromtool(t, promtool, paths...)
		})
	}
}

// withFabricOptIn writes the counters file base with the fabric fields
// that etc/default-counters.csv offers as commented lines (dcgm-exporter
// makes them opt-in) and that the rules read, uncommented, as an operator
// opts in.
func withFabricOptIn(t *testing.T, base string, read func(string) bool) string {
	t.Helper()
	b, err := os.ReadFile(base)
	require.NoError(t, err)
	def, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "etc", "default-counters.csv"))
	require.NoError(t, err)
	out := string(b) + "\n# Opted in: the fabric fields the rules read.\n"
	n := 0
	for _, l := range strings.Split(string(def), "\n") {
		field, ok := strings.CutPrefix(l, "# DCGM_FI_DEV_FABRIC_")
		if name, _, _ := strings.Cut(field, ","); ok && read("DCGM_FI_DEV_FABRIC_"+name) {
			out += strings.TrimPrefix(l, "# ") + "\n"
			n++
		}
	}
	require.Equal(t, 3, n, "status, health mask and health summary offered in etc/default-counters.csv")
	path := filepath.Join(t.TempDir(), "counters.csv")
	require.NoError(t, os.WriteFile(path, []byte(out), 0o600))
	return path
}

// withoutFields writes the counters file base without the lines of the
// fields named, in either vocabulary; base itself when none is.
func withoutFields(t *testing.T, base string, fields []string) string {
	t.Helper()
	if len(fields) == 0 {
		return base
	}
	b, err := os.ReadFile(base)
	require.NoError(t, err)
	names := vocabulary(t)
	var out []string
	dropped := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		name, _, _ := strings.Cut(l, ",")
		name = strings.TrimSpace(name)
		if i := slices.IndexFunc(fields, func(f string) bool { return f == name || names[f] == name }); i >= 0 {
			dropped[fields[i]] = true
			continue
		}
		out = append(out, l)
	}
	require.Len(t, dropped, len(fields), "every field left out is in %s", base)
	path := filepath.Join(t.TempDir(), "counters-left-out.csv")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o600))
	return path
}

// shippedRuleFiles are the rule files the chart and the docs ship.
func shippedRuleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e2etest.RepoRoot(), "deploy", "prometheus", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

func ruleTexts(t *testing.T, files []string) []string {
	t.Helper()
	var texts []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		texts = append(texts, string(b))
	}
	return texts
}

// insightFamilies are the series --insight adds (docs/insight.md).
var insightFamilies = []string{"gpuscope_gpu_step_period_seconds", "gpuscope_gpu_step_period_confidence", "gpuscope_gpu_stall_ratio",
	"gpuscope_gpu_stalls_total", "gpuscope_gpu_bound_ratio", "gpuscope_insight_supported"}

// TestNoAlertReadsInsight keeps the scenarios honest without --insight: no
// alert reads an insight series, directly or through recording rules. An
// alert that does needs the scenarios run with --insight.
func TestNoAlertReadsInsight(t *testing.T) {
	type rule struct{ Record, Alert, Expr string }
	var rules []rule
	for _, f := range shippedRuleFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc struct {
			Groups []struct{ Rules []rule }
		}
		require.NoError(t, yaml.Unmarshal(b, &doc), f)
		for _, g := range doc.Groups {
			rules = append(rules, g.Rules...)
		}
	}
	tainted := append([]string(nil), insightFamilies...)
	for grew := true; grew; {
		grew = false
		for _, r := range rules {
			if r.Record != "" && !slices.Contains(tainted, r.Record) && slices.ContainsFunc(tainted, func(n string) bool { return readBy(r.Expr)(n) }) {
				tainted, grew = append(tainted, r.Record), true
			}
		}
	}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		for _, n := range tainted {
			assert.False(t, readBy(r.Expr)(n), "alert %s reads %s, an insight series: run the scenarios with --insight", r.Alert, n)
		}
	}
}

package exposition

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// exception is a class of promtool's complaints that gpuscope keeps on
// purpose: each is about a name or label another exporter chose first,
// which users' dashboards and rules read as it is.
type exception struct {
	class, reason string
	family        *regexp.Regexp
	problem       string
	// labels, for a complaint about label names, are the only labels that
	// may cause it; promtool does not say which label it means.
	labels map[string]bool
}

var exceptions = []exception{
	{
		class: "counter without _total",
		reason: "dcgm-exporter's name, kept for compatibility: a DCGM field is exported under its own name, " +
			"and its counters files type some counter (etc/default-counters.csv there: DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter)",
		family:  regexp.MustCompile(`^DCGM_FI_`),
		problem: `counter metrics should have "_total" suffix`,
	},
	{
		class:   "type in the name",
		reason:  "dcgm-exporter's name, kept for compatibility: DCGM calls the field DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
		family:  regexp.MustCompile(`^DCGM_FI_`),
		problem: "metric name should not include type 'counter'",
	},
	{
		class: "gauge ending in _total",
		reason: "nvidia_gpu_exporter's name, kept for compatibility: it names its metrics after nvidia-smi's query fields " +
			"(ecc.errors.corrected.volatile.total) and types them gauge (internal/integration/testdata/demo__seeded.metrics there)",
		family:  regexp.MustCompile(`^nvidia_smi_`),
		problem: `non-counter metrics should not have "_total" suffix`,
	},
	{
		class: "gauge ending in _count",
		reason: "nvidia_gpu_exporter's name, kept for compatibility: nvidia-smi's query field retired_pages.double_bit.count, " +
			"a gauge there",
		family:  regexp.MustCompile(`^nvidia_smi_`),
		problem: `non-histogram and non-summary metrics should not have "_count" suffix`,
	},
	{
		class: "camelCase label",
		reason: "dcgm-exporter's label, kept for compatibility: its GPU template writes modelName " +
			"(internal/pkg/rendermetrics/render_metrics.go), and gpuscope writes it on every series of a GPU, its own families' included",
		family:  regexp.MustCompile(`.`),
		problem: "label names should be written in 'snake_case' not 'camelCase'",
		labels:  map[string]bool{"modelName": true},
	},
}

// camelCaseRE is promtool's test for a camelCase name (client_golang's
// promlint).
var camelCaseRE = regexp.MustCompile(`[a-z][A-Z]`)

// excused returns the exception that covers promtool's complaint about a
// family of an exposition, or nil.
func excused(fam, problem string, labels map[string]bool) *exception {
	for i := range exceptions {
		x := &exceptions[i]
		if x.problem != problem || !x.family.MatchString(fam) {
			continue
		}
		if x.labels != nil {
			for l := range labels {
				if camelCaseRE.MatchString(l) && !x.labels[l] {
					return nil
				}
			}
		}
		return x
	}
	return nil
}

// lint runs `promtool check metrics` on an exposition and returns its
// complaints, one "family problem" each.
func lint(t *testing.T, promtool, what string, body []byte) []string {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	// promtool exits with 3 when it has complaints, with 1 when it cannot
	// read the exposition at all.
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) {
		require.NoError(t, err, "promtool check metrics on %s: %s", what, out)
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			problems = append(problems, line)
		}
	}
	return problems
}

// promtool check metrics passes every family gpuscope names itself, in
// both label layouts; what it still says is about a name or label that
// dcgm-exporter or nvidia_gpu_exporter chose, each class listed in
// exceptions with its reason, and every exception is still needed.
func TestPromtoolPassesEveryFamilyGpuscopeNames(t *testing.T) {
	// Debian's promtool, and the promtool 3 that make test builds when
	// GPUSCOPE_PROMTOOL3 names it: users lint with either.
	promtools := []string{e2etest.RequireTool(t, "promtool")}
	if p3 := os.Getenv("GPUSCOPE_PROMTOOL3"); p3 != "" {
		promtools = append(promtools, p3)
	}
	targets := everything(t).texts
	var goldens []string
	for what := range targets {
		if strings.HasSuffix(what, ".prom") {
			goldens = append(goldens, what)
		}
	}
	sort.Strings(goldens)
	require.Contains(t, goldens, "test/integration/testdata/sim-seed42.prom", "dcgm-exporter's layout")
	require.Contains(t, goldens, "test/integration/testdata/sim-seed42-nvidia-gpu-exporter.prom", "nvidia_gpu_exporter's layout")
	used := map[string]bool{}
	unexcused := map[string]bool{}
	for what, body := range targets {
		labels := familyLabels(t, what, body)
		for _, promtool := range promtools {
			for _, p := range lint(t, promtool, what, body) {
				fam, problem, _ := strings.Cut(p, " ")
				if x := excused(fam, problem, labels[fam]); x != nil {
					used[x.class] = true
					continue
				}
				unexcused[promtool+" on "+what+": "+p] = true
			}
		}
	}
	assert.Empty(t, sortedKeys(unexcused), "promtool check metrics:\n%s", strings.Join(sortedKeys(unexcused), "\n"))
	for _, x := range exceptions {
		assert.True(t, used[x.class], "the exception %q (%s) excuses nothing any more: remove it", x.class, x.reason)
	}
}

func familyLabels(t *testing.T, what string, body []byte) map[string]map[string]bool {
	t.Helper()
	fs := families{}
	fs.addFamilies(what, parseText(t, what, body))
	out := map[string]map[string]bool{}
	for n, f := range fs {
		out[n] = f.labels
	}
	return out
}

// The exceptions are tested too: a camelCase label other than
// dcgm-exporter's, or a complaint of a listed kind about a family gpuscope
// names itself, is not excused.
func TestPromtoolExceptionsExcuseOnlyTheirNames(t *testing.T) {
	for _, tc := range []struct {
		fam, problem string
		labels       map[string]bool
		want         bool
	}{
		{"DCGM_FI_DEV_RETIRED_SBE", `counter metrics should have "_total" suffix`, nil, true},
		{"gpuscope_xid_errors", `counter metrics should have "_total" suffix`, nil, false},
		{"nvidia_smi_ecc_errors_corrected_volatile_total", `non-counter metrics should not have "_total" suffix`, nil, true},
		{"gpuscope_pods_total", `non-counter metrics should not have "_total" suffix`, nil, false},
		{"gpuscope_gpu_lost", "label names should be written in 'snake_case' not 'camelCase'", map[string]bool{"modelName": true, "UUID": true}, true},
		{"gpuscope_gpu_lost", "label names should be written in 'snake_case' not 'camelCase'", map[string]bool{"modelName": true, "podName": true}, false},
	} {
		got := excused(tc.fam, tc.problem, tc.labels) != nil
		assert.Equal(t, tc.want, got, "%s: %s %v", tc.fam, tc.problem, tc.labels)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

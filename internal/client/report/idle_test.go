package report

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/counters"
)

// recordingRules is the shipped recording rules file, three levels up.
var recordingRules = filepath.Join("..", "..", "..", "deploy", "prometheus", "gpuscope-recording.yml")

// activityRules reads the expressions of the gpuscope.activity group, by
// the name each records.
func activityRules(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(recordingRules)
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &f), recordingRules)
	out := map[string]string{}
	for _, g := range f.Groups {
		if g.Name != "gpuscope.activity" {
			continue
		}
		for _, r := range g.Rules {
			out[r.Record] = r.Expr
		}
	}
	require.NotEmpty(t, out, "%s: no group gpuscope.activity", recordingRules)
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// activityTerm is one alternative of an activity expression: a field's
// name and what multiplies its largest sample into a share of the time.
type activityTerm struct {
	metric string
	factor float64
}

var (
	termMetric = regexp.MustCompile(`max_over_time\(([A-Za-z_:][A-Za-z0-9_:]*)\{`)
	termScale  = regexp.MustCompile(`([*/])\s*([0-9][0-9.e+-]*)`)
)

// groupFactor is a parenthesised group of alternatives scaled as one, as
// the rules write "(OLD or NEW * 100) / 100".
var groupFactor = regexp.MustCompile(`\(((?:[^()]|\([^()]*\)|\((?:[^()]|\([^()]*\))*\))*)\)\s*([*/]\s*[0-9][0-9.e+-]*)`)

// distributeFactors writes each group's factor onto each of its
// alternatives: "(A or B * 100) / 100" becomes "A / 100 or B * 100 / 100".
func distributeFactors(expr string) string {
	return groupFactor.ReplaceAllStringFunc(expr, func(g string) string {
		m := groupFactor.FindStringSubmatch(g)
		if !regexp.MustCompile(`\bor\b`).MatchString(m[1]) {
			return g
		}
		parts := regexp.MustCompile(`\bor\b`).Split(m[1], -1)
		for i, p := range parts {
			parts[i] = strings.TrimSpace(p) + " " + m[2]
		}
		return strings.Join(parts, " or ")
	})
}

// activityTerms splits an activity expression at its "or"s.
func activityTerms(t *testing.T, expr string) []activityTerm {
	t.Helper()
	var out []activityTerm
	for _, part := range regexp.MustCompile(`\bor\b`).Split(distributeFactors(expr), -1) {
		m := termMetric.FindStringSubmatch(part)
		require.NotNil(t, m, "no max_over_time(FIELD{...}) in %q", part)
		at := activityTerm{metric: m[1], factor: 1}
		rest := part[strings.Index(part, "]"):]
		for _, sc := range termScale.FindAllStringSubmatch(rest, -1) {
			v, err := strconv.ParseFloat(sc[2], 64)
			require.NoError(t, err, part)
			if sc[1] == "/" {
				v = 1 / v
			}
			at.factor *= v
		}
		out = append(out, at)
	}
	return out
}

// fieldOrder is the order in which terms name fields, a field being all
// the names of one quantity (counters.OtherNames).
func fieldOrder(terms []activityTerm) []string {
	var order []string
	seen := map[string]bool{}
	for _, at := range terms {
		if seen[at.metric] {
			continue
		}
		order = append(order, at.metric)
		seen[at.metric] = true
		for _, alt := range counters.OtherNames(at.metric) {
			seen[alt.Name] = true
		}
	}
	return order
}

// The report's idle is the rules' idle: the same recorded name and window,
// the same fields in the same order with the same scale, the same
// threshold. The rule text is the source of truth: every alternative it
// reads, the report reads with the same factor; the report may read a
// field's other DCGM names as well, each scaled into the same unit. A
// change to either side fails here until the other follows.
func TestIdleIsTheRulesDefinition(t *testing.T) {
	rules := activityRules(t)
	expr, ok := rules[activityRecord]
	require.True(t, ok, "%s records no %s", recordingRules, activityRecord)
	ranges := regexp.MustCompile(`\[([0-9a-z]+)\]`).FindAllStringSubmatch(expr, -1)
	require.NotEmpty(t, ranges, expr)
	for _, r := range ranges {
		d, err := time.ParseDuration(r[1])
		require.NoError(t, err, r[1])
		assert.Equal(t, activityWindow, d, "the window of %s", activityRecord)
	}
	ours := activityExpr(`GPU_CI_ID=""`, ranges[0][1])
	for _, sel := range regexp.MustCompile(`\{[^}]*\}`).FindAllString(expr, -1) {
		assert.Equal(t, `{GPU_CI_ID=""}`, sel, "the rules select what the report's idle selects")
	}
	ruleTerms, ourTerms := activityTerms(t, expr), activityTerms(t, ours)
	byMetric := map[string]float64{}
	for _, at := range ourTerms {
		byMetric[at.metric] = at.factor
	}
	for _, at := range ruleTerms {
		f, ok := byMetric[at.metric]
		if assert.True(t, ok, "the rules read %s, the report does not (activityFields)", at.metric) {
			assert.InDelta(t, at.factor, f, 1e-12, "the scale of %s", at.metric)
		}
	}
	assert.Equal(t, fieldOrder(ruleTerms), fieldOrder(ourTerms), "the fields, in the rules' order of preference")

	idle, ok := rules["gpu:gpuscope_idle:bool"]
	require.True(t, ok, "%s records no gpu:gpuscope_idle:bool", recordingRules)
	assert.Equal(t, activityRecord+" < bool "+strconv.FormatFloat(IdleBelow, 'g', -1, 64), oneLine(idle),
		"the rules' idle threshold is not report.IdleBelow")
}

// Each activity field is read in both DCGM vocabularies, each name scaled
// into a share of the time (names and units from go-dcgm v1.4611.0's
// dcgm_fields.h, and DCGM_FI_DEV_GPU_UTIL_RATIO a 0-1 ratio as DCGM 4.7's
// field reference and dcgm-exporter 4.9 have it, through the catalog).
func TestActivityReadsBothVocabularies(t *testing.T) {
	got := map[string]float64{}
	for _, at := range activityTerms(t, activityExpr(`GPU_CI_ID=""`, "2m")) {
		got[at.metric] = at.factor
	}
	assert.Equal(t, map[string]float64{
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 1, "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO": 1,
		"DCGM_FI_DEV_GPU_UTIL": 0.01, "DCGM_FI_DEV_GPU_UTIL_RATIO": 1,
		"DCGM_FI_PROF_SM_ACTIVE": 1, "DCGM_FI_PROF_SM_UTIL_RATIO": 1,
	}, got)
}

// fakeProm answers the report's idle queries: the recorded activity for
// the devices in recorded, the raw expression for those in raw, and
// records every query.
type fakeProm struct {
	mu            sync.Mutex
	queries       []string
	recorded, raw map[string]float64 // gpu -> activity
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	vals := f.raw
	if strings.Contains(q, activityRecord) {
		vals = f.recorded
	}
	var res []string
	for gpu, v := range vals {
		res = append(res, fmt.Sprintf(`{"metric":{"Hostname":"n1","gpu":%q,"UUID":"GPU-%s"},"value":[1750000000,"%g"]}`, gpu, gpu, v))
	}
	_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, strings.Join(res, ","))
}

// Where Prometheus records the rules' activity the report reads it, over
// the range less the rules' window; a device it lacks, and a range no
// longer than the window, take the same expression from the raw fields.
func TestIdleReadsTheRecordedActivityWhereItIs(t *testing.T) {
	devs := func() map[string]*device {
		out := map[string]*device{}
		for _, gpu := range []string{"0", "1", "2"} {
			l := map[string]string{"Hostname": "n1", "gpu": gpu, "UUID": "GPU-" + gpu}
			out[deviceKey(l)] = &device{name: deviceName(l)}
		}
		return out
	}
	end := time.Unix(1_750_000_000, 0)
	tests := []struct {
		name          string
		rng           time.Duration
		recorded, raw map[string]float64
		wantIdle      []string
		wantUnknown   int
		wantFrom      string
		wantRecorded  string // the range of the recorded query; "" when none is made
		wantRaw       bool
	}{
		{"all recorded", time.Hour, map[string]float64{"0": 0.9, "1": 0.04, "2": 0.05}, map[string]float64{"0": 0, "1": 0, "2": 0},
			[]string{"n1 GPU 1"}, 0, idleFromRules, "[3480000ms]", false},
		{"one not recorded", time.Hour, map[string]float64{"0": 0.9, "1": 0.02}, map[string]float64{"0": 0, "1": 0.9, "2": 0.049},
			[]string{"n1 GPU 1", "n1 GPU 2"}, 0, "2 from " + idleFromRules + ", 1 from " + idleFromRaw, "[3480000ms]", true},
		{"no rules loaded", time.Hour, nil, map[string]float64{"0": 0.3, "2": 0.01},
			[]string{"n1 GPU 2"}, 1, idleFromRaw, "[3480000ms]", true},
		{"a range within the window", 2 * time.Minute, map[string]float64{"0": 0, "1": 0, "2": 0}, map[string]float64{"0": 0.5, "1": 0.5, "2": 0.5},
			nil, 0, idleFromRaw, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProm{recorded: tt.recorded, raw: tt.raw}
			srv := httptest.NewServer(fp)
			defer srv.Close()
			base, err := ParseURL(srv.URL)
			require.NoError(t, err)
			o := Options{Selection: Selection{Namespace: "ml"}, Start: end.Add(-tt.rng), End: end}
			b := &builder{c: &Client{Base: base}, o: o, sel: o.Selection.matchers(), rng: promDuration(tt.rng)}
			s := &Summary{}
			require.NoError(t, b.idle(context.Background(), s, devs()))
			assert.Equal(t, tt.wantIdle, s.IdleDevices)
			assert.Equal(t, len(tt.wantIdle), s.Idle)
			assert.Equal(t, tt.wantUnknown, s.IdleUnknown)
			assert.Equal(t, tt.wantFrom, s.IdleFrom)
			var recorded, raw []string
			for _, q := range fp.queries {
				if strings.Contains(q, activityRecord) {
					recorded = append(recorded, q)
				} else {
					raw = append(raw, q)
				}
			}
			if tt.wantRecorded == "" {
				assert.Empty(t, recorded)
			} else {
				require.Len(t, recorded, 1)
				assert.Contains(t, recorded[0], `namespace="ml",GPU_CI_ID=""}`+tt.wantRecorded)
			}
			if tt.wantRaw {
				require.Len(t, raw, 1)
				assert.Contains(t, raw[0], activityExpr(`namespace="ml",GPU_CI_ID=""`, promDuration(tt.rng)))
			} else {
				assert.Empty(t, raw)
			}
		})
	}
}

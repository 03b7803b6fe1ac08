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

// The report's idle is the rules' idle: the same recorded name and window,
// the same fields in the same order with the same scale, the same
// threshold. A change to either side fails here until the other follows.
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
	assert.Equal(t, oneLine(expr), oneLine(activityExpr(`GPU_CI_ID=""`, ranges[0][1])),
		"the report's activity (activityFields) is not the expression %s records", activityRecord)

	idle, ok := rules["gpu:gpuscope_idle:bool"]
	require.True(t, ok, "%s records no gpu:gpuscope_idle:bool", recordingRules)
	assert.Equal(t, activityRecord+" < bool "+strconv.FormatFloat(IdleBelow, 'g', -1, 64), oneLine(idle),
		"the rules' idle threshold is not report.IdleBelow")
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

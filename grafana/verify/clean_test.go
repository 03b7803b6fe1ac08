package verify

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/grafana/dash"
)

// fakeProm answers /api/v1/rules with recording rules and /api/v1/query
// with one series or none, by the query: answers says, for the n-th time
// an expression is asked (from 1), whether it has data. It counts the
// times each expression was asked.
type fakeProm struct {
	records []string
	answers map[string]func(n int) bool
	mu      sync.Mutex
	asked   map[string]int
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var data any
	switch r.URL.Path {
	case "/api/v1/rules":
		var rules []map[string]any
		for _, name := range f.records {
			rules = append(rules, map[string]any{"name": name, "query": name, "type": "recording", "health": "ok"})
		}
		data = map[string]any{"groups": []any{map[string]any{"name": "g", "rules": rules}}}
	case "/api/v1/query":
		expr := r.URL.Query().Get("query")
		f.mu.Lock()
		f.asked[expr]++
		n := f.asked[expr]
		f.mu.Unlock()
		result := []any{}
		if answer := f.answers[expr]; answer != nil && answer(n) {
			result = append(result, map[string]any{"metric": map[string]string{"__name__": expr}, "value": []any{0, "1"}})
		}
		data = map[string]any{"resultType": "vector", "result": result}
	default:
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

func (f *fakeProm) times(expr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[expr]
}

func TestCleanAsksAgainOnlyWhatHadNoData(t *testing.T) {
	always := func(int) bool { return true }
	tests := []struct {
		name    string
		answers map[string]func(n int) bool
		// wantProblems are the expressions the last pass finds empty.
		wantProblems []string
		// wantAsked is how often each expression is asked, where known.
		wantAsked map[string]int
	}{
		{
			name:    "clean at once: one whole pass",
			answers: map[string]func(int) bool{"dashboard_expr": always, "ready": always, "late": always},
			// The dashboard's query, and each recording rule's.
			wantAsked: map[string]int{"dashboard_expr": 1, "ready": 1, "late": 1},
		},
		{
			name: "a rule answers late: only it is asked again, then a whole pass confirms",
			answers: map[string]func(int) bool{"dashboard_expr": always, "ready": always,
				"late": func(n int) bool { return n >= 4 }},
			wantAsked: map[string]int{"dashboard_expr": 2, "ready": 2, "late": 5},
		},
		{
			name: "a dashboard query answers late: only that query is asked again",
			answers: map[string]func(int) bool{"ready": always, "late": always,
				"dashboard_expr": func(n int) bool { return n >= 3 }},
			wantAsked: map[string]int{"dashboard_expr": 4, "ready": 2, "late": 2},
		},
		{
			name: "what answered first and stops answering is found by the whole pass",
			answers: map[string]func(int) bool{"dashboard_expr": always,
				"ready": func(n int) bool { return n == 1 },
				"late":  func(n int) bool { return n >= 2 }},
			wantProblems: []string{"recording rule ready returns no series: ready"},
		},
		{
			name: "never answers: the last pass names it",
			answers: map[string]func(int) bool{"dashboard_expr": always, "ready": always,
				"late": func(int) bool { return false }},
			wantProblems: []string{"recording rule late returns no series: late"},
		},
	}
	dashboard := []byte(`{"panels": [{"title": "P", "targets": [{"refId": "A", "expr": "dashboard_expr"}]}]}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeProm{records: []string{"ready", "late"}, answers: tt.answers, asked: map[string]int{}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			lc := liveCheck{c: promClient{base: srv.URL}, dashboards: map[string][]byte{"d.json": dashboard},
				allowed: func(string, dash.Query) string { return "" }}

			last, whole := lc.clean(t, 300*time.Millisecond, time.Millisecond)

			var problems []string
			problems = append(problems, last.problems...)
			if len(last.problems) == 0 {
				problems = append(problems, whole.problems...)
			}
			if tt.wantProblems == nil {
				assert.Empty(t, problems)
				assert.Equal(t, 2, whole.nrules, "the whole pass checks every rule")
				assert.Equal(t, 1, whole.checked, "the whole pass checks every query")
			} else {
				assert.Equal(t, tt.wantProblems, problems)
			}
			for expr, n := range tt.wantAsked {
				assert.Equal(t, n, fake.times(expr), "times %s was asked", expr)
			}
		})
	}
}

package report

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exactQuantile is quantile_over_time's rule on sorted values.
func exactQuantile(sorted []float64, q float64) float64 {
	rank := q * float64(len(sorted)-1)
	lo := math.Floor(rank)
	hi := math.Ceil(rank)
	return sorted[int(lo)] + (rank-lo)*(sorted[int(hi)]-sorted[int(lo)])
}

// The percentile of the binned ratios is within half a bin of the exact
// one, and the mean is exact, on data of every shape.
func TestRatioHistAgreesWithSorting(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		gen  func() float64
	}{
		{"uniform", r.Float64},
		{"busy", func() float64 { return 0.9 + 0.1*r.Float64() }},
		{"mostly idle", func() float64 {
			if r.Float64() < 0.98 {
				return 0
			}
			return r.Float64()
		}},
		{"two values", func() float64 { return float64(r.IntN(2)) * 0.73 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h ratioHist
			vals := make([]float64, 5000)
			sum := 0.0
			for i := range vals {
				vals[i] = tc.gen()
				h.add(vals[i])
				sum += vals[i]
			}
			h.add(math.NaN())
			sort.Float64s(vals)
			for _, q := range []float64{0, 0.5, 0.99, 1} {
				assert.InDelta(t, exactQuantile(vals, q), h.quantile(q), 0.5/ratioBins+1e-12, "q=%v", q)
			}
			assert.InDelta(t, sum/float64(len(vals)), h.sum/float64(h.n), 1e-12)
			assert.Equal(t, uint64(len(vals)), h.n, "NaN is no sample")
		})
	}
}

func TestSelection(t *testing.T) {
	tests := []struct {
		sel      Selection
		matchers string
		err      string
	}{
		{Selection{Namespace: "ml", Pod: "train-0"}, `namespace="ml",pod="train-0"`, ""},
		{Selection{Namespace: "ml"}, `namespace="ml"`, ""},
		{Selection{HPCJob: "4242"}, `hpc_job="4242"`, ""},
		{Selection{HPCJob: `a"b\c`}, `hpc_job="a\"b\\c"`, ""},
		{Selection{Pod: "x"}, "", "a pod needs its namespace"},
		{Selection{}, "", "give a namespace (and a pod) or an HPC job"},
		{Selection{Namespace: "ml", HPCJob: "1"}, "", "not both"},
	}
	for _, tt := range tests {
		err := tt.sel.Validate()
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.matchers, tt.sel.matchers())
	}
}

func TestOptionsRefuseAnEmptyRange(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	sel := Selection{HPCJob: "1"}
	require.ErrorContains(t, Options{Selection: sel, Start: now, End: now}.Validate(), "the start must be before the end")
	require.ErrorContains(t, Options{Selection: sel, Start: now, End: now.Add(time.Minute), Resolution: time.Hour}.Validate(), "longer than the range")
	require.NoError(t, Options{Selection: sel, Start: now, End: now.Add(time.Minute)}.Validate())
	assert.Equal(t, time.Second, DefaultResolution(10*time.Second))
	assert.Equal(t, 43*time.Second, DefaultResolution(24*time.Hour))
	assert.Equal(t, 5*time.Minute, DefaultResolution(90*24*time.Hour))
}

// Each way a Prometheus can fail gives an error that says which, with the
// URL and what to check.
func TestClientErrors(t *testing.T) {
	closed := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		return "http://" + addr
	}
	serve := func(code int, body string) func(*testing.T) string {
		return func(t *testing.T) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(code)
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(srv.Close)
			return srv.URL
		}
	}
	tests := []struct {
		name  string
		url   func(*testing.T) string
		is    error
		query bool
		want  []string
	}{
		{"nothing listens", closed, ErrUnreachable, false, []string{"cannot reach Prometheus at", "is it running"}},
		{"a refused query", serve(400, `{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`), nil, true,
			[]string{"refused the query", "bad_data", "parse error at char 3"}},
		{"too many samples", serve(422, `{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}`), nil, true,
			[]string{"execution", "too many samples"}},
		{"credentials", serve(401, "Unauthorized"), nil, false, []string{"HTTP 401", "credentials"}},
		{"not Prometheus", serve(404, "<html>not found</html>"), nil, false, []string{"HTTP 404", "path prefix"}},
		{"not an API answer", serve(200, "hello"), nil, false, []string{"not a Prometheus API answer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, err := ParseURL(tt.url(t))
			require.NoError(t, err)
			c := &Client{Base: base, Timeout: 5 * time.Second}
			_, err = c.query(context.Background(), "up", time.Now())
			require.Error(t, err)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			var qe *QueryError
			assert.Equal(t, tt.query, errors.As(err, &qe))
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), base.Host, "the error names the Prometheus")
		})
	}
}

func TestParseURL(t *testing.T) {
	u, err := ParseURL("https://mon.example.com/prometheus/")
	require.NoError(t, err)
	assert.Equal(t, "https://mon.example.com/prometheus", u.String())
	for _, bad := range []string{"localhost:9090", "ftp://x", "http://"} {
		_, err := ParseURL(bad)
		assert.ErrorContains(t, err, "want http://host:port", bad)
	}
}

// The client decodes vectors and matrices, NaN included, and sends the
// query, the time and the credentials it is given.
func TestClientDecodesAnswers(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		got = r
		if strings.Contains(r.Form.Get("query"), "[") {
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0"},"values":[[1750000000.25,"0.5"],[1750000001.25,"NaN"]]}]}}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"gpu":"1"},"value":[1750000002,"42"]}]}}`))
	}))
	defer srv.Close()
	base, err := ParseURL(srv.URL)
	require.NoError(t, err)
	c := &Client{Base: base, Username: "u", Password: "p"}
	at := time.UnixMilli(1_750_000_002_500)
	res, err := c.query(context.Background(), "up[2s]", at)
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, "0", res[0].labels["gpu"])
	require.Len(t, res[0].samples, 2)
	assert.Equal(t, sample{ts: 1_750_000_000_250, v: 0.5}, res[0].samples[0])
	assert.True(t, math.IsNaN(res[0].samples[1].v))
	assert.Equal(t, "1750000002.500", got.Form.Get("time"))
	user, pass, ok := got.BasicAuth()
	assert.True(t, ok)
	assert.Equal(t, []string{"u", "p"}, []string{user, pass})

	res, err = c.query(context.Background(), "up", at)
	require.NoError(t, err)
	assert.Equal(t, []series{{labels: map[string]string{"gpu": "1"}, samples: []sample{{ts: 1_750_000_002_000, v: 42}}}}, res)
}

// The table names every number of the summary, in units people read, and
// says what is missing and why.
func TestTable(t *testing.T) {
	stall, energy := 0.126, 58_123.4
	s := &Summary{Selection: Selection{Namespace: "ml", Pod: "train-0"}, From: 1_750_000_000, To: 1_750_003_600,
		GPUs: 4, MIG: 1, GPUHours: 3.9987, SM: &Stat{Mean: 0.609, P99: 0.949}, Tensor: &Stat{Mean: 0.342, P99: 0.739},
		Bound: map[string]float64{"compute": 0.42, "memory": 0.25, "communication": 0.191, "input": 0.139, "idle": 0},
		Stall: &stall, MemPeakBytes: 30 << 30, EnergyJoules: &energy, EnergyExcluded: 1, Idle: 1, IdleDevices: []string{"node-7 GPU 5"},
		IdleFrom: idleFromRules}
	var b strings.Builder
	require.NoError(t, s.WriteTable(&b))
	for _, want := range []string{
		"GPU report of pod ml/train-0, 2025-06-15T15:06:40Z to 2025-06-15T16:06:40Z (1h0m0s)",
		"4 (1 MIG instances)", "GPU-hours        4.00", "mean 60.9%, p99 94.9%",
		"compute 42.0%, memory 25.0%, communication 19.1%, input 13.9%, idle 0.0%",
		"12.6% of the busy time", "30.0 GiB on one GPU", "58.1 kJ (0.0161 kWh); 1 MIG instances or shared GPUs left out",
		"1 of 4: node-7 GPU 5; idle: activity under 5% throughout, from the recorded gpu:gpuscope_engine_active:max2m",
	} {
		assert.Contains(t, b.String(), want)
	}
	b.Reset()
	require.NoError(t, (&Summary{Selection: Selection{HPCJob: "7"}, GPUs: 1, GPUHours: 0.25}).WriteTable(&b))
	for _, want := range []string{"0.250 (15.0 GPU-minutes)", "n/a (no profiling field", "n/a (gpuscope runs without --insight)", "Energy           n/a"} {
		assert.Contains(t, b.String(), want)
	}
}

// The JSON form is one compact line with the schema's names, leaving out
// what is unknown.
func TestJSONIsCompact(t *testing.T) {
	s := &Summary{Version: SchemaVersion, Sel: jsonSel{HPCJob: "4242"}, From: 1, To: 2, GPUs: 2, GPUHours: 0.5, MemPeakBytes: 1 << 30, Idle: 1}
	var b strings.Builder
	require.NoError(t, s.WriteJSON(&b))
	assert.Equal(t, `{"v":1,"sel":{"hpc_job":"4242"},"from":1,"to":2,"gpus":2,"gpu_h":0.5,"mem_peak_b":1073741824,"idle":1}`+"\n", b.String())
}

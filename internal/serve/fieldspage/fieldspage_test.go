package fieldspage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/cost"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/sim"
)

const running = `DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C)., 1s, max avg
DCGM_FI_PROF_SM_ACTIVE, gauge, SM activity., 100ms
`

// exposition is what a 2-GPU node running the file above shows; GPU 1
// does not serve SM activity.
const exposition = `# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 41
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-b"} 39
# HELP DCGM_FI_PROF_SM_ACTIVE SM activity.
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a"} 0.5
# HELP gpuscope_field_supported 1 when the GPU serves the field.
# TYPE gpuscope_field_supported gauge
gpuscope_field_supported{field="DCGM_FI_PROF_SM_ACTIVE",gpu="1",UUID="GPU-b",reason="profiling needs compute capability 7.0 or later"} 0
`

type fakeSamples struct{ asked []string }

func (f *fakeSamples) Samples(q sampleapi.Query) (*sampleapi.Result, error) {
	f.asked = append(f.asked, q.Fields...)
	return &sampleapi.Result{Entities: []sampleapi.Entity{{GPU: 0, Series: []sampleapi.Series{
		{Field: "DCGM_FI_PROF_SM_ACTIVE", T: []int64{1, 2, 3}, V: sampleapi.Values{0.1, 0.9, 0.5}},
	}}}}, nil
}

func newServer(t *testing.T) (*httptest.Server, *fakeSamples) {
	t.Helper()
	srv, fs, _ := newServerWith(t, func(*Options) {})
	return srv, fs
}

// newServerWith is newServer with its options changed by edit.
func newServerWith(t *testing.T, edit func(*Options)) (*httptest.Server, *fakeSamples, *Handler) {
	t.Helper()
	set, err := counters.Parse("running.csv", strings.NewReader(running))
	require.NoError(t, err)
	fs := &fakeSamples{}
	opts := Options{
		Supports:   []counters.Support{dcgm.Support(), nvml.Support(), sim.Support()},
		Source:     func() string { return "sim" },
		Running:    func() *counters.Set { return set },
		Exposition: func() []byte { return []byte(exposition) },
		Samples:    fs,
		Window:     15 * time.Second,
	}
	edit(&opts)
	h, err := New(opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(PagePath, h)
	mux.Handle(CSVPath, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, fs, h
}

func get(t *testing.T, u string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func TestCSV(t *testing.T) {
	srv, _ := newServer(t)
	for _, tc := range []struct {
		name, query string
		want        []string // the field lines, in order
	}{
		{"two fields", "field=DCGM_FI_DEV_POWER_USAGE&field=DCGM_FI_DEV_GPU_TEMP", []string{
			"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).",
			"DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).",
		}},
		{"comma list, interval and statistics", "field=DCGM_FI_PROF_SM_ACTIVE,DCGM_FI_DEV_GPU_TEMP&interval.DCGM_FI_PROF_SM_ACTIVE=100ms" +
			"&stats.DCGM_FI_PROF_SM_ACTIVE=p99&stats.DCGM_FI_PROF_SM_ACTIVE=max&stats.DCGM_FI_DEV_GPU_TEMP=avg+min", []string{
			"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C)., , min avg",
			"DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned., 100ms, max p99",
		}},
		{"a legacy name is written under the current one", "field=dcgm_gpu_temp", []string{
			"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := get(t, srv.URL+CSVPath+"?"+tc.query)
			require.Equal(t, http.StatusOK, code, body)
			assert.Equal(t, "text/csv; charset=utf-8", hdr.Get("Content-Type"))
			assert.Contains(t, hdr.Get("Content-Disposition"), `filename="counters.csv"`)
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
				if !strings.HasPrefix(l, "#") {
					lines = append(lines, l)
				}
			}
			assert.Equal(t, tc.want, lines)
			set, err := counters.Parse("download.csv", strings.NewReader(body))
			require.NoError(t, err)
			assert.Len(t, set.Fields, len(tc.want))
		})
	}
}

func TestCSVRefusesBadQueries(t *testing.T) {
	srv, _ := newServer(t)
	for _, tc := range []struct {
		name, query, want string
		code              int
	}{
		{"unknown field", "field=DCGM_FI_DEV_GPU_TEMP,DCGM_FI_DEV_GPU_TEMPP", `field "DCGM_FI_DEV_GPU_TEMPP": not a field gpuscope knows; did you mean DCGM_FI_DEV_GPU_TEMP?`, 400},
		{"no field", "chosen=1", "tick at least one field", 400},
		{"bad interval", "field=DCGM_FI_DEV_GPU_TEMP&interval.DCGM_FI_DEV_GPU_TEMP=fast", "interval.DCGM_FI_DEV_GPU_TEMP", 400},
		{"interval below the minimum", "field=DCGM_FI_DEV_GPU_TEMP&interval.DCGM_FI_DEV_GPU_TEMP=10ms", "outside 100ms to 1h", 400},
		{"unknown statistic", "field=DCGM_FI_DEV_GPU_TEMP&stats.DCGM_FI_DEV_GPU_TEMP=p95", `unknown statistic "p95"`, 400},
		{"statistics of a label field", "field=DCGM_FI_DEV_NAME&stats.DCGM_FI_DEV_NAME=max", "DCGM_FI_DEV_NAME is a label field", 400},
		{"unknown format", "field=DCGM_FI_DEV_GPU_TEMP&format=xml", "want csv, configmap or values", 400},
		{"a query past the bound", "field=DCGM_FI_DEV_GPU_TEMP&x=" + strings.Repeat("a", maxQuery), "more than the", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := get(t, srv.URL+CSVPath+"?"+tc.query)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, body, tc.want)
		})
	}
	resp, err := http.Post(srv.URL+CSVPath+"?field=DCGM_FI_DEV_GPU_TEMP", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestConfigMapAndValues(t *testing.T) {
	srv, _ := newServer(t)
	q := "field=DCGM_FI_DEV_GPU_TEMP,DCGM_FI_PROF_SM_ACTIVE&interval.DCGM_FI_PROF_SM_ACTIVE=100ms"
	_, _, csv := get(t, srv.URL+CSVPath+"?"+q)

	code, _, body := get(t, srv.URL+CSVPath+"?"+q+"&format=configmap")
	require.Equal(t, http.StatusOK, code, body)
	var cm struct {
		Kind     string
		Metadata struct{ Name string }
		Data     map[string]string
	}
	require.NoError(t, yaml.Unmarshal([]byte(body), &cm))
	assert.Equal(t, "ConfigMap", cm.Kind)
	assert.Equal(t, "gpuscope-counters", cm.Metadata.Name)
	assert.Equal(t, csv, cm.Data["counters.csv"])

	code, _, body = get(t, srv.URL+CSVPath+"?"+q+"&format=values")
	require.Equal(t, http.StatusOK, code, body)
	var values struct{ Counters struct{ CSV string } }
	require.NoError(t, yaml.Unmarshal([]byte(body), &values))
	assert.Equal(t, csv, values.Counters.CSV)
}

// rowOf is the table row of a field in the page.
func rowOf(t *testing.T, page, field string) string {
	t.Helper()
	i := strings.Index(page, `<tr class="field" id="row-`+field+`"`)
	require.GreaterOrEqual(t, i, 0, "no row for %s", field)
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}

func TestPageListsWhatTheSourceServes(t *testing.T) {
	srv, fs := newServer(t)
	code, hdr, page := get(t, srv.URL+PagePath)
	require.Equal(t, http.StatusOK, code, page)
	assert.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
	assert.False(t, strings.Contains(page, "http://") || strings.Contains(page, "https://"), "the page links to something elsewhere")

	served := 0
	for _, info := range counters.All() {
		if info.Legacy || !info.Described() {
			continue
		}
		if ok, _ := sim.Support().Serves(info.ID); ok {
			served++
			assert.True(t, strings.Contains(page, `name="field" value="`+info.Name+`"`), "no checkbox for %s", info.Name)
		}
	}
	assert.Equal(t, served, strings.Count(page, `class="pick" name="field"`), "one checkbox per field the sim serves")

	temp := rowOf(t, page, "DCGM_FI_DEV_GPU_TEMP")
	assert.Contains(t, temp, "checked", "a field of the running file starts ticked")
	assert.Regexp(t, `value="max" checked`, temp)
	assert.Contains(t, temp, `value="1s"`)
	assert.Contains(t, temp, "39 – 41")
	sm := rowOf(t, page, "DCGM_FI_PROF_SM_ACTIVE")
	assert.Contains(t, sm, "GPU 1: profiling needs compute capability 7.0 or later")
	assert.Contains(t, sm, "<svg", "a profiling field of the running file has a sparkline")
	assert.Contains(t, sm, "GPM", "NVML reads profiling fields through GPM")
	assert.Equal(t, []string{"DCGM_FI_PROF_SM_ACTIVE"}, fs.asked, "only profiling fields are read from the rings")
	power := rowOf(t, page, "DCGM_FI_DEV_POWER_USAGE")
	assert.NotContains(t, power, "checked")
	// Both vocabularies (go-dcgm v1.4611.0 dcgm_fields.h): the DCGM 4.6
	// name of a field, and a base-unit field derived from its legacy one.
	assert.Contains(t, temp, "also <code>DCGM_FI_DEV_GPU_TEMP_CELSIUS</code>")
	assert.Contains(t, power, "also <code>DCGM_FI_DEV_BOARD_POWER_WATTS</code>")
	hz := rowOf(t, page, "DCGM_FI_DEV_SM_CLOCK_HERTZ")
	assert.Contains(t, hz, "(in Hz)")
	assert.Contains(t, hz, "NVML, derived from DCGM_FI_DEV_SM_CLOCK", "what reads it says it derives it")
	// The sim serves no MIG field; TestGroups sorts those.
	for _, g := range []string{"Profiling", "Utilization", "Memory", "Clocks and power", "Errors and health", "NVLink and NvSwitch"} {
		assert.True(t, strings.Contains(page, "<h2>"+g+" "), "no group %s", g)
	}
}

// TestPageCost checks the no-script path: the cost a submitted form shows
// is the model's, over the node the exposition shows.
func TestPageCost(t *testing.T) {
	srv, _ := newServer(t)
	x, err := cost.Parse([]byte(exposition), nil)
	require.NoError(t, err)
	node := cost.NodeOf(x, 15*time.Second)
	base := x.Besides([]string{"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_PROF_SM_ACTIVE"})
	for _, tc := range []struct {
		name  string
		query url.Values
		stats map[string]int
	}{
		{"nothing ticked", url.Values{"chosen": {"1"}}, nil},
		{"two fields, one with statistics", url.Values{"field": {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED"},
			"stats.DCGM_FI_DEV_FB_USED": {"max", "avg", "p99"}}, map[string]int{"DCGM_FI_DEV_FB_USED": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := base
			for _, name := range tc.query["field"] {
				info, _ := counters.Lookup(name)
				want = want.Add(node.Field(counters.Field{Name: name, ID: info.ID, Type: info.Type, Help: info.Help}).With(tc.stats[name]))
			}
			code, _, page := get(t, srv.URL+PagePath+"?"+tc.query.Encode())
			require.Equal(t, http.StatusOK, code, page)
			assert.Equal(t, strconv.Itoa(want.Series), between(t, page, `id="cost-series">`, "<"))
			assert.Equal(t, strconv.Itoa(want.Bytes), between(t, page, `data-bytes="`, `"`))
			assert.Equal(t, oneDecimal(float64(want.Series)/15), between(t, page, `id="cost-sps">`, "<"))
		})
	}
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "no %q", from)
	rest := s[i+len(from):]
	return rest[:strings.Index(rest, to)]
}

func TestShortValues(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {0.53125, "0.5312"}, {41, "41"}, {2619, "2.619k"}, {1.576e9, "1.576G"}, {-3.4e11, "-340G"}} {
		assert.Equal(t, tc.want, short(tc.v), "%g", tc.v)
	}
}

func TestGroups(t *testing.T) {
	for _, tc := range []struct{ field, group string }{
		{"DCGM_FI_PROF_SM_ACTIVE", "Profiling"},
		{"DCGM_FI_PROF_NVLINK_TX_BYTES", "Profiling"},
		{"DCGM_FI_DEV_GPU_UTIL", "Utilization"},
		{"DCGM_FI_DEV_FB_USED", "Memory"},
		{"DCGM_FI_DEV_POWER_USAGE", "Clocks and power"},
		{"DCGM_FI_DEV_POWER_INFOROM_VER", "Device and driver"},
		{"DCGM_FI_DEV_XID_ERRORS", "Errors and health"},
		{"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "NVLink and NvSwitch"},
		{"DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT", "NVLink and NvSwitch"},
		{"DCGM_FI_DEV_MIG_MODE", "MIG"},
	} {
		info, ok := counters.Lookup(tc.field)
		require.True(t, ok, tc.field)
		assert.Equal(t, tc.group, groupOf(info), tc.field)
	}
}

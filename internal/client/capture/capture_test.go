package capture

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// TraceEvent is one event of a Chrome trace as a reader parses it; ts is
// kept as text to check its exact microseconds.
type TraceEvent struct {
	Ph   string          `json:"ph"`
	Name string          `json:"name"`
	PID  int             `json:"pid"`
	TS   json.Number     `json:"ts"`
	Args json.RawMessage `json:"args"`
}

type traceFile struct {
	TraceEvents []TraceEvent   `json:"traceEvents"`
	OtherData   map[string]any `json:"otherData"`
}

func result(now int64, entities ...sampleapi.Entity) *sampleapi.Result {
	return &sampleapi.Result{Now: now, Hostname: "node-1", Entities: entities, Fields: []sampleapi.Field{
		{Name: "DCGM_FI_PROF_SM_ACTIVE", Unit: "ratio", IntervalNS: 1e8},
		{Name: "DCGM_FI_DEV_POWER_USAGE", Unit: "W", IntervalNS: 1e9},
	}}
}

func gpu(i int, pod string, series ...sampleapi.Series) sampleapi.Entity {
	return sampleapi.Entity{Key: "gpu/GPU-" + strconv.Itoa(i), Kind: "gpu", GPU: i,
		Labels: map[string]string{"gpu": strconv.Itoa(i), "pod": pod, "namespace": "ml", "modelName": "NVIDIA H100"}, Series: series}
}

const t0 = int64(1_764_536_400_000_000_000)

// Two overlapping answers, as a stream and a ring read give them.
func sampleCapture(t *testing.T) *Capture {
	c := New()
	c.Start = time.Unix(0, t0)
	c.End = time.Unix(0, t0+time.Second.Nanoseconds())
	require.NoError(t, c.Add(result(t0,
		gpu(0, "train-0",
			sampleapi.Series{Field: "DCGM_FI_PROF_SM_ACTIVE", T: []int64{t0 + 1_234, t0 + 100_001_234}, V: sampleapi.Values{0.5, 0.75}},
			sampleapi.Series{Field: "DCGM_FI_DEV_POWER_USAGE", T: []int64{t0}, V: sampleapi.Values{300}}),
		gpu(1, "", sampleapi.Series{Field: "DCGM_FI_PROF_SM_ACTIVE", T: []int64{t0 + 5}, V: sampleapi.Values{math.NaN()}}),
	)))
	require.NoError(t, c.Add(result(t0,
		gpu(0, "train-0", sampleapi.Series{Field: "DCGM_FI_PROF_SM_ACTIVE", T: []int64{t0 + 100_001_234, t0 + 200_001_234}, V: sampleapi.Values{0.75, 1}}),
	)))
	return c
}

func TestAddKeepsEachSampleOnce(t *testing.T) {
	c := sampleCapture(t)
	assert.Equal(t, 5, c.Len())
	require.Len(t, c.Entities, 2)
	assert.Equal(t, []int64{t0 + 1_234, t0 + 100_001_234, t0 + 200_001_234}, c.Entities[0].Series[0].T)
	first, last, ok := c.Bounds()
	require.True(t, ok)
	assert.Equal(t, t0, first)
	assert.Equal(t, t0+200_001_234, last)
}

func TestTraceIsChromeTraceJSON(t *testing.T) {
	c := sampleCapture(t)
	var buf bytes.Buffer
	require.NoError(t, WriteTrace(&buf, c, Meta{Version: "v1", Address: "http://node-1:9400"}))
	var tf traceFile
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tf), "the trace parses as JSON")
	assert.Equal(t, "node-1", tf.OtherData["node"])
	fields := tf.OtherData["fields"].(map[string]any)
	assert.Equal(t, "ratio", fields["DCGM_FI_PROF_SM_ACTIVE"].(map[string]any)["unit"])

	procs := map[int]string{}
	labels := map[int]string{}
	var counters []TraceEvent
	for _, ev := range tf.TraceEvents {
		switch {
		case ev.Ph == "M" && ev.Name == "process_name":
			var a struct{ Name string }
			require.NoError(t, json.Unmarshal(ev.Args, &a))
			procs[ev.PID] = a.Name
		case ev.Ph == "M" && ev.Name == "process_labels":
			var a struct{ Labels string }
			require.NoError(t, json.Unmarshal(ev.Args, &a))
			labels[ev.PID] = a.Labels
		case ev.Ph == "C":
			counters = append(counters, ev)
		}
	}
	assert.Equal(t, map[int]string{PIDBase: "GPU 0 ml/train-0 (NVIDIA H100)", PIDBase + 1: "GPU 1 (NVIDIA H100)"}, procs)
	assert.Contains(t, labels[PIDBase], "node=node-1")
	assert.Contains(t, labels[PIDBase], "pod=train-0")

	// The NaN of GPU 1 is left out; the rest are there once, in order, in
	// microseconds, under a track named with the unit.
	type got struct {
		name string
		pid  int
		ts   string
		v    float64
	}
	var all []got
	for _, ev := range counters {
		var a struct{ Value float64 }
		require.NoError(t, json.Unmarshal(ev.Args, &a))
		all = append(all, got{ev.Name, ev.PID, ev.TS.String(), a.Value})
	}
	assert.Equal(t, []got{
		{"DCGM_FI_PROF_SM_ACTIVE (ratio)", PIDBase, "1764536400000001.234", 0.5},
		{"DCGM_FI_PROF_SM_ACTIVE (ratio)", PIDBase, "1764536400100001.234", 0.75},
		{"DCGM_FI_PROF_SM_ACTIVE (ratio)", PIDBase, "1764536400200001.234", 1},
		{"DCGM_FI_DEV_POWER_USAGE (W)", PIDBase, "1764536400000000.000", 300},
	}, all)
}

func TestAppendMicrosIsExact(t *testing.T) {
	tests := []struct {
		ns   int64
		want string
	}{
		{0, "0.000"}, {999, "0.999"}, {1_000, "1.000"}, {1_764_536_400_123_456_789, "1764536400123456.789"}, {5, "0.005"}, {50, "0.050"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(appendMicros(nil, tt.ns)))
	}
}

func TestCSVHasOneRowPerSample(t *testing.T) {
	c := sampleCapture(t)
	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, c))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+5)
	assert.Equal(t, CSVHeader, rows[0])
	assert.Equal(t, []string{strconv.FormatInt(t0+1_234, 10), "node-1", "0", "gpu/GPU-0", "DCGM_FI_PROF_SM_ACTIVE", "ratio", "0.5", "", "train-0", "ml", ""}, rows[1])
	assert.Equal(t, "", rows[5][6], "NaN is an empty cell")
	assert.Equal(t, "W", rows[4][5])
}

func TestChartsDecodeAsImagesOfTheExpectedSize(t *testing.T) {
	c := sampleCapture(t)
	var buf bytes.Buffer
	require.NoError(t, WriteChart(&buf, c, "png"))
	cfg, err := png.DecodeConfig(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err, "the PNG decodes")
	w, h := ChartSize(2)
	assert.Equal(t, 960, w)
	assert.Equal(t, w, cfg.Width)
	assert.Equal(t, h, cfg.Height)
	img, err := png.Decode(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	// Not a blank canvas: lines and text leave pixels of several colours.
	colours := map[[4]uint32]bool{}
	for y := 0; y < cfg.Height; y += 3 {
		for x := 0; x < cfg.Width; x += 3 {
			r, g, b, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, b, a}] = true
		}
	}
	assert.Greater(t, len(colours), 3)

	buf.Reset()
	require.NoError(t, WriteChart(&buf, c, "svg"))
	var svg struct {
		XMLName xml.Name
		Width   string `xml:"width,attr"`
		Height  string `xml:"height,attr"`
	}
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &svg), "the SVG is XML")
	assert.Equal(t, "svg", svg.XMLName.Local)
	assert.Equal(t, "720pt", svg.Width)
	assert.Equal(t, "432pt", svg.Height)
	assert.Contains(t, buf.String(), "DCGM_FI_PROF_SM_ACTIVE")
	assert.Contains(t, buf.String(), "GPU 0")

	assert.ErrorContains(t, WriteChart(&buf, c, "gif"), `format "gif"`)
	assert.ErrorContains(t, WriteChart(&buf, New(), "png"), "no field")
}

func TestCaptureIsBounded(t *testing.T) {
	c := New()
	c.n = MaxSamples
	err := c.Add(result(t0, gpu(0, "", sampleapi.Series{Field: "DCGM_FI_PROF_SM_ACTIVE", T: []int64{t0}, V: sampleapi.Values{1}})))
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.True(t, strings.Contains(err.Error(), "record for less time"))
}

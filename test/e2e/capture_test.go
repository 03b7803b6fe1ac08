package e2e

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/client/capture"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// microsToNanos reads a trace timestamp, microseconds with three decimals,
// back into exact Unix nanoseconds.
func microsToNanos(t *testing.T, s string) int64 {
	t.Helper()
	whole, frac, _ := strings.Cut(s, ".")
	us, err := strconv.ParseInt(whole, 10, 64)
	require.NoError(t, err, s)
	frac = (frac + "000")[:3]
	ns, err := strconv.ParseInt(frac, 10, 64)
	require.NoError(t, err, s)
	return us*1000 + ns
}

// TestCaptureRecordsEverySampleOnce records the sim for two seconds with the
// real binary and checks the trace against what the server's rings hold:
// every sample of each series between its first and last captured sample is
// there once, in order, with its value, under a track that names the unit.
func TestCaptureRecordsEverySampleOnce(t *testing.T) {
	root := e2etest.RepoRoot()
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--sim-pods", "--collectors", filepath.Join(root, "etc", "dcp-metrics.csv"))
	dir := t.TempDir()
	trace := filepath.Join(dir, "run.json")
	fields := []string{"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_POWER_USAGE"}
	out, err := exec.Command(e2etest.Binary(t), "capture", "--address", base, "--duration", "2500ms",
		"--field", strings.Join(fields, ","), "-o", trace).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "wrote")

	body, err := os.ReadFile(trace)
	require.NoError(t, err)
	var tf struct {
		TraceEvents []struct {
			Ph   string      `json:"ph"`
			Name string      `json:"name"`
			PID  int         `json:"pid"`
			TS   json.Number `json:"ts"`
			Args struct {
				Value float64 `json:"value"`
				Name  string  `json:"name"`
			} `json:"args"`
		} `json:"traceEvents"`
		OtherData map[string]any `json:"otherData"`
	}
	require.NoError(t, json.Unmarshal(body, &tf), "the trace parses as JSON")
	assert.Equal(t, "e2e-node", tf.OtherData["node"])

	type key struct {
		pid   int
		track string
	}
	got := map[key][]int64{}
	vals := map[key][]float64{}
	procs := map[int]string{}
	for _, ev := range tf.TraceEvents {
		switch ev.Ph {
		case "M":
			if ev.Name == "process_name" {
				procs[ev.PID] = ev.Args.Name
			}
		case "C":
			k := key{ev.PID, ev.Name}
			got[k] = append(got[k], microsToNanos(t, ev.TS.String()))
			vals[k] = append(vals[k], ev.Args.Value)
		}
	}
	require.Len(t, procs, 8, "a process per GPU")
	assert.Equal(t, "GPU 0 ml-training/llama-train-0 (NVIDIA H100 80GB HBM3)", procs[capture.PIDBase])

	c := &sampleapi.Client{Base: base}
	rings, err := c.Fetch(context.Background(), sampleapi.Query{Fields: fields})
	require.NoError(t, err)
	units := map[string]string{"DCGM_FI_PROF_SM_ACTIVE": "ratio", "DCGM_FI_DEV_POWER_USAGE": "W"}
	minimum := map[string]int{"DCGM_FI_PROF_SM_ACTIVE": 20, "DCGM_FI_DEV_POWER_USAGE": 2}
	for _, e := range rings.Entities {
		for _, s := range e.Series {
			k := key{capture.PIDBase + e.GPU, s.Field + " (" + units[s.Field] + ")"}
			ts := got[k]
			require.GreaterOrEqual(t, len(ts), minimum[s.Field], "%v: samples of 2.5 s", k)
			var want []int64
			var wantV []float64
			for i, x := range s.T {
				if x >= ts[0] && x <= ts[len(ts)-1] {
					want = append(want, x)
					wantV = append(wantV, s.V[i])
				}
			}
			assert.Equal(t, want, ts, "%v: every ring sample once, in order", k)
			assert.Equal(t, wantV, vals[k], "%v: values", k)
		}
	}
	assert.Len(t, got, 16, "two fields on 8 GPUs")
}

// TestCaptureChartsAndCSV takes what the rings hold (--duration 0) as a
// PNG, an SVG and CSV.
func TestCaptureChartsAndCSV(t *testing.T) {
	root := e2etest.RepoRoot()
	base, _ := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "4", "--collectors", filepath.Join(root, "etc", "dcp-metrics.csv"))
	dir := t.TempDir()
	// The rings fill at 100 ms; wait until they hold a second of samples.
	c := &sampleapi.Client{Base: base}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.Fetch(context.Background(), sampleapi.Query{Fields: []string{"DCGM_FI_PROF_SM_ACTIVE"}, GPUs: []int{0}})
		require.NoError(t, err)
		if r.Len() >= 10 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the rings never held 10 samples")
		<-time.After(100 * time.Millisecond)
	}
	bin := e2etest.Binary(t)
	for _, name := range []string{"run.png", "run.svg", "run.csv"} {
		out, err := exec.Command(bin, "capture", "--address", base, "--field", "DCGM_FI_PROF_SM_ACTIVE,DCGM_FI_PROF_DRAM_ACTIVE",
			"-o", filepath.Join(dir, name)).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	f, err := os.Open(filepath.Join(dir, "run.png"))
	require.NoError(t, err)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	require.NoError(t, err, "the PNG decodes")
	w, h := capture.ChartSize(2)
	assert.Equal(t, w, cfg.Width)
	assert.Equal(t, h, cfg.Height)
	svg, err := os.ReadFile(filepath.Join(dir, "run.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, string(svg), "DCGM_FI_PROF_DRAM_ACTIVE")
	cf, err := os.Open(filepath.Join(dir, "run.csv"))
	require.NoError(t, err)
	defer cf.Close()
	rows, err := csv.NewReader(cf).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, capture.CSVHeader, rows[0])
	assert.GreaterOrEqual(t, len(rows), 1+2*4*10, "two fields on 4 GPUs, 10 samples or more each")

	// A field the server does not serve is refused with the server's reason.
	out, err := exec.Command(bin, "capture", "--address", base, "--field", "DCGM_FI_DEV_BAR1_TOTAL",
		"-o", filepath.Join(dir, "x.json")).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "400 Bad Request: field DCGM_FI_DEV_BAR1_TOTAL: not in the counters file")
	out, err = exec.Command(bin, "capture", "--address", base, "-o", filepath.Join(dir, "x.gif"), "--format", "gif").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `--format "gif": use json, csv, svg or png`)
}

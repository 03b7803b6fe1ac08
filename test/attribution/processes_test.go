package attribution

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich"
)

// procSeries is what the per-process families say of one process.
type procSeries struct {
	device, pod, namespace, container, name string
	mem, sm                                 float64
	hasSM                                   bool
}

// wantProcesses is what the per-process families must say of each process
// of the scenario: its device (GPU index, and MIG instance order), its
// pod as the kubelet and its cgroup name it, its name, memory, and SM share
// where the driver gives one (never inside MIG).
func (sc scenario) wantProcesses() map[string]procSeries {
	pods := map[uint32]string{}
	for _, h := range sc.pods {
		for _, pid := range h.pids {
			pods[pid] = h.pod
		}
	}
	out := map[string]procSeries{}
	for _, p := range sc.procs {
		ps := procSeries{device: strconv.Itoa(p.gpu) + "/" + strconv.Itoa(p.inst), pod: pods[p.pid], namespace: "ml",
			container: "main", name: p.name, mem: float64(p.mem)}
		if p.sm >= 0 && p.inst < 0 {
			ps.sm, ps.hasSM = p.sm/100, true
		}
		out[strconv.Itoa(int(p.pid))] = ps
	}
	return out
}

// perProcess runs the engine with --processes over a backend's source, pod
// attribution as its enricher, and reads its per-process families.
func perProcess(t *testing.T, sc scenario, n node, b backendSource) map[string]procSeries {
	t.Helper()
	pa := podAttribution(t, sc, n, b)
	set, err := counters.Parse("fb.csv", strings.NewReader("DCGM_FI_DEV_FB_USED, gauge, Framebuffer used (in MiB).\n"))
	require.NoError(t, err)
	e, err := engine.New(engine.Options{Source: b.src, Counters: set, DefaultInterval: time.Second, Window: 10 * time.Second,
		Hostname: "node-1", Now: func() time.Time { return epoch }, Log: quietLogger(), Enrichers: []enrich.Enricher{pa},
		Processes: engine.ProcessOptions{Enabled: true}})
	require.NoError(t, err)
	require.NoError(t, e.Open())
	if b.resample != nil {
		// The engine's collection reads the process list anew.
		b.resample()
	}
	require.NoError(t, e.CollectAll(context.Background()))
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(e.Render(nil)))
	require.NoError(t, err)
	inst := instanceOrder(b.src.Entities())
	out := map[string]procSeries{}
	for _, m := range mfs["gpuscope_process_info"].GetMetric() {
		l := labelsOf(m.GetLabel())
		gpu, _ := strconv.Atoi(l["gpu"])
		ord := -1
		if id, ok := l["GPU_I_ID"]; ok {
			gi, _ := strconv.Atoi(id)
			ord = inst[gpu][gi]
		}
		out[l["pid"]] = procSeries{device: l["gpu"] + "/" + strconv.Itoa(ord), pod: l["pod"], namespace: l["namespace"],
			container: l["container"], name: l["process_name"]}
	}
	for _, m := range mfs["gpuscope_process_memory_used_bytes"].GetMetric() {
		pid := labelsOf(m.GetLabel())["pid"]
		ps := out[pid]
		ps.mem = m.GetGauge().GetValue()
		out[pid] = ps
	}
	for _, m := range mfs["gpuscope_process_sm_utilization_ratio"].GetMetric() {
		pid := labelsOf(m.GetLabel())["pid"]
		ps := out[pid]
		ps.sm, ps.hasSM = m.GetGauge().GetValue(), true
		out[pid] = ps
	}
	return out
}

func labelsOf[L interface {
	GetName() string
	GetValue() string
}](ls []L) map[string]string {
	out := map[string]string{}
	for _, l := range ls {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestProcessSeriesAlikeOnEveryBackend: with --processes, the same node
// gives every process the same series on DCGM (NVML beside the fake host
// engine), NVML and the sim: its device, its pod, namespace and container
// through its cgroup, its name, memory and SM share.
func TestProcessSeriesAlikeOnEveryBackend(t *testing.T) {
	for _, tc := range sharedAndMIGNodes() {
		t.Run(tc.name, func(t *testing.T) {
			sc := fromSim(t, tc.name, tc.cfg)
			want := sc.wantProcesses()
			require.Len(t, want, len(sc.procs))
			for _, ps := range want {
				require.NotEmpty(t, ps.name, "the sim names its processes")
			}
			n := newNode(t, sc)
			for _, b := range backends {
				t.Run(b.name, func(t *testing.T) {
					assert.Equal(t, want, perProcess(t, sc, n, b.open(t, sc, tc.cfg)), "per-process series on %s", b.name)
				})
			}
		})
	}
}

package exposition

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/hpcjob"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podlabels"
	"github.com/gpuscope/gpuscope/internal/enrich/simpods"
	"github.com/gpuscope/gpuscope/internal/serve/reload"
	"github.com/gpuscope/gpuscope/internal/serve/server"
	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sim"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// scenario is one way gpuscope runs: its text exposition, its protobuf
// families (with the native histograms), and the collectors it registers.
type scenario struct {
	name       string
	text       []byte
	proto      []*dto.MetricFamily
	collectors []prometheus.Collector
}

var epoch = time.Unix(1_750_000_000, 0)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// shippedCounters are the counters files gpuscope ships, nvidia_gpu_exporter's
// layout and dcgm-exporter's own files included.
func shippedCounters(t *testing.T) []string {
	t.Helper()
	etc := filepath.Join(e2etest.RepoRoot(), "etc")
	files, err := filepath.Glob(filepath.Join(etc, "*.csv"))
	require.NoError(t, err)
	more, err := filepath.Glob(filepath.Join(etc, "dcgm-exporter", "*.csv"))
	require.NoError(t, err)
	files = append(files, more...)
	require.GreaterOrEqual(t, len(files), 5, "the shipped counters files under %s", etc)
	return files
}

// scenarios runs the engine the ways that change what it exposes: every
// shipped counters file on the sim with its simulated pods; insight, and
// MIG with compute instances, in both label layouts; every entity kind with
// every enricher label, XIDs, health and P2P, under each spelling of the
// labels; and the collectors of the command's other parts.
func scenarios(t *testing.T) []scenario {
	t.Helper()
	var out []scenario
	for _, file := range shippedCounters(t) {
		set, err := counters.Load(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(e2etest.RepoRoot(), file)
		rel = filepath.ToSlash(rel)
		if rel != "etc/dcp-metrics.csv" && rel != "etc/nvidia-gpu-exporter.csv" {
			out = append(out, simScenario(t, "sim -f "+rel, set, sim.Config{}, engine.Options{}, 3*time.Second))
			continue
		}
		// Insight's families, the MIG labels, and the per-process families
		// of whole GPUs and MIG instances, in each label layout.
		procs := engine.ProcessOptions{Enabled: true}
		out = append(out, simScenario(t, "sim --insight --processes -f "+rel, set, sim.Config{}, engine.Options{Insight: engine.InsightOptions{Enabled: true}, Processes: procs}, 40*time.Second),
			simScenario(t, "sim --mig-compute-instances --processes MIG -f "+rel, set, sim.Config{MIG: "all"},
				engine.Options{ComputeInstances: true, Processes: procs}, 3*time.Second))
	}
	entities, err := counters.Parse("entity counters", strings.NewReader(entityCounters))
	require.NoError(t, err)
	nvgpuExporter, err := counters.Load(filepath.Join(e2etest.RepoRoot(), "etc", "nvidia-gpu-exporter.csv"))
	require.NoError(t, err)
	for _, sc := range []struct {
		name string
		set  *counters.Set
		opts engine.Options
	}{
		{"every entity kind", entities, engine.Options{}},
		{"every entity kind -o", entities, engine.Options{OldNamespace: true}},
		{"every entity kind --hostname-label=hostname", entities, engine.Options{HostnameLabel: "hostname"}},
		{"every entity kind -f etc/nvidia-gpu-exporter.csv", nvgpuExporter, engine.Options{}},
	} {
		out = append(out, entityScenario(t, sc.name, sc.set, sc.opts))
	}
	return append(out, commandScenario(t))
}

// simScenario renders two simulated GPUs with their simulated pods after d
// of collections every 100 ms; insight's window needs 40 s.
func simScenario(t *testing.T, name string, set *counters.Set, cfg sim.Config, opts engine.Options, d time.Duration) scenario {
	t.Helper()
	clk := sourcetest.NewClock(epoch)
	def := sim.DefaultConfig()
	def.GPUs, def.Seed, def.Now, def.Hostname, def.MIG = 2, 7, clk.Now, "node-1", cfg.MIG
	src, err := sim.New(def)
	require.NoError(t, err, name)
	pods := simpods.New(def.GPUs)
	opts.Source, opts.Counters, opts.DefaultInterval, opts.Window = src, set, time.Second, 10*time.Second
	opts.Hostname, opts.Now, opts.Log, opts.Enrichers = "node-1", clk.Now, quietLog(), []enrich.Enricher{pods}
	e := driven(t, name, opts, clk, d)
	return scenario{name: name, text: e.Render(nil), proto: protoFamilies(t, e), collectors: []prometheus.Collector{e, pods}}
}

// driven builds an engine and collects every 100 ms for d.
func driven(t *testing.T, name string, opts engine.Options, clk *sourcetest.Clock, d time.Duration) *engine.Engine {
	t.Helper()
	e, err := engine.New(opts)
	require.NoError(t, err, name)
	require.NoError(t, e.Open(), name)
	for elapsed := time.Duration(0); elapsed < d; elapsed += 100 * time.Millisecond {
		clk.Add(100 * time.Millisecond)
		require.NoError(t, e.CollectAll(context.Background()), name)
	}
	if opts.Insight.Enabled {
		e.ComputeInsight()
	}
	return e
}

// entityCounters has a field of each entity level, the label field, the
// XID field, and the exporter-side fields.
const entityCounters = `DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C)., 100ms, max
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_FI_DRIVER_VERSION, label, Driver version.
DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, Current clock event reasons (bitmask).
DCGM_FI_DEV_NVLINK_PPCNT_PHYSICAL_LINK_DOWN_COUNTER, counter, Link down events.
DCGM_FI_DEV_NVSWITCH_CURRENT_IDDQ, gauge, NvSwitch current IDDQ.
DCGM_FI_DEV_CPU_UTIL_TOTAL, gauge, CPU utilization.
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_EXP_XID_ERRORS_COUNT, gauge, XIDs within the window.
DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, Clock events within the window.
DCGM_EXP_GPU_HEALTH_STATUS, gauge, Health status.
DCGM_EXP_P2P_STATUS, gauge, P2P NVLink status.
`

// entityScenario renders a scripted node with an entity of every kind, an
// XID on a GPU, a failing health watch, a field one GPU does not support,
// and every label the enrichers can write.
func entityScenario(t *testing.T, name string, set *counters.Set, opts engine.Options) scenario {
	t.Helper()
	clk := sourcetest.NewClock(epoch)
	src := sourcetest.NewGPUs(2, func(e *source.Entity, f uint16, _ time.Time) (float64, bool) {
		return 1, !(e.Kind == source.GPU && e.GPU == 1 && f == fieldid.PowerUsage)
	})
	src.Now = clk.Now
	src.Texts = map[uint16]string{fieldid.DriverVersion: "570.1"}
	src.TextsEverywhere = true
	gi := *src.Ents[1]
	gi.Kind, gi.GPUInstanceID, gi.GPUInstanceProfile = source.GPUInstance, 3, "1g.10gb"
	ci := gi
	ci.Kind, ci.ComputeInstanceID = source.ComputeInstance, 0
	link := *src.Ents[0]
	link.Kind, link.Link = source.NVLink, 4
	sw := source.Entity{Kind: source.NvSwitch, GPU: -1, GPUInstanceID: -1, ComputeInstanceID: -1, Link: -1, Switch: 1, CPU: -1, CPUCore: -1}
	swLink := sw
	swLink.Kind, swLink.Link = source.NVLink, 7
	cpu, core := source.NewCPU(0, -1), source.NewCPU(0, 5)
	src.Ents = append(src.Ents, &gi, &ci, &link, &sw, &swLink, &cpu, &core)
	src.XIDs = []sourcetest.XID{{Entity: src.Ents[0], Code: 79, At: clk.Now()}}
	src.Health = map[*source.Entity][]source.HealthResult{src.Ents[0]: failingHealth()}
	enr := &everyLabel{names: append(podattr.LabelNames(true, true, true), hpcjob.LabelJob)}
	opts.Source, opts.Counters, opts.DefaultInterval, opts.Window = src, set, time.Second, 10*time.Second
	opts.Hostname, opts.Now, opts.Log, opts.Enrichers = "node-1", clk.Now, quietLog(), []enrich.Enricher{enr}
	opts.ComputeInstances = true
	e := driven(t, name, opts, clk, 3*time.Second)
	return scenario{name: name, text: e.Render(nil), proto: protoFamilies(t, e), collectors: []prometheus.Collector{e}}
}

func failingHealth() []source.HealthResult {
	h := source.PassingHealth()
	source.SetHealth(h, source.HealthResult{Watch: "MEM", ErrorCode: "DCGM_FR_VOLATILE_DBE_DETECTED", Result: 20})
	return h
}

// everyLabel is an enricher that writes every label the Kubernetes and HPC
// enrichers can write, and one pod label.
type everyLabel struct {
	prometheus.Collector
	names []string
}

func (p *everyLabel) LabelNames() []string { return p.names }
func (p *everyLabel) Values(*source.Entity) []string {
	v := make([]string, len(p.names))
	for i := range v {
		v[i] = "v"
	}
	return v
}
func (p *everyLabel) Generation() uint64  { return 1 }
func (p *everyLabel) MaxExtraLabels() int { return 1 }
func (p *everyLabel) ExtraLabels(*source.Entity) []enrich.Label {
	return []enrich.Label{{Name: "app_kubernetes_io_name", Value: "trainer"}}
}

// capture is a prometheus.Registerer that keeps what is registered.
type capture struct{ collectors []prometheus.Collector }

func (c *capture) Register(col prometheus.Collector) error {
	c.collectors = append(c.collectors, col)
	return nil
}

func (c *capture) MustRegister(cols ...prometheus.Collector) {
	c.collectors = append(c.collectors, cols...)
}

func (c *capture) Unregister(prometheus.Collector) bool { return false }

// commandScenario holds the collectors cmd/gpuscope registers beside the
// engine's, each built as the command builds it.
func commandScenario(t *testing.T) scenario {
	t.Helper()
	reg := &capture{}
	reg.MustRegister(versioncollector.NewCollector("gpuscope"), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	_, err := server.New(server.Options{Registerer: reg, Log: quietLog()})
	require.NoError(t, err)
	pa, err := podattr.New(podattr.Config{Logger: quietLog()})
	require.NoError(t, err)
	pl, err := podlabels.New(podlabels.Config{Allowlist: regexp.MustCompile("app"), NodeName: "node-1", Server: "https://127.0.0.1:6443", Logger: quietLog()})
	require.NoError(t, err)
	hj, err := hpcjob.New(t.TempDir())
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "counters.csv")
	require.NoError(t, os.WriteFile(file, []byte(entityCounters), 0o644))
	rw := reload.New(file, func(*counters.Set) error { return nil }, time.Second, quietLog())
	reg.MustRegister(pa, pl, hj, rw)
	return scenario{name: "the command's collectors", collectors: reg.collectors}
}

// protoFamilies decodes the engine's protobuf exposition, the families a
// Prometheus that negotiates protobuf reads.
func protoFamilies(t *testing.T, e *engine.Engine) []*dto.MetricFamily {
	t.Helper()
	body, err := e.AppendProto(nil)
	require.NoError(t, err)
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding the protobuf exposition: %v", err)
		}
		out = append(out, mf)
	}
}

package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/engine/labelbudget"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

// everyEntityEnricher labels every entity with all its names and its
// run-time labels, so that every series is as wide as it gets.
type everyEntityEnricher struct {
	prometheus.Collector
	names []string
	extra int
}

func (p *everyEntityEnricher) LabelNames() []string { return p.names }
func (p *everyEntityEnricher) Values(*source.Entity) []string {
	v := make([]string, len(p.names))
	for i := range v {
		v[i] = "v"
	}
	return v
}
func (p *everyEntityEnricher) Generation() uint64 { return 1 }

// ProcessPod gives every process a pod, container included.
func (p *everyEntityEnricher) ProcessPod(*source.Entity, uint32) (string, string, string, bool) {
	return "p", "n", "c", true
}
func (p *everyEntityEnricher) MaxExtraLabels() int { return p.extra }
func (p *everyEntityEnricher) ExtraLabels(*source.Entity) []enrich.Label {
	out := make([]enrich.Label, p.extra)
	for i := range out {
		out[i] = enrich.Label{Name: fmt.Sprintf("podlabel%d", i), Value: "x"}
	}
	return out
}

// seriesKind tells a rendered series' entity kind from its identity labels.
func seriesKind(labels map[string]bool) string {
	switch {
	case labels["cpucore"]:
		return "CPU core"
	case labels["cpu"]:
		return "CPU"
	case labels["nvlink"] && labels["nvswitch"]:
		return "NvSwitch link"
	case labels["nvlink"]:
		return "GPU NVLink"
	case labels["nvswitch"]:
		return "NvSwitch"
	case labels["GPU_CI_ID"]:
		return "MIG compute instance"
	case labels["GPU_I_ID"]:
		return "MIG GPU instance"
	}
	return "GPU"
}

// widestRendered renders every kind of entity with every label it can carry
// and returns, per kind, the most labels one of its series has.
func widestRendered(t *testing.T, csv string, enr *everyEntityEnricher, opts Options) map[string]int {
	clk := newClock()
	src := sourcetest.NewGPUs(2, func(*source.Entity, uint16, time.Time) (float64, bool) { return 1, true })
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
	// A process on the GPU and one in the MIG instance, named.
	src.Procs = []source.Process{{PID: 1, UUID: src.Ents[0].UUID, GPUInstanceID: -1, UsedMemoryBytes: 1, SMUtil: 1, Name: "a"},
		{PID: 2, UUID: gi.UUID, GPUInstanceID: gi.GPUInstanceID, UsedMemoryBytes: 1, SMUtil: -1, Name: "b"}}
	// DCGM's XID field is read per compute instance, so MIG instances get
	// XIDs of their own.
	for _, ent := range []*source.Entity{src.Ents[0], &gi, &ci} {
		src.XIDs = append(src.XIDs, sourcetest.XID{Entity: ent, Code: 79, At: clk.Now()})
	}
	opts.Source, opts.Counters, opts.DefaultInterval, opts.Window = src, parseSet(t, csv), time.Second, 10*time.Second
	opts.Now, opts.Log, opts.Enrichers = clk.Now, quietLog(), []enrich.Enricher{enr}
	e, err := New(opts)
	require.NoError(t, err)
	require.NoError(t, src.Watch(e.plan.groups))
	e.refreshEntities()
	for range 3 {
		clk.Add(time.Second)
		collectAll(t, e)
	}
	if opts.Processes.Enabled {
		e.refreshProcesses()
		require.Contains(t, scrape(t, e), procInfoName)
	}
	widest := map[string]int{}
	for _, mf := range scrape(t, e) {
		for _, m := range mf.Metric {
			names := map[string]bool{}
			for _, l := range m.Label {
				names[l.GetName()] = true
			}
			k := seriesKind(names)
			widest[k] = max(widest[k], len(m.Label)+1) // +1: __name__
		}
	}
	return widest
}

// The label budget counts, per entity kind, exactly the labels the engine
// writes on that kind's widest series: the count from SeriesShape equals
// the labels of a rendered series of each kind.
func TestLabelCountEqualsTheRenderedLabelsOfEveryKind(t *testing.T) {
	csv := "DCGM_FI_DEV_GPU_TEMP, gauge, t, 1s, max\nDCGM_FI_DEV_XID_ERRORS, gauge, x\nDCGM_FI_DRIVER_VERSION, label, d\n"
	pods := []string{"pod", "namespace", "container", "vgpu"}
	tests := []struct {
		name string
		csv  string
		opts Options
		enr  *everyEntityEnricher
		// want is the stored count per kind, __name__ and Prometheus'
		// labels included.
		want map[string]int
	}{
		{"kubernetes with virtual GPUs and pod labels, compute instances", "",
			Options{Hostname: "node-1", ComputeInstances: true},
			&everyEntityEnricher{names: pods, extra: 3},
			map[string]int{"GPU": 6 + 1 + 4 + 3 + 2 + 4, "MIG GPU instance": 8 + 1 + 4 + 3 + 2 + 4, "MIG compute instance": 9 + 1 + 4 + 3 + 2 + 4,
				"GPU NVLink": 7 + 1 + 4 + 3 + 1 + 4, "NvSwitch link": 3 + 1 + 4 + 3 + 1 + 4, "NvSwitch": 2 + 1 + 4 + 3 + 1 + 4,
				"CPU": 2 + 1 + 4 + 3 + 1 + 4, "CPU core": 3 + 1 + 4 + 3 + 1 + 4}},
		{"no hostname, old namespace, no enricher labels", "",
			Options{OldNamespace: true, ComputeInstances: true},
			&everyEntityEnricher{},
			map[string]int{"GPU": 5 + 1 + 2 + 4, "MIG GPU instance": 7 + 1 + 2 + 4, "MIG compute instance": 8 + 1 + 2 + 4,
				"GPU NVLink": 6 + 1 + 1 + 4, "NvSwitch link": 2 + 1 + 1 + 4, "NvSwitch": 1 + 1 + 1 + 4, "CPU": 1 + 1 + 1 + 4, "CPU core": 2 + 1 + 1 + 4}},
		// A process's series carry pid, process_name and its pod's three
		// labels beside the device's: two family labels over a device
		// series with the pod labels and no family label of its own.
		{"per-process series, pod labels, no other family label", "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DRIVER_VERSION, label, d\n",
			Options{Hostname: "node-1", ComputeInstances: true, Processes: ProcessOptions{Enabled: true}},
			&everyEntityEnricher{names: pods[:3]},
			map[string]int{"GPU": 6 + 1 + 3 + 2 + 4, "MIG GPU instance": 8 + 1 + 3 + 2 + 4, "MIG compute instance": 9 + 1 + 3 + 4,
				"GPU NVLink": 7 + 1 + 3 + 4, "NvSwitch link": 3 + 1 + 3 + 4, "NvSwitch": 2 + 1 + 3 + 4,
				"CPU": 2 + 1 + 3 + 4, "CPU core": 3 + 1 + 3 + 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := csv
			if tt.csv != "" {
				file = tt.csv
			}
			rendered := widestRendered(t, file, tt.enr, tt.opts)
			opts := tt.opts
			opts.HostnameLabel = DefaultHostnameLabel
			shape := shapeOf(&opts, parseSet(t, file), []enricherLabels{{e: tt.enr, names: tt.enr.names}})
			kinds := shape.Kinds()
			require.Len(t, kinds, len(tt.want), "every kind is counted")
			for _, k := range kinds {
				c := shape.Count(&k)
				assert.Equal(t, tt.want[c.Kind], c.Stored(), "%s: the count", c.Kind)
				assert.Equal(t, rendered[c.Kind]+labelbudget.Reserved-1, c.Stored(), "%s: the count against the rendered labels", c.Kind)
			}
		})
	}
}

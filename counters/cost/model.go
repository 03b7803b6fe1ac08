package cost

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// class groups the entity levels whose fields are written on the same label
// sets: a MIG instance carries the GPU-level fields of its GPU, so GPU,
// instance and host-level fields share one class.
type class uint8

const (
	classGPU class = iota
	classLink
	classSwitch
	classCPU
	classCPUCore
	classConnectX
)

func classOf(l fieldid.Level) class {
	switch l {
	case fieldid.LevelLink:
		return classLink
	case fieldid.LevelNvSwitch:
		return classSwitch
	case fieldid.LevelCPU:
		return classCPU
	case fieldid.LevelCPUCore:
		return classCPUCore
	case fieldid.LevelConnectX:
		return classConnectX
	}
	return classGPU
}

// shape is what a field of one class is written on: Sets label sets whose
// sample lines are, after the metric name, Tail bytes long on average (the
// label set, the value and the newline).
type shape struct {
	Sets int
	Tail float64
}

// Node is the shape of a node's exposition that a field's cost follows
// from. Build it with NodeOf.
type Node struct {
	// Window is the span of the window statistics, which their HELP text names.
	Window time.Duration
	shapes map[class]shape
}

// NodeOf reads the label sets each class of field is written on from the
// sample lines of the catalog fields in x. Exporter-side fields (events,
// derived fields) and the XID field carry labels of their own and are not
// looked at.
func NodeOf(x Exposition, window time.Duration) Node {
	type acc struct {
		keys        map[string]bool
		tail, lines int
	}
	accs := map[class]*acc{}
	for _, s := range x.Series {
		info, ok := counters.Lookup(s.Name)
		if !ok || fieldid.IsExporter(info.ID) {
			continue
		}
		if _, xid := s.Labels["err_code"]; xid {
			continue
		}
		c := classOf(info.Level)
		a := accs[c]
		if a == nil {
			a = &acc{keys: map[string]bool{}}
			accs[c] = a
		}
		a.keys[labelKey(s.Labels)] = true
		a.tail += s.Bytes - len(s.Name)
		a.lines++
	}
	n := Node{Window: window, shapes: map[class]shape{}}
	for c, a := range accs {
		n.shapes[c] = shape{Sets: len(a.keys), Tail: float64(a.tail) / float64(a.lines)}
	}
	return n
}

func labelKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// Assume sets how many entities a level has where the exposition shows no
// field of it yet (no NVLink field exported, say): each gets one label set
// as long as a GPU's. Levels the exposition shows are left as they are.
func (n *Node) Assume(level fieldid.Level, entities int) {
	c := classOf(level)
	if _, seen := n.shapes[c]; seen || entities <= 0 {
		return
	}
	if n.shapes == nil {
		n.shapes = map[class]shape{}
	}
	n.shapes[c] = shape{Sets: entities, Tail: n.shapes[classGPU].Tail}
}

// Sets is the number of label sets a field of this level is written on.
func (n Node) Sets(level fieldid.Level) int { return n.shapes[classOf(level)].Sets }

// Field is what one counters line costs on a node, split so that it can be
// recomputed for any number of window statistics (With): the page's script
// does so from these three numbers.
type Field struct {
	// Value is the field's own family.
	Value Family `json:"value"`
	// Samples is what the first window statistic adds besides its own
	// series: the NAME_window_samples family and the NAME_window header.
	Samples Family `json:"samples"`
	// PerStat is what each window statistic adds to NAME_window.
	PerStat Family `json:"perStat"`
}

// With is the field's cost with this many window statistics.
func (f Field) With(stats int) Family {
	if stats <= 0 {
		return f.Value
	}
	c := f.Value.Add(f.Samples)
	for range stats {
		c = c.Add(f.PerStat)
	}
	return c
}

// statLabel is the label each window statistic's sample line adds; every
// statistic's name has three letters.
const statLabel = `,stat="min"`

// Field models the cost of f on the node, as the engine renders it: one
// sample line per label set of its level, and with window statistics a
// line per statistic in NAME_window and one in NAME_window_samples.
// Label-type fields add labels, not series, and cost nothing here.
func (n Node) Field(f counters.Field) Field {
	if f.Type == counters.Label {
		return Field{}
	}
	level := fieldid.Of(f.ID).Level
	sh := n.shapes[classOf(level)]
	if sh.Sets == 0 {
		return Field{}
	}
	lines := func(name string, extra int) int {
		return int(math.Round(float64(sh.Sets) * (float64(len(name)+extra) + sh.Tail)))
	}
	win := n.Window.String()
	windowName, samplesName := f.Name+"_window", f.Name+"_window_samples"
	return Field{
		Value: Family{Series: sh.Sets, Bytes: header(f.Name, f.Help, f.Type.String()) + lines(f.Name, 0)},
		Samples: Family{Series: sh.Sets, Bytes: header(windowName, "Window statistics of "+f.Name+" over the last "+win+", by stat.", "gauge") +
			header(samplesName, "Samples of "+f.Name+" in the last "+win+" window.", "gauge") + lines(samplesName, 0)},
		PerStat: Family{Series: sh.Sets, Bytes: lines(windowName, len(statLabel))},
	}
}

// header is the size of a family's HELP and TYPE lines.
func header(name, help, typ string) int {
	return len("# HELP  \n# TYPE  \n") + 2*len(name) + len(help) + len(typ)
}

// Field sums the families a counters line adds to x: NAME, NAME_window and
// NAME_window_samples.
func (x Exposition) Field(name string) Family {
	return x.Families[name].Add(x.Families[name+"_window"]).Add(x.Families[name+"_window_samples"])
}

// Total sums every family of x.
func (x Exposition) Total() Family {
	var t Family
	for _, f := range x.Families {
		t = t.Add(f)
	}
	return t
}

// Besides is what x costs besides the families of these fields: gpuscope's
// own metrics, events and health, which a selection does not change.
func (x Exposition) Besides(fields []string) Family {
	t := x.Total()
	seen := map[string]bool{}
	for _, name := range fields {
		if seen[name] {
			continue
		}
		seen[name] = true
		f := x.Field(name)
		t.Series -= f.Series
		t.Bytes -= f.Bytes
	}
	return t
}

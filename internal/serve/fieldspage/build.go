package fieldspage

import (
	"html/template"
	"math"
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/cost"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// pageView is what the template shows.
type pageView struct {
	Source   string
	Running  string
	GPUs     int
	Groups   []groupView
	Unserved []unservedView
	// Base is what the node exposes besides the fields: gpuscope's own
	// metrics, events and health, measured now.
	Base cost.Family
	// Total is Base plus the ticked fields, modelled.
	Total costView
	// Now is the exposition as it is, measured.
	Now             costView
	CSV, CM, Values string
	// Scrape is the scrape interval samples per second are priced at, in seconds.
	Scrape float64
	CSS    template.CSS
	JS     template.JS
}

type groupView struct {
	// ID is the section's anchor: /fields#profiling.
	ID     string
	Name   string
	Fields []fieldView
}

type unservedView struct{ Name, Why string }

type fieldView struct {
	Name, Help, Unit, Type, Via string
	// Also lists the field's other DCGM names (DCGM 4.6's, or the older
	// ones), which a counters file may use as well.
	Also     string
	Label    bool
	Checked  bool
	Interval string
	Stats    []statBox
	// Unserved lists the GPUs that report the field unsupported.
	Unserved []string
	Latest   string
	Spark    template.HTML
	Cost     cost.Field
	// Row is the field's cost with its ticked statistics.
	Row cost.Family
	// Sets is how many label sets the field is written on.
	Sets int
}

type statBox struct {
	Name    string
	Checked bool
}

// build gathers what the page shows: the catalog fields the active source
// serves, grouped, with what the node knows of each, and the cost of sel.
func (h *Handler) build(sel []counters.Field, chosen bool) pageView {
	m := h.model()
	if !chosen {
		sel = canonical(m.fields)
	}
	ticked := map[uint16]counters.Field{}
	for _, f := range sel {
		ticked[f.ID] = f
	}
	v := pageView{Source: h.source(), GPUs: m.gpus, Base: m.base, Now: viewCost(m.now),
		Scrape: cost.Scrape.Seconds(), CSS: h.css, JS: h.js}
	if m.running != nil {
		v.Running = m.running.File
	}
	total := v.Base
	for _, f := range sel {
		total = total.Add(m.node.Field(f).With(len(f.Stats)))
	}
	v.Total = viewCost(total)
	byGroup := map[string][]fieldView{}
	for _, info := range counters.All() {
		if info.Legacy || !info.Described() {
			continue
		}
		ok, why := h.serves(info.ID)
		if !ok {
			v.Unserved = append(v.Unserved, unservedView{Name: info.Name, Why: why})
			continue
		}
		fv := h.field(info, ticked, m.node)
		fv.Unserved, fv.Latest, fv.Spark = m.unsup[info.Name], m.latest[info.Name], m.sparks[info.Name]
		g := groupOf(info)
		byGroup[g] = append(byGroup[g], fv)
	}
	for _, g := range groups {
		if fs := byGroup[g]; len(fs) > 0 {
			v.Groups = append(v.Groups, groupView{ID: anchor(g), Name: g, Fields: fs})
		}
	}
	if len(sel) > 0 {
		csv := countersCSV(sel)
		v.CSV, v.CM, v.Values = csv, configMap(csv), helmValues(csv)
	}
	return v
}

func (h *Handler) source() string {
	if h.opts.Source == nil {
		return ""
	}
	return h.opts.Source()
}

// canonical maps the running file's fields onto the catalog's current
// names (a legacy or deprecated name ticks the field it stands for).
func canonical(fs []counters.Field) []counters.Field {
	out := make([]counters.Field, 0, len(fs))
	seen := map[uint16]bool{}
	for _, f := range fs {
		info, ok := counters.ByID(f.ID)
		if !ok || seen[f.ID] {
			continue
		}
		seen[f.ID] = true
		f.Name, f.Help = info.Name, info.Help
		out = append(out, f)
	}
	return out
}

// assumeEntities tells the node the entities the source sees at levels no
// exported field shows yet, and returns the number of GPUs.
func (h *Handler) assumeEntities(node *cost.Node) int {
	if h.opts.Entities == nil {
		return node.Sets(fieldid.LevelGPU)
	}
	counts := map[fieldid.Level]int{}
	gpus := 0
	for _, e := range h.opts.Entities() {
		switch e.Kind {
		case source.GPU:
			gpus++
			counts[fieldid.LevelGPU]++
		case source.NVLink:
			counts[fieldid.LevelLink]++
		case source.NvSwitch:
			counts[fieldid.LevelNvSwitch]++
		case source.CPU:
			counts[fieldid.LevelCPU]++
		case source.CPUCore:
			counts[fieldid.LevelCPUCore]++
		}
	}
	for l, n := range counts {
		node.Assume(l, n)
	}
	return gpus
}

// serves says whether the active source serves the field, and why not.
func (h *Handler) serves(id uint16) (bool, string) {
	name := h.source()
	for _, s := range h.opts.Supports {
		if s.Source == name {
			ok, why := s.Serves(id)
			if !ok && why == "" {
				why = "the " + name + " source does not read it"
			}
			return ok, why
		}
	}
	return true, ""
}

// via names what reads the field: DCGM, NVML, or NVML's GPM for the
// profiling fields, as far as the sources say they serve it.
func (h *Handler) via(info counters.FieldInfo) string {
	var out []string
	for _, s := range h.opts.Supports {
		if ok, _ := s.Serves(info.ID); !ok {
			continue
		}
		if s.Via != nil {
			out = append(out, s.Via(info.Name))
		}
	}
	if info.Exporter() {
		out = append(out, "gpuscope")
	}
	return strings.Join(out, ", ")
}

// otherDCGMNames are the names of the same field ID other than info's.
func otherDCGMNames(info counters.FieldInfo) []string {
	var out []string
	if info.Current != "" {
		out = append(out, info.Current)
		if cur, ok := counters.Lookup(info.Current); ok {
			for _, r := range cur.Replaces {
				if r != info.Name {
					out = append(out, r)
				}
			}
		}
	}
	return append(out, info.Replaces...)
}

func (h *Handler) field(info counters.FieldInfo, ticked map[uint16]counters.Field, node cost.Node) fieldView {
	f := counters.Field{Name: info.Name, ID: info.ID, Type: info.Type, Help: info.Help}
	t, checked := ticked[info.ID]
	if checked {
		f.Interval, f.Stats = t.Interval, t.Stats
	}
	fv := fieldView{Name: info.Name, Help: info.Help, Unit: info.Unit, Type: info.Type.String(), Via: h.via(info),
		Label: info.Type == counters.Label, Checked: checked, Cost: node.Field(f), Sets: node.Sets(info.Level)}
	fv.Also = strings.Join(otherDCGMNames(info), ", ")
	fv.Row = fv.Cost.With(len(f.Stats))
	if f.Interval > 0 {
		fv.Interval = f.Interval.String()
	}
	// Window statistics apply to gauges only; the page offers none for a
	// counter, as the counters file would refuse them.
	stats := counters.AllStats
	if f.Type != counters.Gauge {
		stats = nil
	}
	for _, st := range stats {
		on := false
		for _, s := range f.Stats {
			on = on || s == st
		}
		fv.Stats = append(fv.Stats, statBox{Name: st.String(), Checked: on})
	}
	return fv
}

// unsupportedGPUs reads gpuscope_field_supported: the GPUs on which a
// field of the running file is not served, each with the reason the source
// gave (its reason label).
func unsupportedGPUs(x cost.Exposition) map[string][]string {
	out := map[string][]string{}
	for _, s := range x.Series {
		if s.Name != "gpuscope_field_supported" || s.Value != "0" {
			continue
		}
		f := s.Labels["field"]
		if info, ok := counters.Lookup(f); ok {
			if c, ok := counters.ByID(info.ID); ok {
				f = c.Name
			}
		}
		why := s.Labels["reason"]
		if why == "" {
			why = "the source reports the field unsupported on it"
		}
		out[f] = append(out[f], "GPU "+s.Labels["gpu"]+": "+why)
	}
	return out
}

// latestValues shows each exported field's value now: the one value all
// series share, or the range over them.
func latestValues(x cost.Exposition) map[string]string {
	type span struct{ lo, hi float64 }
	spans := map[string]*span{}
	for _, s := range x.Series {
		if strings.HasSuffix(s.Name, "_window") || strings.HasSuffix(s.Name, "_window_samples") {
			continue
		}
		info, ok := counters.Lookup(s.Name)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(s.Value, 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		name := info.Name
		if c, ok := counters.ByID(info.ID); ok {
			name = c.Name
		}
		sp := spans[name]
		if sp == nil {
			sp = &span{lo: v, hi: v}
			spans[name] = sp
		}
		sp.lo, sp.hi = math.Min(sp.lo, v), math.Max(sp.hi, v)
	}
	out := make(map[string]string, len(spans))
	for name, sp := range spans {
		if sp.lo == sp.hi {
			out[name] = short(sp.lo)
		} else {
			out[name] = short(sp.lo) + " – " + short(sp.hi)
		}
	}
	return out
}

// short writes a value in at most four significant digits, with an SI
// prefix past a thousand: byte rates run to 1e11.
func short(v float64) string {
	prefixes := []string{"", "k", "M", "G", "T", "P"}
	i := 0
	for math.Abs(v) >= 1000 && i < len(prefixes)-1 {
		v /= 1000
		i++
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + prefixes[i]
}

func oneDecimal(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// humanBytes writes a byte count as the script does.
func humanBytes(n int) string {
	if n < 1024 {
		return strconv.Itoa(n) + " B"
	}
	return oneDecimal(float64(n)/1024) + " KiB"
}

// anchor is a group's id: "NVLink and NvSwitch" is nvlink-and-nvswitch.
func anchor(group string) string { return strings.ReplaceAll(strings.ToLower(group), " ", "-") }

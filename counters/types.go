// Package counters reads the counters CSV that selects which GPU fields
// gpuscope exports, and holds the catalog of every field it knows.
package counters

import (
	"time"
)

// MetricType is the Prometheus type a CSV line asks for.
type MetricType uint8

const (
	Gauge MetricType = iota + 1
	Counter
	// Label fields are not exported as series: their text value becomes a
	// label, named after the field, on every series of the entity.
	Label
)

func (t MetricType) String() string {
	switch t {
	case Gauge:
		return "gauge"
	case Counter:
		return "counter"
	case Label:
		return "label"
	}
	return "unknown"
}

// Stat is one window statistic a CSV line can ask for: one of
// Statistics, counted from 1.
type Stat uint8

// The statistics other code names; every registered one is in AllStats.
var (
	StatMin = statNamed("min")
	StatMax = statNamed("max")
	StatAvg = statNamed("avg")
	StatP50 = statNamed("p50")
	StatP90 = statNamed("p90")
	StatP99 = statNamed("p99")
)

// NoHistogramWord is the word that, among a line's window statistics,
// turns off its native histogram.
const NoHistogramWord = "nohist"

// AllStats lists the statistics in the order they are exported.
var AllStats = func() []Stat {
	out := make([]Stat, len(Statistics))
	for i := range out {
		out[i] = Stat(i + 1)
	}
	return out
}()

func (s Stat) String() string {
	if i := s.Index(); i >= 0 {
		return Statistics[i].Name
	}
	return "unknown"
}

// Index is the statistic's index in Statistics, -1 for none.
func (s Stat) Index() int {
	if s == 0 || int(s) > len(Statistics) {
		return -1
	}
	return int(s) - 1
}

// StatNames are the statistics' names, in AllStats order.
func StatNames() []string {
	out := make([]string, len(Statistics))
	for i, st := range Statistics {
		out[i] = st.Name
	}
	return out
}

// statNamed is the registered statistic of that name; a name that is not
// one is a programming error.
func statNamed(name string) Stat {
	for i, st := range Statistics {
		if st.Name == name {
			return Stat(i + 1)
		}
	}
	panic("counters: no window statistic " + name)
}

// MinInterval is the shortest watch interval a CSV line may ask for; DCGM
// itself does not sample faster than this.
const MinInterval = 100 * time.Millisecond

// Field is one enabled line of a counters CSV.
type Field struct {
	// Name is the metric name, exactly as written in the CSV (legacy
	// lower-case names included).
	Name string
	// ID is the DCGM field ID the name resolves to. Exporter-side fields
	// (DCGM_EXP_*, gpuscope's own) have IDs from the catalog's private range.
	ID   uint16
	Type MetricType
	Help string
	// Interval is the watch interval; zero means "the default collect interval".
	Interval time.Duration
	// Stats are the window statistics asked for, in AllStats order.
	Stats []Stat
	// NoHistogram turns off the native histogram that a field with window
	// statistics gets (the word NoHistogramWord among them).
	NoHistogram bool
	// Line is the 1-based line number in the file, for messages.
	Line int
	// Export says how a name of another exporter's layout (nvidia_gpu_exporter's
	// nvidia_smi_* names) exports the field; the zero value exports the value
	// as read. Set from the compatibility table (nvgpuexporter.go), never from a column.
	Export Export
}

// Set is a parsed counters file.
type Set struct {
	// File is the path the set was read from, for messages.
	File   string
	Fields []Field
	// Warnings are problems that do not stop the file from loading, such as
	// a line that repeats an earlier field with the same type.
	Warnings []string
	// Layout is the label layout of the file's series: LayoutNvidiaGPUExporter when
	// any line names an nvidia_gpu_exporter metric, LayoutDCGMExporter
	// otherwise.
	Layout Layout
}

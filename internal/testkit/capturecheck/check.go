// Package capturecheck runs gpuscope's NVML source on the NVML of a real
// nvidia-smi capture (source/nvml/nvmlfake/smifake) and compares what it
// exports, field by field, with what the capture shows, in dcgm-exporter's
// units: a value the capture shows must be exported as that value, one it
// says is unsupported must be absent (never 0), MIG instances must carry
// the capture's profiles and memory, and the process list its processes.
package capturecheck

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake/smifake"
)

// Status is the outcome of one comparison.
type Status string

const (
	// Agree: the exported value is the capture's, or both have none.
	Agree Status = "ok"
	// Differ: a mismatch to fix.
	Differ Status = "MISMATCH"
	// NotShown: nvidia-smi prints nothing to compare the field with.
	NotShown Status = "not shown"
)

// Row is one field of one entity of one snapshot.
type Row struct {
	File, Phase, Entity, Field string
	Capture, Gpuscope          string
	Status                     Status
}

// Report is the comparison of one capture file.
type Report struct {
	File string
	Rows []Row
}

// Mismatches are the rows that differ.
func (r *Report) Mismatches() []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Status == Differ {
			out = append(out, row)
		}
	}
	return out
}

// CheckFile parses a capture and checks every snapshot in it.
func CheckFile(path string) (*Report, error) {
	c, err := smicapture.ParseFile(path)
	if err != nil {
		return nil, err
	}
	rep := &Report{File: path}
	for _, s := range c.Snapshots {
		rows, err := checkSnapshot(c, s)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", path, s.Phase, err)
		}
		for i := range rows {
			rows[i].File, rows[i].Phase = filepath.Base(path), s.Phase
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	return rep, nil
}

// processWait bounds the wait for the process list of a snapshot, which
// the fake NVML answers at once.
const processWait = 10 * time.Second

// servedFields are the GPU-level fields the NVML source reads, and those
// a capture shows.
func servedFields() []counters.Field {
	sup := nvml.Support()
	var out []counters.Field
	seen := map[uint16]bool{}
	for _, e := range fieldid.Current() {
		if ok, _ := sup.Reads(e.ID); ok && !seen[e.ID] && e.ID != fieldid.XIDErrors && e.ID != fieldid.ExpP2PStatus {
			seen[e.ID] = true
			out = append(out, source.FieldFor(nil, e.ID))
		}
	}
	// And what the capture shows that the source does not read: the
	// capture's value is missing from the export.
	for id := range expectations {
		if !seen[id] {
			seen[id] = true
			out = append(out, source.FieldFor(nil, id))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func checkSnapshot(c *smicapture.Capture, s *smicapture.Snapshot) ([]Row, error) {
	fake, err := smifake.New(c, s)
	if err != nil {
		return nil, err
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	src, err := nvml.New(nvml.Config{Lib: fake, Logger: logrus.NewEntry(log), EventWait: 10 * time.Millisecond})
	if err != nil {
		return nil, fmt.Errorf("NVML source on the capture: %w", err)
	}
	defer src.Close()
	fields := servedFields()
	if err := src.Watch([]source.Group{{Fields: fields}}); err != nil {
		return nil, err
	}
	sink := newSink()
	// Twice: rates and GPM need a baseline.
	for i := 0; i < 2; i++ {
		if err := src.Collect(context.Background(), 0, sink); err != nil {
			return nil, fmt.Errorf("collect: %w", err)
		}
	}
	// Collect lists processes in the background, at most every process
	// interval: the list is asked for here, so that it is the capture's.
	wait, cancel := context.WithTimeout(context.Background(), processWait)
	defer cancel()
	if err := src.RefreshProcesses(wait); err != nil {
		return nil, err
	}
	var rows []Row
	ents := src.Entities()
	for i, g := range s.GPUs {
		var gpu *source.Entity
		var instances []*source.Entity
		for _, e := range ents {
			if e.UUID != g.Field("uuid").Text() {
				continue
			}
			switch e.Kind {
			case source.GPU:
				gpu = e
			case source.GPUInstance:
				instances = append(instances, e)
			}
		}
		if gpu == nil {
			return nil, fmt.Errorf("GPU %s: the NVML source did not find it", g.BusID)
		}
		x := ctx{c: c, s: s, i: i, g: g}
		name := "gpu" + strconv.Itoa(i)
		for _, f := range fields {
			exp, ok := expectations[f.ID]
			w := notShown()
			if ok {
				w = exp(x)
			}
			rows = append(rows, compare(name, f.Name, w, sink.get(gpu, f.ID)))
		}
		rows = append(rows, checkMIG(name, g, instances, sink)...)
		rows = append(rows, checkProcesses(name, g, src.Processes())...)
	}
	return rows, nil
}

// got is what the source exported for one (entity, field).
type got struct {
	num    float64
	text   string
	has    bool
	isText bool
	fail   string
}

func (g got) String() string {
	switch {
	case g.has && g.isText:
		return g.text
	case g.has:
		return strconv.FormatFloat(g.num, 'g', -1, 64)
	case g.fail != "":
		return "failed: " + g.fail
	}
	return "absent"
}

func compare(entity, field string, w want, g got) Row {
	row := Row{Entity: entity, Field: field, Capture: w.raw, Gpuscope: g.String(), Status: Differ}
	switch {
	case !w.shown:
		row.Status = NotShown
	case !w.supported:
		if !g.has {
			row.Status = Agree
		}
	case !g.has:
	case w.isText:
		if g.text == w.text {
			row.Status = Agree
		}
	case close(g.num, w.num):
		row.Status = Agree
	}
	return row
}

// close allows for the rounding of a value printed with two decimals.
func close(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// sink keeps the last of everything the source hands over.
type sink struct {
	mu     sync.Mutex
	values map[string]got
}

func newSink() *sink { return &sink{values: map[string]got{}} }

func key(e *source.Entity, f uint16) string { return e.Key() + "|" + strconv.Itoa(int(f)) }

func (s *sink) get(e *source.Entity, f uint16) got {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[key(e, f)]
}

func (s *sink) Value(e *source.Entity, f uint16, _ int64, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[key(e, f)] = got{num: v, has: true}
}

func (s *sink) Text(e *source.Entity, f uint16, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[key(e, f)] = got{text: v, has: true, isText: true}
}

func (s *sink) Unsupported(*source.Entity, uint16, string) {}

func (s *sink) Fail(e *source.Entity, f uint16, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(e, f)
	if !s.values[k].has {
		s.values[k] = got{fail: err.Error()}
	}
}

func (s *sink) XID(*source.Entity, uint64, int64)                   {}
func (s *sink) Health(*source.Entity, int64, []source.HealthResult) {}
func (s *sink) P2P(*source.Entity, int64, []source.P2PLink)         {}

// Package capture records the raw samples of a running gpuscope for a
// while and writes them as a Chrome trace (for Perfetto and chrome://tracing,
// beside a PyTorch profiler trace), as charts (SVG or PNG), or as CSV.
package capture

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// MaxSamples bounds one capture: 8 GPUs x 16 fields at 100 ms for over an
// hour, and about 160 MiB of memory.
const MaxSamples = 10_000_000

// Series is the samples of one field on one entity, oldest first.
type Series struct {
	Field string
	T     []int64
	V     []float64
}

// Entity is one GPU, MIG instance or link of the capture.
type Entity struct {
	Key    string
	Kind   string
	GPU    int
	Labels map[string]string
	Series []*Series
}

// Capture is what was recorded.
type Capture struct {
	Hostname   string
	Start, End time.Time
	Fields     []sampleapi.Field
	Entities   []*Entity
	n          int
	byKey      map[string]*Entity
}

// New returns an empty capture.
func New() *Capture { return &Capture{byKey: map[string]*Entity{}} }

// Len is the number of samples held.
func (c *Capture) Len() int { return c.n }

// ErrTooLarge is returned when a capture would exceed MaxSamples.
var ErrTooLarge = fmt.Errorf("capture holds more than %d samples; record for less time, or fewer fields or GPUs", MaxSamples)

// Add merges one answer of the API into the capture. Samples at or before
// the last one kept of a series are skipped, so overlapping answers add
// each sample once.
func (c *Capture) Add(r *sampleapi.Result) error {
	if c.byKey == nil {
		c.byKey = map[string]*Entity{}
	}
	if r.Hostname != "" {
		c.Hostname = r.Hostname
	}
	for _, f := range r.Fields {
		if _, ok := c.field(f.Name); !ok {
			c.Fields = append(c.Fields, f)
		}
	}
	for _, re := range r.Entities {
		e := c.byKey[re.Key]
		if e == nil {
			e = &Entity{Key: re.Key, Kind: re.Kind, GPU: re.GPU}
			c.byKey[re.Key] = e
			c.Entities = append(c.Entities, e)
		}
		e.Labels = re.Labels
		for _, rs := range re.Series {
			s := e.series(rs.Field)
			for i, ts := range rs.T {
				if n := len(s.T); n > 0 && ts <= s.T[n-1] {
					continue
				}
				if c.n >= MaxSamples {
					return ErrTooLarge
				}
				s.T = append(s.T, ts)
				s.V = append(s.V, rs.V[i])
				c.n++
			}
		}
	}
	return nil
}

func (c *Capture) field(name string) (sampleapi.Field, bool) {
	for _, f := range c.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return sampleapi.Field{}, false
}

func (e *Entity) series(field string) *Series {
	for _, s := range e.Series {
		if s.Field == field {
			return s
		}
	}
	s := &Series{Field: field}
	e.Series = append(e.Series, s)
	return s
}

// sorted returns the entities by GPU, then kind and key, so every output
// lists them in the same order.
func (c *Capture) sorted() []*Entity {
	out := append([]*Entity(nil), c.Entities...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		if (out[i].Kind == "gpu") != (out[j].Kind == "gpu") {
			return out[i].Kind == "gpu"
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Bounds returns the first and last sample time, and false when there is
// no sample.
func (c *Capture) Bounds() (first, last int64, ok bool) {
	for _, e := range c.Entities {
		for _, s := range e.Series {
			if len(s.T) == 0 {
				continue
			}
			if !ok || s.T[0] < first {
				first = s.T[0]
			}
			if !ok || s.T[len(s.T)-1] > last {
				last = s.T[len(s.T)-1]
			}
			ok = true
		}
	}
	return first, last, ok
}

// Record reads the stream for d, or, when d is 0, what the rings hold now
// (the last --window of the server).
func Record(ctx context.Context, c *sampleapi.Client, q sampleapi.Query, d time.Duration) (*Capture, error) {
	out := New()
	out.Start = time.Now()
	if d <= 0 {
		r, err := c.Fetch(ctx, q)
		if err != nil {
			return nil, err
		}
		out.End = time.Now()
		return out, out.Add(r)
	}
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := c.Stream(sctx, q, func(r *sampleapi.Result) error { return out.Add(r) })
	out.End = time.Now()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = nil
	}
	return out, err
}

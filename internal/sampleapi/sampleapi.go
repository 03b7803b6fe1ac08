// Package sampleapi is the wire format of gpuscope's raw-sample API
// (/api/v1/samples and the /api/v1/stream events): the query an HTTP request
// carries, the answer the engine builds from its rings, and their JSON. The
// server, `gpuscope top` and `gpuscope capture` share it, so the three cannot
// drift apart.
package sampleapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// MaxFields bounds the fields of one request, so that one call cannot ask
// the engine to copy every ring it holds.
const MaxFields = 16

// MaxGPUs bounds the gpu parameters of one request.
const MaxGPUs = 1024

// Query selects samples: fields by name, GPUs by index (empty: all), and
// the samples newer than Since (Unix nanoseconds; 0: all the rings hold).
type Query struct {
	Fields []string
	GPUs   []int
	Since  int64
	// After, when set, overrides Since per series, keyed by SeriesKey: a
	// stream keeps the last timestamp it sent of every series.
	After map[string]int64
	// MaxSamples, when above 0, bounds the samples of the answer: the
	// source stops copying past it and answers a *TooLargeError. The server
	// sets it from its byte bound; it is not a URL parameter.
	MaxSamples int
}

// MinSampleBytes is the fewest bytes one sample takes in the JSON answer: a
// nanosecond timestamp of 19 digits and a one-digit value, each with its
// comma. An answer of more than maxBytes/MinSampleBytes samples cannot fit
// in maxBytes.
const MinSampleBytes = 22

// TooLargeError is an answer that would hold more samples than the query's
// MaxSamples.
type TooLargeError struct{ MaxSamples int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the answer holds more than %d samples", e.MaxSamples)
}

// SeriesKey names one series of an answer: the entity's key and the field.
func SeriesKey(entityKey, field string) string { return entityKey + "\x00" + field }

// WantsGPU says whether the query selects the GPU with index gpu.
func (q *Query) WantsGPU(gpu int) bool {
	if len(q.GPUs) == 0 {
		return true
	}
	for _, g := range q.GPUs {
		if g == gpu {
			return true
		}
	}
	return false
}

// ParseQuery reads field, gpu and since from URL parameters. field and gpu
// may repeat or hold comma-separated lists. Errors name the parameter.
func ParseQuery(v url.Values) (Query, error) {
	var q Query
	seen := map[string]bool{}
	for _, raw := range v["field"] {
		for _, f := range strings.Split(raw, ",") {
			f = strings.TrimSpace(f)
			if f == "" || seen[f] {
				continue
			}
			seen[f] = true
			q.Fields = append(q.Fields, f)
		}
	}
	if len(q.Fields) == 0 {
		return q, errors.New("field: give at least one field name, e.g. field=DCGM_FI_PROF_SM_ACTIVE")
	}
	if len(q.Fields) > MaxFields {
		return q, fmt.Errorf("field: %d fields asked, at most %d per request", len(q.Fields), MaxFields)
	}
	gseen := map[int]bool{}
	for _, raw := range v["gpu"] {
		for _, g := range strings.Split(raw, ",") {
			// No blanks are trimmed: a "+" in a URL is a blank, and
			// gpu=+1 must not pass for gpu=1.
			if g == "" {
				continue
			}
			n64, err := parseIndex(g)
			n := int(n64)
			if err != nil || int64(n) != n64 {
				return q, fmt.Errorf("gpu %q: want a GPU index (0, 1, ...)", g)
			}
			if gseen[n] {
				continue
			}
			gseen[n] = true
			q.GPUs = append(q.GPUs, n)
			if len(q.GPUs) > MaxGPUs {
				return q, fmt.Errorf("gpu: at most %d GPUs per request", MaxGPUs)
			}
		}
	}
	sort.Ints(q.GPUs)
	if n := len(v["since"]); n > 1 {
		return q, fmt.Errorf("since: given %d times; give it once", n)
	}
	if s := v.Get("since"); s != "" {
		n, err := parseIndex(s)
		if err != nil {
			return q, fmt.Errorf("since %q: want Unix time in nanoseconds, e.g. since=%d", s, int64(1700000000000000000))
		}
		q.Since = n
	}
	return q, nil
}

// parseIndex reads a number written one way only: decimal digits, no sign
// and no leading zero, so that "-0", "+1" and "01" do not pass for 0 and 1.
func parseIndex(s string) (int64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// Values encodes NaN and infinities as JSON null, which encoding/json
// refuses to write; a null decodes back to NaN.
type Values []float64

// MarshalJSON writes the values as a compact array.
func (vs Values) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(vs)*8)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads an array of numbers and nulls.
func (vs *Values) UnmarshalJSON(data []byte) error {
	var raw []*float64
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	out := make(Values, len(raw))
	for i, p := range raw {
		if p == nil {
			out[i] = math.NaN()
		} else {
			out[i] = *p
		}
	}
	*vs = out
	return nil
}

// Field describes one field of an answer.
type Field struct {
	Name string `json:"name"`
	// Unit is the catalog's unit ("ratio", "W", "C", "MiB", "bytes/s"),
	// empty when the catalog gives none.
	Unit string `json:"unit,omitempty"`
	// IntervalNS is the field's watch interval.
	IntervalNS int64  `json:"interval_ns"`
	Help       string `json:"help,omitempty"`
}

// Series is the samples of one field on one entity, oldest first.
type Series struct {
	Field string  `json:"field"`
	T     []int64 `json:"t"`
	V     Values  `json:"v"`
	// Missed is set when the ring has overwritten samples newer than the
	// query's cursor: the answer has a gap before its first sample.
	Missed bool `json:"missed,omitempty"`
}

// Entity is one GPU, MIG instance, link or switch and its series.
type Entity struct {
	Key  string `json:"key"`
	Kind string `json:"kind"`
	GPU  int    `json:"gpu"`
	// Labels are the entity's labels as /metrics shows them: identity,
	// label-type fields, and the enrichers' (pod, namespace, container, job).
	// In stream events they are left out while unchanged (StreamEncoder).
	Labels map[string]string `json:"labels,omitempty"`
	Series []Series          `json:"series"`
}

// Result is the answer of /api/v1/samples and the data of one stream event.
type Result struct {
	// Now is the server's clock when the answer was built (Unix ns).
	Now      int64  `json:"now"`
	Hostname string `json:"hostname,omitempty"`
	// In stream events they are left out while unchanged (StreamEncoder).
	Fields   []Field  `json:"fields,omitempty"`
	Entities []Entity `json:"entities"`
}

// Len is the number of samples in the result.
func (r *Result) Len() int {
	n := 0
	for _, e := range r.Entities {
		for _, s := range e.Series {
			n += len(s.T)
		}
	}
	return n
}

// Field returns the description of the named field, if the result has it.
func (r *Result) Field(name string) (Field, bool) {
	for _, f := range r.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Decode reads a Result from JSON.
func Decode(data []byte) (*Result, error) {
	var r Result
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding samples: %w", err)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("decoding samples: %w", err)
	}
	r.sanitize()
	return &r, nil
}

// check refuses what a client could not show without guessing: a series
// whose timestamps and values differ in number.
func (r *Result) check() error {
	for _, e := range r.Entities {
		for _, s := range e.Series {
			if len(s.T) != len(s.V) {
				return fmt.Errorf("entity %q field %q: %d timestamps and %d values", e.Key, s.Field, len(s.T), len(s.V))
			}
		}
	}
	return nil
}

// FieldError is a query's field that cannot be answered, with the reason a
// user can act on.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return "field " + e.Field + ": " + e.Reason }

package capture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// PIDBase offsets the trace's process IDs (one per GPU: PIDBase+index), so
// that a capture merged with a PyTorch profiler trace does not share a
// process with a host process.
const PIDBase = 1_000_000

// Meta is what the trace says about itself besides the samples.
type Meta struct {
	Version string
	Address string
}

// trackName names the counter track of a field on an entity: the field for
// the GPU itself, with the MIG instance or link appended for the others.
func trackName(e *Entity, field, unit string) string {
	name := field
	switch e.Kind {
	case "gpu":
	case "gpu_instance", "compute_instance":
		name += " GI " + e.Labels["GPU_I_ID"]
		if ci := e.Labels["GPU_CI_ID"]; ci != "" {
			name += " CI " + ci
		}
	default:
		name += " " + e.Kind + " " + strings.TrimPrefix(e.Key, e.Kind+"/")
		if l := e.Labels["nvlink"]; l != "" {
			name = field + " nvlink " + l
		}
	}
	if unit != "" {
		name += " (" + unit + ")"
	}
	return name
}

// processName names a GPU's process: index, pod when there is one, model.
func processName(e *Entity) string {
	name := "GPU " + strconv.Itoa(e.GPU)
	if p := e.Labels["pod"]; p != "" {
		name += " " + e.Labels["namespace"] + "/" + p
	}
	if m := e.Labels["modelName"]; m != "" {
		name += " (" + m + ")"
	}
	return name
}

// WriteTrace writes the capture as a Chrome trace event file (JSON object
// format): one process per GPU with its name, labels and sort order as
// metadata events, and one counter event ("ph":"C") per sample, its
// timestamp in microseconds since the Unix epoch, as PyTorch's profiler
// writes them. otherData holds the node, the fields and their units.
func WriteTrace(w io.Writer, c *Capture, meta Meta) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf []byte
	buf = append(buf, `{"displayTimeUnit":"ms","otherData":`...)
	fields := map[string]any{}
	for _, f := range c.Fields {
		fields[f.Name] = map[string]any{"unit": f.Unit, "interval_ms": float64(f.IntervalNS) / 1e6, "help": f.Help}
	}
	other, err := json.Marshal(map[string]any{
		"producer": "gpuscope capture", "version": meta.Version, "node": c.Hostname, "address": meta.Address,
		"start": c.Start.UTC().Format("2006-01-02T15:04:05.000Z07:00"), "end": c.End.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		"fields": fields, "samples": c.Len(),
	})
	if err != nil {
		return fmt.Errorf("encoding the trace metadata: %w", err)
	}
	buf = append(buf, other...)
	buf = append(buf, `,"traceEvents":[`...)
	first := true
	event := func(b []byte) {
		if !first {
			buf = append(buf, ",\n"...)
		}
		first = false
		buf = append(buf, b...)
	}
	seen := map[int]bool{}
	for _, e := range c.sorted() {
		pid := PIDBase + e.GPU
		if !seen[e.GPU] {
			seen[e.GPU] = true
			event(metaEvent(pid, "process_name", map[string]any{"name": processName(e)}))
			event(metaEvent(pid, "process_sort_index", map[string]any{"sort_index": e.GPU}))
			event(metaEvent(pid, "process_labels", map[string]any{"labels": processLabels(e, c.Hostname)}))
		}
		for _, s := range e.Series {
			f, _ := c.field(s.Field)
			name, err := json.Marshal(trackName(e, s.Field, f.Unit))
			if err != nil {
				return err
			}
			for i, ts := range s.T {
				v := s.V[i]
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				var b []byte
				b = append(b, `{"ph":"C","name":`...)
				b = append(b, name...)
				b = append(b, `,"pid":`...)
				b = strconv.AppendInt(b, int64(pid), 10)
				b = append(b, `,"tid":0,"ts":`...)
				b = appendMicros(b, ts)
				b = append(b, `,"args":{"value":`...)
				b = strconv.AppendFloat(b, v, 'g', -1, 64)
				b = append(b, "}}"...)
				event(b)
				if len(buf) > 32<<10 {
					if _, err := bw.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
		}
	}
	buf = append(buf, "]}\n"...)
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	return bw.Flush()
}

// appendMicros writes Unix nanoseconds as microseconds with three decimals,
// exact for any time this century; a time before 1970 gets a sign in
// front, so the number stays valid JSON.
func appendMicros(b []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = -u // exact for math.MinInt64 too, in uint64
	}
	b = strconv.AppendUint(b, u/1000, 10)
	frac := u % 1000
	b = append(b, '.')
	b = append(b, byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

func processLabels(e *Entity, host string) string {
	parts := []string{}
	if host != "" {
		parts = append(parts, "node="+host)
	}
	for _, k := range []string{"modelName", "UUID", "pod", "namespace", "container", "hpc_job"} {
		if v := e.Labels[k]; v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ", ")
}

func metaEvent(pid int, name string, args map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"ph": "M", "name": name, "pid": pid, "tid": 0, "args": args})
	return b
}

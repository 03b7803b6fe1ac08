package sampleapi

import "maps"

// Stream events say once what does not change from event to event. An
// entity's labels are sent in the first event that has the entity and
// again only when they change; the field descriptions (help, unit,
// interval) in the first event and when the fields change. An event whose
// entity has no labels, or that has no fields, means "as before".
// StreamEncoder is the server's side of that rule and StreamDecoder the
// client's: the client's callbacks always see whole Results.

// StreamEncoder leaves out of each stream event what the client already has.
type StreamEncoder struct {
	labels map[string]map[string]string
	fields []Field
}

// Compact removes from r, in place, the labels and fields sent before.
func (enc *StreamEncoder) Compact(r *Result) {
	// The map is rebuilt from each event, so it holds only the entities
	// the stream still has: an entity that comes back is sent whole.
	next := make(map[string]map[string]string, len(r.Entities))
	for i := range r.Entities {
		e := &r.Entities[i]
		next[e.Key] = e.Labels
		if prev, ok := enc.labels[e.Key]; ok && maps.Equal(prev, e.Labels) {
			e.Labels = nil
		}
	}
	enc.labels = next
	if fieldsEqual(enc.fields, r.Fields) {
		r.Fields = nil
	} else {
		enc.fields = r.Fields
	}
}

// StreamDecoder puts back into each stream event what earlier events said.
type StreamDecoder struct {
	labels map[string]map[string]string
	fields []Field
}

// Expand fills in, in place, the labels and fields r leaves out.
func (dec *StreamDecoder) Expand(r *Result) {
	// Rebuilt from each event, so a server that invents keys cannot grow it.
	next := make(map[string]map[string]string, len(r.Entities))
	for i := range r.Entities {
		e := &r.Entities[i]
		if e.Labels == nil {
			e.Labels = dec.labels[e.Key]
		}
		if e.Labels == nil {
			e.Labels = map[string]string{}
		}
		next[e.Key] = e.Labels
	}
	dec.labels = next
	if r.Fields == nil {
		r.Fields = dec.fields
	} else {
		dec.fields = r.Fields
	}
}

func fieldsEqual(a, b []Field) bool {
	if len(a) != len(b) || a == nil || b == nil {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

package sampleapi

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQueryRefusesAmbiguousGPUAndSince: a GPU index is written one way
// only (no sign, no leading zero), and since given twice is refused rather
// than the first silently winning.
func TestQueryRefusesAmbiguousGPUAndSince(t *testing.T) {
	tests := []struct {
		name, query, err string
	}{
		{"minus zero", "field=A&gpu=-0", `gpu "-0": want a GPU index`},
		{"plus sign", "field=A&gpu=%2B1", `gpu "+1": want a GPU index`},
		{"plus sign unescaped (a space in a URL)", "field=A&gpu=+1", `gpu " 1": want a GPU index`},
		{"leading zero", "field=A&gpu=01", `gpu "01": want a GPU index`},
		{"since twice", "field=A&since=1&since=2", "since: given 2 times"},
		{"since with a sign", "field=A&since=%2B5", `since "+5"`},
		{"zero is an index", "field=A&gpu=0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			_, err = ParseQuery(v)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
		})
	}
}

// TestDecodeRefusesMismatchedSeries: a series whose t and v differ in
// length (a broken or hostile server) is a decode error naming the series,
// not an index out of range later in top or capture.
func TestDecodeRefusesMismatchedSeries(t *testing.T) {
	tests := []struct {
		name, body, err string
	}{
		{"more times", `{"now":1,"fields":[],"entities":[{"key":"g0","series":[{"field":"F","t":[1,2,3],"v":[1]}]}]}`, `entity "g0" field "F": 3 timestamps and 1 values`},
		{"more values", `{"now":1,"fields":[],"entities":[{"key":"g0","series":[{"field":"F","t":[],"v":[1]}]}]}`, "0 timestamps and 1 values"},
		{"matching", `{"now":1,"fields":[],"entities":[{"key":"g0","series":[{"field":"F","t":[1],"v":[1]}]}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.body))
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
		})
	}
}

// TestStreamEncoderSendsLabelsOnChange: labels go out with an entity's
// first event and again when they change; fields once and on change.
func TestStreamEncoderSendsLabelsOnChange(t *testing.T) {
	event := func(pod string) *Result {
		return &Result{Fields: []Field{{Name: "F", Help: "h"}}, Entities: []Entity{
			{Key: "g0", Labels: map[string]string{"gpu": "0", "pod": pod}},
			{Key: "g1", Labels: map[string]string{"gpu": "1"}},
		}}
	}
	var enc StreamEncoder
	var dec StreamDecoder
	steps := []struct {
		pod        string
		sentLabels []bool
		sentFields bool
	}{
		{"a", []bool{true, true}, true},
		{"a", []bool{false, false}, false},
		{"b", []bool{true, false}, false},
		{"b", []bool{false, false}, false},
	}
	for i, st := range steps {
		r := event(st.pod)
		enc.Compact(r)
		for j, e := range r.Entities {
			assert.Equal(t, st.sentLabels[j], e.Labels != nil, "step %d entity %d", i, j)
		}
		assert.Equal(t, st.sentFields, r.Fields != nil, "step %d", i)
		dec.Expand(r)
		assert.Equal(t, st.pod, r.Entities[0].Labels["pod"], "step %d", i)
		assert.Equal(t, "h", r.Fields[0].Help, "step %d", i)
	}
}

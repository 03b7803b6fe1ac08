package sampleapi

import (
	"encoding/json"
	"math"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseQuery(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  Query
		err   string
	}{
		{"one field", "field=A", Query{Fields: []string{"A"}}, ""},
		{"repeated and comma lists, deduplicated", "field=A,B&field=B&field=C", Query{Fields: []string{"A", "B", "C"}}, ""},
		{"gpus sorted", "field=A&gpu=3,1&gpu=1", Query{Fields: []string{"A"}, GPUs: []int{1, 3}}, ""},
		{"since", "field=A&since=1700000000000000000", Query{Fields: []string{"A"}, Since: 1700000000000000000}, ""},
		{"no field", "gpu=1", Query{}, "field: give at least one field name"},
		{"empty field", "field=,", Query{}, "field: give at least one field name"},
		{"bad gpu", "field=A&gpu=one", Query{}, `gpu "one": want a GPU index`},
		{"negative gpu", "field=A&gpu=-2", Query{}, `gpu "-2"`},
		{"bad since", "field=A&since=1.5", Query{}, `since "1.5": want Unix time in nanoseconds`},
		{"negative since", "field=A&since=-1", Query{}, `since "-1"`},
		{"too many fields", "field=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", Query{}, "17 fields asked, at most 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			q, err := ParseQuery(v)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, q)
			// A query survives the trip through its URL parameters.
			back, err := ParseQuery(q.Values())
			require.NoError(t, err)
			assert.Equal(t, q, back)
		})
	}
}

func TestValuesWriteNaNAsNull(t *testing.T) {
	b, err := json.Marshal(Series{Field: "F", T: []int64{1, 2, 3, 4}, V: Values{0.5, math.NaN(), math.Inf(1), 1e-7}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"field":"F","t":[1,2,3,4],"v":[0.5,null,null,1e-7]}`, string(b))
	var back Series
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, 0.5, back.V[0])
	assert.True(t, math.IsNaN(back.V[1]))
	assert.True(t, math.IsNaN(back.V[2]))
	assert.Equal(t, 1e-7, back.V[3])
}

func TestBaseURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"localhost:9400", "http://localhost:9400", ""},
		{"http://10.0.0.1:9400/", "http://10.0.0.1:9400", ""},
		{"https://node:9400", "https://node:9400", ""},
		{"", "", "no address"},
		{"ftp://x", "", "use http:// or https://"},
		{"http://", "", "no host"},
	}
	for _, tt := range tests {
		got, err := BaseURL(tt.in)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got)
	}
}

package nativehist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// TestAppendProtoMatchesMarshal: the histogram encoded straight is the
// bytes protobuf-go marshals of the message Write fills, and decodes to
// it, for empty histograms, every layout gpuscope uses, both signs, gaps of
// every width between buckets in use, and histograms reduced to a lower
// schema by MaxBuckets.
func TestAppendProtoMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	layouts := []Layout{{Schema: 3, ZeroThreshold: 1e-3}, {Schema: 3, ZeroThreshold: 0.1}, {Schema: 4}, {Schema: 2}, {Schema: 8}, {Schema: -4}}
	tests := []struct {
		name string
		vals func() []float64
	}{
		{"empty", func() []float64 { return nil }},
		{"zeros only", func() []float64 { return []float64{0, 0, 1e-9} }},
		{"one value", func() []float64 { return []float64{0.5} }},
		{"ratios", func() []float64 { return draw(300, func() float64 { return rng.Float64() }) }},
		{"both signs", func() []float64 { return draw(300, func() float64 { return rng.NormFloat64() * 100 }) }},
		{"sparse decades", func() []float64 {
			return draw(200, func() float64 { return math.Pow(10, float64(rng.IntN(12)-6)) * (1 + rng.Float64()/100) })
		}},
		{"gaps of one, two and three buckets", func() []float64 {
			// At schema 0 bucket k holds (2^(k-1), 2^k]; other schemas
			// spread the same values over wider gaps.
			return []float64{1, 4, 32, 256, 256, 4096, 1 << 20}
		}},
		{"past MaxBuckets", func() []float64 {
			return draw(2000, func() float64 { return math.Exp(rng.Float64()*200 - 100) })
		}},
	}
	for _, tt := range tests {
		for _, l := range layouts {
			t.Run(fmt.Sprintf("%s/schema %d zero %g", tt.name, l.Schema, l.ZeroThreshold), func(t *testing.T) {
				h := New(l)
				for _, v := range tt.vals() {
					h.Observe(v)
				}
				want, err := proto.MarshalOptions{Deterministic: true}.Marshal(written(h))
				require.NoError(t, err)
				got := h.AppendProto([]byte("prefix"))
				require.Equal(t, "prefix", string(got[:6]), "appends")
				require.Equal(t, want, got[6:], "schema %d", l.Schema)
				var back dto.Histogram
				require.NoError(t, proto.Unmarshal(got[6:], &back))
				require.True(t, proto.Equal(written(h), &back))
			})
		}
	}
}

func draw(n int, gen func() float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = gen()
	}
	return out
}

package fieldspage

import (
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// sparkSpan is how far back a sparkline reaches: 100 samples at 100 ms.
const sparkSpan = 10 * time.Second

// sparkWidth and sparkHeight are the SVG's size in pixels.
const sparkWidth, sparkHeight = 120, 24

// sparklines draws the last seconds of the running file's profiling fields
// on the first GPU, from the rings: asking gives a field without window
// statistics a ring, so its line fills from the first visit on.
func (h *Handler) sparklines(running []counters.Field) map[string]template.HTML {
	out := map[string]template.HTML{}
	if h.opts.Samples == nil {
		return out
	}
	var names []string
	seen := map[string]bool{}
	for _, f := range canonical(running) {
		if strings.HasPrefix(f.Name, "DCGM_FI_PROF_") && !seen[f.Name] {
			seen[f.Name] = true
			names = append(names, f.Name)
		}
	}
	since := time.Now().Add(-sparkSpan).UnixNano()
	for len(names) > 0 {
		n := min(len(names), sampleapi.MaxFields)
		res, err := h.opts.Samples.Samples(sampleapi.Query{Fields: names[:n], GPUs: []int{0}, Since: since})
		names = names[n:]
		if err != nil {
			h.opts.Log.WithError(err).Debug("Reading samples for the sparklines failed")
			continue
		}
		for _, e := range res.Entities {
			for _, s := range e.Series {
				if _, done := out[s.Field]; !done && len(s.V) > 1 {
					out[s.Field] = sparkline(s.V)
				}
			}
		}
	}
	return out
}

// sparkline draws values as an inline SVG polyline scaled to their range.
func sparkline(vs []float64) template.HTML {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return ""
	}
	if hi == lo {
		hi = lo + 1
	}
	var pts strings.Builder
	for i, v := range vs {
		if math.IsNaN(v) {
			continue
		}
		x := float64(i) * sparkWidth / float64(len(vs)-1)
		y := sparkHeight - 1 - (v-lo)/(hi-lo)*(sparkHeight-2)
		pts.WriteString(strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64) + " ")
	}
	w, hgt := strconv.Itoa(sparkWidth), strconv.Itoa(sparkHeight)
	// Only numbers we formatted go into the markup.
	return template.HTML(`<svg class="spark" width="` + w + `" height="` + hgt + `" viewBox="0 0 ` + w + ` ` + hgt +
		`" role="img" aria-label="last 10 s on GPU 0"><polyline fill="none" stroke="currentColor" stroke-width="1.2" points="` +
		strings.TrimSpace(pts.String()) + `"/></svg>`)
}

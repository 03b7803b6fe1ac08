package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// HistogramSource returns the native histogram families, which only the
// protobuf exposition can carry; the engine implements it.
type HistogramSource interface {
	NativeHistograms() []*dto.MetricFamily
}

var protoFormat = expfmt.NewFormat(expfmt.TypeProtoDelim)

// wantsProto says whether the scraper negotiates the delimited protobuf
// exposition, as Prometheus does with native histograms on; client_golang's
// negotiation decides, so the answer is the one its handler would give.
func wantsProto(r *http.Request) bool {
	return expfmt.Negotiate(r.Header).FormatType() == expfmt.TypeProtoDelim
}

// protobuf returns the body in the delimited protobuf exposition with the
// native histograms added, made once by the first scrape that asks. The
// families come from the text body itself, so both expositions show the
// same series; hists is asked after the render, a few microseconds later.
func (b *body) protobuf(hists HistogramSource) ([]byte, error) {
	b.protoOnce.Do(func() {
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(bytes.NewReader(b.buf))
		if err != nil {
			b.protoErr = fmt.Errorf("reading the rendered exposition back: %w", err)
			return
		}
		names := make([]string, 0, len(mfs))
		for name := range mfs {
			names = append(names, name)
		}
		sort.Strings(names)
		var out bytes.Buffer
		out.Grow(len(b.buf) / 2)
		enc := expfmt.NewEncoder(&out, protoFormat)
		for _, name := range names {
			if err := enc.Encode(mfs[name]); err != nil {
				b.protoErr = fmt.Errorf("encoding family %s: %w", name, err)
				return
			}
		}
		for _, mf := range hists.NativeHistograms() {
			if err := enc.Encode(mf); err != nil {
				b.protoErr = fmt.Errorf("encoding family %s: %w", mf.GetName(), err)
				return
			}
		}
		b.proto = out.Bytes()
	})
	return b.proto, b.protoErr
}

// protoGzipped is protobuf compressed, made once.
func (b *body) protoGzipped(hists HistogramSource) ([]byte, error) {
	p, err := b.protobuf(hists)
	if err != nil {
		return nil, err
	}
	b.protoGzOnce.Do(func() { b.protoGz = gzipBytes(p) })
	return b.protoGz, nil
}

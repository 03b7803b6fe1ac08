package server

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/sirupsen/logrus"
)

// FamilySource appends the engine's series, native histograms included,
// in the delimited protobuf exposition, built from its store; the engine
// implements it.
type FamilySource interface {
	AppendProto(buf []byte) ([]byte, error)
}

var protoFormat = expfmt.NewFormat(expfmt.TypeProtoDelim)

// wantsProto says whether the scraper negotiates the delimited protobuf
// exposition, as Prometheus does with native histograms on; client_golang's
// negotiation decides, so the answer is the one its handler would give.
func wantsProto(r *http.Request) bool {
	return expfmt.Negotiate(r.Header).FormatType() == expfmt.TypeProtoDelim
}

// protobuf returns the delimited protobuf exposition, made once by the
// first scrape of the body that asks: the engine's families, built from its
// store rather than read back from the text, then gpuscope's own, gathered
// again.
func (b *body) protobuf(src FamilySource, own prometheus.Gatherer, log *logrus.Entry) ([]byte, error) {
	b.protoOnce.Do(func() {
		out, err := src.AppendProto(make([]byte, 0, len(b.buf)/2))
		if err != nil {
			b.protoErr = err
			return
		}
		w := appendWriter{buf: out}
		if own != nil {
			mfs, err := own.Gather()
			if err != nil {
				log.WithError(err).Warn("Gathering gpuscope's own metrics failed; serving what was gathered")
			}
			enc := expfmt.NewEncoder(&w, protoFormat)
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					b.protoErr = fmt.Errorf("encoding family %s: %w", mf.GetName(), err)
					return
				}
			}
		}
		b.proto = w.buf
	})
	return b.proto, b.protoErr
}

// protoGzipped is protobuf compressed, made once.
func (b *body) protoGzipped(src FamilySource, own prometheus.Gatherer, log *logrus.Entry) ([]byte, error) {
	p, err := b.protobuf(src, own, log)
	if err != nil {
		return nil, err
	}
	b.protoGzOnce.Do(func() { b.protoGz = gzipBytes(p) })
	return b.protoGz, nil
}

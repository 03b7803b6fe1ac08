package engine

import (
	"encoding/binary"
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Field numbers of client_model's metrics.proto.
const (
	fieldFamilyName   = 1
	fieldFamilyHelp   = 2
	fieldFamilyType   = 3
	fieldFamilyMetric = 4
	fieldMetricLabel  = 1
	fieldMetricGauge  = 2
	fieldMetricCount  = 3
	fieldMetricUntyp  = 5
	fieldLabelName    = 1
	fieldLabelValue   = 2
	fieldValue        = 1
)

// AppendProto appends the families of Families to buf in the delimited
// protobuf exposition, as expfmt's encoder writes them. The gauges,
// counters and untyped series are encoded here, with their label sets
// encoded once and kept; the histograms go through the protobuf library.
func (e *Engine) AppendProto(buf []byte) ([]byte, error) {
	e.protoLabels.lock()
	defer e.protoLabels.unlock()
	var encs [][]byte
	for _, mf := range e.families() {
		if !plainFamily(mf) {
			var err error
			buf = protowire.AppendVarint(buf, uint64(proto.Size(mf)))
			if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf, mf); err != nil {
				return buf, fmt.Errorf("encoding family %s: %w", mf.GetName(), err)
			}
			continue
		}
		encs = encs[:0]
		size := protowire.SizeTag(fieldFamilyName) + protowire.SizeBytes(len(mf.GetName())) +
			protowire.SizeTag(fieldFamilyHelp) + protowire.SizeBytes(len(mf.GetHelp())) +
			protowire.SizeTag(fieldFamilyType) + protowire.SizeVarint(uint64(mf.GetType()))
		for _, m := range mf.Metric {
			enc := e.protoLabels.encoded(m.Label)
			if enc == nil {
				for _, p := range m.Label {
					enc = appendLabelPair(enc, p)
				}
			}
			encs = append(encs, enc)
			size += protowire.SizeTag(fieldFamilyMetric) + protowire.SizeBytes(len(enc)+valueSize)
		}
		buf = protowire.AppendVarint(buf, uint64(size))
		buf = appendString(buf, fieldFamilyName, mf.GetName())
		buf = appendString(buf, fieldFamilyHelp, mf.GetHelp())
		buf = protowire.AppendTag(buf, fieldFamilyType, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(mf.GetType()))
		for i, m := range mf.Metric {
			buf = protowire.AppendTag(buf, fieldFamilyMetric, protowire.BytesType)
			buf = protowire.AppendVarint(buf, uint64(len(encs[i])+valueSize))
			buf = append(buf, encs[i]...)
			buf = appendValue(buf, m)
		}
	}
	return buf, nil
}

// valueSize is the encoded size of a Metric's gauge, counter or untyped
// field: tag, length, and a double with its tag.
const valueSize = 1 + 1 + 1 + 8

func appendValue(buf []byte, m *dto.Metric) []byte {
	field, v := protowire.Number(fieldMetricUntyp), m.GetUntyped().GetValue()
	switch {
	case m.Gauge != nil:
		field, v = fieldMetricGauge, m.Gauge.GetValue()
	case m.Counter != nil:
		field, v = fieldMetricCount, m.Counter.GetValue()
	}
	buf = protowire.AppendTag(buf, field, protowire.BytesType)
	buf = append(buf, 9)
	buf = protowire.AppendTag(buf, fieldValue, protowire.Fixed64Type)
	return binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
}

// plainFamily says whether every series of mf is a gauge, counter or
// untyped value with labels only, which AppendProto encodes itself.
func plainFamily(mf *dto.MetricFamily) bool {
	if mf.Name == nil || mf.Help == nil || mf.Type == nil || mf.Unit != nil {
		return false
	}
	for _, m := range mf.Metric {
		n := 0
		if m.Gauge != nil && m.Gauge.Value != nil {
			n++
		}
		if m.Counter != nil && m.Counter.Value != nil && m.Counter.Exemplar == nil && m.Counter.CreatedTimestamp == nil {
			n++
		}
		if m.Untyped != nil && m.Untyped.Value != nil {
			n++
		}
		if n != 1 || m.Summary != nil || m.Histogram != nil || m.TimestampMs != nil {
			return false
		}
		for _, p := range m.Label {
			if p.Name == nil || p.Value == nil {
				return false
			}
		}
	}
	return true
}

// appendLabelPair appends p as a Metric.label field.
func appendLabelPair(buf []byte, p *dto.LabelPair) []byte {
	n, v := p.GetName(), p.GetValue()
	size := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(n)) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(v))
	buf = protowire.AppendTag(buf, fieldMetricLabel, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(size))
	buf = appendString(buf, fieldLabelName, n)
	return appendString(buf, fieldLabelValue, v)
}

func appendString(buf []byte, field protowire.Number, s string) []byte {
	buf = protowire.AppendTag(buf, field, protowire.BytesType)
	return protowire.AppendString(buf, s)
}

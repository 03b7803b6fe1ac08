package server

import (
	"io"
	"net/http"

	"github.com/prometheus/common/expfmt"
)

// Renderer takes consistent snapshots of the GPU series; the engine
// implements it.
type Renderer interface {
	// Snapshot returns the series as they are now, reusing the memory of
	// prev (a snapshot it returned before, no longer read, or nil); proto
	// adds what only the protobuf exposition carries, the native
	// histograms.
	Snapshot(prev Exposition, proto bool) Exposition
	Ready() (bool, string)
}

// Exposition is one snapshot of the series, written whole in either
// format, in bounded pieces, as often as asked and by concurrent writers.
// An error is the writer's.
type Exposition interface {
	WriteText(w io.Writer) error
	WriteProto(w io.Writer) error
}

// Snapshots makes a Renderer of a source of snapshots of its own type,
// such as the engine's Snapshot and Ready.
func Snapshots[S Exposition](snapshot func(prev S, proto bool) S, ready func() (bool, string)) Renderer {
	return snapshotter[S]{snapshot: snapshot, ready: ready}
}

type snapshotter[S Exposition] struct {
	snapshot func(S, bool) S
	ready    func() (bool, string)
}

func (s snapshotter[S]) Snapshot(prev Exposition, proto bool) Exposition {
	p, _ := prev.(S)
	return s.snapshot(p, proto)
}

func (s snapshotter[S]) Ready() (bool, string) { return s.ready() }

var (
	protoFormat = expfmt.NewFormat(expfmt.TypeProtoDelim)
	textFormat  = expfmt.NewFormat(expfmt.TypeTextPlain)
	// The formats client_golang's handler offers, in its order of preference.
	acceptedFormats = expfmt.DefaultAcceptedFormats()
)

// wantsProto says whether the scraper negotiates the delimited protobuf
// exposition, as Prometheus does with native histograms on; client_golang's
// negotiation decides, so the answer is the one its handler would give.
func wantsProto(r *http.Request) bool {
	return expfmt.NegotiateAccept(r.Header, acceptedFormats...).FormatType() == expfmt.TypeProtoDelim
}

package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/sirupsen/logrus"
)

// DefaultSampleOwnEvery is how often the families of Options.Sampled are
// gathered when SampleOwnEvery is 0.
const DefaultSampleOwnEvery = 5 * time.Second

// sampledFamilies keeps gpuscope's families that are gathered in the
// background rather than at each scrape (the Go runtime's and the
// process's), encoded in both formats: gathering them costs several times
// the render of a node's series, mostly in the kernel's /proc files, and no
// scraper reads them at a finer resolution than a few seconds. A scrape
// appends the latest encoding.
type sampledFamilies struct {
	g     prometheus.Gatherer
	every time.Duration
	log   *logrus.Entry
	// running says the background loop keeps cur fresh; without it (a
	// server used as a handler only) a scrape gathers when cur is older
	// than every.
	running atomic.Bool
	mu      sync.Mutex // serialises gathering
	cur     atomic.Pointer[ownEncoding]
}

// ownEncoding is one gathering, encoded.
type ownEncoding struct {
	text, proto []byte
	at          time.Time
}

// get returns the latest encoding in the given format.
func (s *sampledFamilies) get(proto bool) []byte {
	if s == nil || s.g == nil {
		return nil
	}
	e := s.cur.Load()
	if e == nil || (!s.running.Load() && time.Since(e.at) >= s.every) {
		e = s.refresh()
	}
	if proto {
		return e.proto
	}
	return e.text
}

// refresh gathers and encodes the families once.
func (s *sampledFamilies) refresh() *ownEncoding {
	s.mu.Lock()
	defer s.mu.Unlock()
	mfs, err := s.g.Gather()
	if err != nil {
		s.log.WithError(err).Warn("Gathering gpuscope's own metrics failed; serving what was gathered")
	}
	e := &ownEncoding{text: encodeFamilies(mfs, textFormat, s.log), proto: encodeFamilies(mfs, protoFormat, s.log), at: time.Now()}
	s.cur.Store(e)
	return e
}

// run keeps the encoding fresh until ctx ends.
func (s *sampledFamilies) run(ctx context.Context) {
	if s == nil || s.g == nil {
		return
	}
	s.running.Store(true)
	defer s.running.Store(false)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.refresh()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// encodeFamilies encodes mfs in format; a family that does not encode is
// left out and logged.
func encodeFamilies(mfs []*dto.MetricFamily, format expfmt.Format, log *logrus.Entry) []byte {
	w := appendWriter{}
	enc := expfmt.NewEncoder(&w, format)
	for _, mf := range mfs {
		mark := len(w.buf)
		if err := enc.Encode(mf); err != nil {
			w.buf = w.buf[:mark]
			log.WithError(err).WithField("family", mf.GetName()).Warn("Encoding a metric family failed")
		}
	}
	return w.buf
}

// renderAll takes a snapshot of the GPU series into b and gathers
// gpuscope's own families, encoded in b's format: those of Gatherer now,
// those of Sampled as last sampled.
func (s *Server) renderAll(b *body, prev Exposition) {
	b.snap = s.opts.Engine.Snapshot(prev, b.proto)
	format := textFormat
	if b.proto {
		format = protoFormat
	}
	if s.opts.Gatherer != nil {
		mfs, err := s.opts.Gatherer.Gather()
		if err != nil {
			s.opts.Log.WithError(err).Warn("Gathering gpuscope's own metrics failed; serving what was gathered")
		}
		b.own = encodeFamilies(mfs, format, s.opts.Log)
	}
	b.sampled = s.sampled.get(b.proto)
}

type appendWriter struct{ buf []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.buf = append(a.buf, p...)
	return len(p), nil
}

package engine

import (
	"io"
	"strings"
	"sync"
	"unsafe"
)

// Snapshot is the exposition of one moment: every family and series a
// render writes, held as references to the engine's label strings (which
// are never changed once built) and a copy of each value, and, for the
// protobuf exposition, each native histogram encoded. It is taken under the
// store's read lock and written afterwards, as text or protobuf, in bounded
// pieces and as often as asked, so that a scrape neither holds the lock
// while it writes nor a whole rendered body: a snapshot costs 16 bytes a
// series, the text about 270. A written snapshot is never changed, so
// concurrent writers may share it.
type Snapshot struct {
	main recList
	// side collects the samples-count families, which follow the window
	// statistics they count.
	side recList
	// strs are the label strings the series refer to by index, mostly
	// once each.
	strs []string
	// empty is the index of "" in strs plus one, 0 before it is there.
	empty uint32
	// hists are the native histogram series of the families marked hist,
	// their histograms encoded in hbuf.
	hists []histRec
	hbuf  []byte
	// labels keeps the protobuf encoding of the label strings; the engine's.
	labels *protoLabelCache
}

// recList is a list of families, each followed by its n samples.
type recList struct {
	fams []famRec
	recs []sampleRec
}

// famRec is one family of a snapshot: its name, HELP (unescaped) and TYPE,
// the text header when the plan built it, and how many series follow it in
// recs, or in hists when hist is set.
type famRec struct {
	name, help, typ, header string
	n                       int32
	hist                    bool
}

// sampleRec is one series: labels is the index in strs of an entity's
// label set as rendered (an opening brace and its pairs), tail that of the
// extra pairs and the closing "} ", or of two empty strings for a series
// without labels (tail " ").
type sampleRec struct {
	labels, tail uint32
	v            float64
}

// histRec is one native histogram series: its labels as sampleRec's, and
// its Histogram message in hbuf[from:to].
type histRec struct {
	labels   uint32
	from, to int32
}

// strIndexBits sizes strIndex: 1024 slots, several times the label sets
// and tails of a large node.
const strIndexBits = 10

// strIndex finds the index of a label string in a snapshot's strs by the
// string's address, while a render walks the store: a render writes the same few strings (an entity's
// label sets, the tails of a statistic) over and over, so one
// multiplication and one comparison place most series. A slot holds a
// string of strs, which the snapshot keeps alive, so no other string can
// have its address: the same address and length is the same string. A
// string built for the render (a health check's tail) gets an index of its
// own each time.
type strIndex struct {
	slots [1 << strIndexBits]struct {
		p   *byte
		n   int
		idx uint32
	}
}

// intern returns the index of str in s.strs, adding it when its slot of
// seen holds another.
func (s *Snapshot) intern(seen *strIndex, str string) uint32 {
	if len(str) == 0 {
		// An empty string may have any address, or none.
		if s.empty == 0 {
			s.strs = append(s.strs, "")
			s.empty = uint32(len(s.strs))
		}
		return s.empty - 1
	}
	p := unsafe.StringData(str)
	h := uint64(uintptr(unsafe.Pointer(p))) * 0x9e3779b97f4a7c15 >> (64 - strIndexBits)
	slot := &seen.slots[h]
	if slot.p == p && slot.n == len(str) {
		return slot.idx
	}
	idx := uint32(len(s.strs))
	s.strs = append(s.strs, str)
	slot.p, slot.n, slot.idx = p, len(str), idx
	return idx
}

func (s *Snapshot) reset() {
	s.main.reset()
	s.side.reset()
	clear(s.strs) // let the label strings go
	s.strs = s.strs[:0]
	s.empty = 0
	s.hists = s.hists[:0]
	s.hbuf = s.hbuf[:0]
}

func (l *recList) reset() {
	clear(l.fams)
	l.fams = l.fams[:0]
	l.recs = l.recs[:0]
}

// add appends the families and series of o.
func (l *recList) add(o *recList) {
	l.fams = append(l.fams, o.fams...)
	l.recs = append(l.recs, o.recs...)
}

// snapshotWriter is where a render writes its series: the families and samples of a
// snapshot. A family is written with its first sample, so that a family
// without any is left out, as the exposition formats want.
type snapshotWriter struct {
	s    *Snapshot
	l    *recList
	seen *strIndex
	open famRec
	// pending says open is declared and has no sample yet.
	pending bool
}

// family opens a family.
func (w *snapshotWriter) family(name, help, typ string) { w.familyWith("", name, help, typ) }

// familyWith is family with the text header built beforehand.
func (w *snapshotWriter) familyWith(header, name, help, typ string) {
	w.open = famRec{name: name, help: help, typ: typ, header: header}
	w.pending = true
}

// sample writes one series of the open family (name is its name): labels
// is an entity's label set as rendered (an opening brace and its pairs),
// tail the extra pairs and the closing "} ", or both empty for a series
// without labels.
func (w *snapshotWriter) sample(_, labels, tail string, v float64) {
	if w.pending {
		w.l.fams = append(w.l.fams, w.open)
		w.pending = false
	}
	w.l.fams[len(w.l.fams)-1].n++
	w.l.recs = append(w.l.recs, sampleRec{labels: w.s.intern(w.seen, labels), tail: w.s.intern(w.seen, tail), v: v})
}

// histogram writes a native histogram series of the open family, which
// the caller opened with histFamily: its labels, and its Histogram message,
// hbuf[from:to] of the snapshot.
func (w *snapshotWriter) histogram(labels string, from, to int) {
	if w.pending {
		w.l.fams = append(w.l.fams, w.open)
		w.pending = false
	}
	w.l.fams[len(w.l.fams)-1].n++
	w.s.hists = append(w.s.hists, histRec{labels: w.s.intern(w.seen, labels), from: int32(from), to: int32(to)})
}

// histFamily opens a family of native histograms.
func (w *snapshotWriter) histFamily(name, help string) {
	w.open = famRec{name: name, help: help, typ: "histogram", hist: true}
	w.pending = true
}

// chunkSize is how much of an exposition a writer formats before handing
// it to the connection: a few system calls' worth, whatever the exposition.
const chunkSize = 32 << 10

// chunked formats an exposition into buf, passing it to w whenever it holds
// chunkSize bytes; with no w it keeps appending.
type chunked struct {
	buf []byte
	w   io.Writer
	err error
}

// spill hands the buffer to w once it is full; false once a write failed.
func (c *chunked) spill() bool {
	if c.w == nil || len(c.buf) < chunkSize || c.err != nil {
		return c.err == nil
	}
	_, c.err = c.w.Write(c.buf)
	c.buf = c.buf[:0]
	return c.err == nil
}

// flush hands what is left to w.
func (c *chunked) flush() error {
	if c.w != nil && c.err == nil && len(c.buf) > 0 {
		_, c.err = c.w.Write(c.buf)
		c.buf = c.buf[:0]
	}
	return c.err
}

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 0, chunkSize+4<<10); return &b }}

// WriteText writes the text exposition to w, chunkSize bytes at a time.
// An error is w's.
func (s *Snapshot) WriteText(w io.Writer) error {
	bp := chunkBufs.Get().(*[]byte)
	c := chunked{buf: (*bp)[:0], w: w}
	s.appendText(&c)
	err := c.flush()
	if cap(c.buf) <= 2*chunkSize {
		*bp = c.buf[:0]
		chunkBufs.Put(bp)
	}
	return err
}

// AppendText appends the text exposition to buf.
func (s *Snapshot) AppendText(buf []byte) []byte {
	c := chunked{buf: buf}
	s.appendText(&c)
	return c.buf
}

func (s *Snapshot) appendText(c *chunked) {
	recs := s.main.recs
	for i := range s.main.fams {
		f := &s.main.fams[i]
		if f.hist {
			// The text format has no native histograms.
			continue
		}
		if f.header != "" {
			c.buf = append(c.buf, f.header...)
		} else {
			c.buf = appendHeader(c.buf, f.name, f.help, f.typ)
		}
		for _, r := range recs[:f.n] {
			c.buf = append(c.buf, f.name...)
			c.buf = append(c.buf, s.strs[r.labels]...)
			c.buf = append(c.buf, s.strs[r.tail]...)
			c.buf = appendFloat(c.buf, r.v)
			c.buf = append(c.buf, '\n')
			if len(c.buf) >= chunkSize && !c.spill() {
				return
			}
		}
		recs = recs[f.n:]
	}
}

// appendHeader appends what familyHeader returns.
func appendHeader(buf []byte, name, help, typ string) []byte {
	buf = append(buf, "# HELP "...)
	buf = append(buf, name...)
	buf = append(buf, ' ')
	if strings.ContainsAny(help, "\\\n") || !isASCII(help) {
		help = escapeHelp(help)
	}
	buf = append(buf, help...)
	buf = append(buf, "\n# TYPE "...)
	buf = append(buf, name...)
	buf = append(buf, ' ')
	buf = append(buf, typ...)
	return append(buf, '\n')
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

package counters

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

const (
	// maxFileSize bounds what Parse reads: a counters file lists at most a
	// few hundred fields, so anything far larger is not one.
	maxFileSize = 1 << 20
	// maxLineErrors bounds the problems one ParseError holds. Past it,
	// problems are only counted: a file of thousands of bad lines is
	// refused in the time its first hundred take.
	maxLineErrors = 100
	// maxWarnings bounds the warnings one Set holds, likewise.
	maxWarnings = 100
)

// LineError is one problem in a counters file. Line is 0 for problems with
// the whole file.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e LineError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// ParseError holds every problem found in a counters file, in line order.
type ParseError struct {
	Errors []LineError
	// Omitted counts problems beyond the ones kept in Errors.
	Omitted int
}

func (e *ParseError) Error() string {
	lines := make([]string, 0, len(e.Errors)+1)
	for _, le := range e.Errors {
		lines = append(lines, le.Error())
	}
	if e.Omitted > 0 {
		lines = append(lines, fmt.Sprintf("... and %d more problems", e.Omitted))
	}
	return strings.Join(lines, "\n")
}

// Load reads and checks the counters file at path.
func Load(path string) (*Set, error) {
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, bytes.NewReader(b))
}

// ReadFile reads a counters file of at most 1 MiB. A named pipe, a device
// or a directory is refused before any read: reading /dev/zero would never
// end, and opening a FIFO blocks until a writer comes. The file is opened
// without blocking and checked on the open descriptor, so a file swapped
// between the check and the read cannot slip through.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open counters file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("counters file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("counters file %s is %s, not a regular file", path, describeMode(fi.Mode()))
	}
	if fi.Size() > maxFileSize {
		return nil, fmt.Errorf("counters file %s is %d bytes, larger than %d; a counters file lists fields, one per line", path, fi.Size(), maxFileSize)
	}
	// The size can grow after the stat; the read stays bounded regardless.
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read counters file %s: %w", path, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("counters file %s grew past %d bytes while it was read", path, maxFileSize)
	}
	return b, nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return "not a plain file (" + m.Type().String() + ")"
}

type parser struct {
	file  string
	errs  ParseError
	set   *Set
	index map[string]int // field name -> index in set.Fields
	// repeats counts lines that repeat an earlier one exactly.
	repeats int
}

func (p *parser) fail(line int, format string, args ...any) {
	if len(p.errs.Errors) >= maxLineErrors {
		p.errs.Omitted++
		return
	}
	p.errs.Errors = append(p.errs.Errors, LineError{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// Parse reads a counters file in dcgm-exporter's format, with gpuscope's two
// optional columns: FIELD, TYPE, HELP[, WATCH INTERVAL[, WINDOW STATS]].
// file names the input in messages. Every problem is reported at once, as a
// *ParseError, up to maxLineErrors of them.
func Parse(file string, r io.Reader) (*Set, error) {
	p := &parser{file: file, set: &Set{File: file}, index: map[string]int{}}
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read counters file %s: %w", file, err)
	}
	if len(data) > maxFileSize {
		// The line that crosses the limit is named: a single huge line is
		// the usual cause, and its number finds it.
		p.fail(bytes.Count(data[:maxFileSize], []byte("\n"))+1, "the file is larger than %d bytes at this line; a counters file lists fields, one per line", maxFileSize)
		return nil, &p.errs
	}
	// Editors on Windows write a UTF-8 byte-order mark; it is not part of
	// the first field's name.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if i := bytes.IndexByte(data, '\r'); i >= 0 && (i+1 == len(data) || data[i+1] != '\n') && !bytes.Contains(data, []byte("\n")) {
		p.fail(0, "lines end in a carriage return alone (CR, old Mac style); save the file with LF or CRLF line endings")
		return nil, &p.errs
	}
	content := false
	for n, raw := range bytes.Split(data, []byte("\n")) {
		lineNo := n + 1
		text := strings.TrimSpace(string(raw))
		if text != "" {
			content = true
		}
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		// Help text is served as is, and one invalid byte makes Prometheus
		// refuse the whole scrape.
		if !utf8.ValidString(text) {
			p.fail(lineNo, "the line is not valid UTF-8 (byte %d); save the file as UTF-8", invalidUTF8At(raw)+1)
			continue
		}
		p.line(lineNo, text)
	}
	switch {
	case !content && len(p.errs.Errors) == 0:
		p.fail(0, "file is empty")
	case len(p.set.Fields) == 0 && len(p.errs.Errors) == 0:
		p.fail(0, "no enabled field: every line is blank or a comment")
	}
	if p.repeats > maxWarnings {
		p.set.Warnings = append(p.set.Warnings, fmt.Sprintf("%s: ... and %d more repeated lines, ignored", p.file, p.repeats-maxWarnings))
	}
	if len(p.errs.Errors) > 0 {
		return nil, &p.errs
	}
	return p.set, nil
}

// invalidUTF8At is the offset of the first byte of b that is not valid
// UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

func (p *parser) line(n int, text string) {
	cr := csv.NewReader(strings.NewReader(text))
	cr.TrimLeadingSpace = true
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cols, err := cr.Read()
	if err != nil {
		p.fail(n, "cannot read the line as comma-separated values: %v", csvCause(err))
		return
	}
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	if len(cols) < 3 || len(cols) > 5 {
		p.fail(n, "want 3 to 5 comma-separated columns (FIELD, TYPE, HELP[, INTERVAL[, STATS]]), got %d; quote the help text if it contains commas", len(cols))
		return
	}
	f := Field{Name: cols[0], Help: cols[2], Line: n}
	ok := p.resolveName(n, &f)
	typ, typeOK := p.parseType(n, cols[1])
	f.Type = typ
	if len(cols) >= 4 && cols[3] != "" {
		iv, err := parseWatchInterval(cols[3])
		if err != nil {
			p.fail(n, "%v", err)
			ok = false
		}
		f.Interval = iv
	}
	if len(cols) == 5 && cols[4] != "" {
		stats, noHist, err := parseStats(cols[4])
		if err != nil {
			p.fail(n, "%v", err)
			ok = false
		}
		f.Stats, f.NoHistogram = stats, noHist
	}
	if !ok || !typeOK {
		return
	}
	if !p.checkType(n, f) {
		return
	}
	p.add(f)
}

func csvCause(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (p *parser) resolveName(n int, f *Field) bool {
	if f.Name == "" {
		p.fail(n, "the FIELD column is empty")
		return false
	}
	info, ok := Lookup(f.Name)
	if !ok {
		if c, isCompat := lookupCompat(f.Name); isCompat {
			return p.resolveCompat(n, f, c)
		}
		if c, isTotal := expTotals[f.Name]; isTotal {
			return p.resolveExpTotal(n, f, c)
		}
		if len(p.errs.Errors) >= maxLineErrors {
			// Past the cap the problem is only counted; a suggestion costs a
			// walk of the whole catalog.
			p.errs.Omitted++
			return false
		}
		if s := Suggest(f.Name); s != "" {
			p.fail(n, "unknown field %q; did you mean %s?", f.Name, s)
		} else {
			p.fail(n, "unknown field %q (gpuscope counters list shows the known fields)", f.Name)
		}
		return false
	}
	f.ID = info.ID
	if f.Help == "" {
		f.Help = info.Help
	}
	return true
}

// resolveCompat resolves an nvidia_gpu_exporter name through its table and
// switches the file to that exporter's label layout.
func (p *parser) resolveCompat(n int, f *Field, c CompatInfo) bool {
	if c.Field != "" {
		info, ok := Lookup(c.Field)
		if !ok {
			p.fail(n, "%s reads %s, which this build's field catalog lacks", f.Name, c.Field)
			return false
		}
		f.ID = info.ID
	}
	f.Export = c.Export
	if f.Help == "" {
		f.Help = c.Help
	}
	p.set.Layout = LayoutNvidiaGPUExporter
	return true
}

func (p *parser) parseType(n int, s string) (MetricType, bool) {
	switch strings.ToLower(s) {
	case "gauge":
		return Gauge, true
	case "counter":
		return Counter, true
	case "label":
		return Label, true
	case "histogram", "summary":
		p.fail(n, "type %s is not supported: a DCGM field is a single value per sample, and exporting it as a %s gives invalid exposition; use gauge (window statistics give min, max, avg and percentiles)", strings.ToLower(s), strings.ToLower(s))
	default:
		p.fail(n, "unknown type %q (want gauge, counter or label)", s)
	}
	return 0, false
}

// checkType reports problems that depend on the type and the field together.
func (p *parser) checkType(n int, f Field) bool {
	ok := true
	switch f.Type {
	case Label:
		if f.Interval != 0 || len(f.Stats) > 0 {
			p.fail(n, "%s is a label field: it takes no watch interval or window statistics", f.Name)
			ok = false
		}
	case Counter:
		if len(f.Stats) > 0 {
			p.fail(n, "%s is a counter: window statistics apply to gauges only", f.Name)
			ok = false
		}
	}
	if _, isTotal := expTotals[f.Name]; isTotal {
		return ok && p.checkExpTotal(n, f)
	}
	if c, isCompat := lookupCompat(f.Name); isCompat {
		if f.Type != c.Type {
			p.fail(n, "%s is a %s in nvidia_gpu_exporter; write %s, not %s", f.Name, c.Type, c.Type, f.Type)
			ok = false
		}
		if c.Field == "" && (f.Interval != 0 || len(f.Stats) > 0) {
			p.fail(n, "%s reads no GPU field: it takes no watch interval or window statistics", f.Name)
			ok = false
		}
		return ok
	}
	if info, found := ByID(f.ID); found && info.Kind == KindString && f.Type != Label {
		p.fail(n, "%s holds text: its type must be label, not %s", f.Name, f.Type)
		ok = false
	}
	return ok
}

func (p *parser) add(f Field) {
	i, dup := p.index[f.Name]
	if !dup {
		p.index[f.Name] = len(p.set.Fields)
		p.set.Fields = append(p.set.Fields, f)
		return
	}
	prev := p.set.Fields[i]
	if prev.Type == f.Type && prev.Interval == f.Interval && slices.Equal(prev.Stats, f.Stats) && prev.NoHistogram == f.NoHistogram {
		p.repeats++
		if p.repeats > maxWarnings {
			return
		}
		p.set.Warnings = append(p.set.Warnings, fmt.Sprintf("%s:%d: %s repeats line %d with the same type; this line is ignored", p.file, f.Line, f.Name, prev.Line))
		return
	}
	p.fail(f.Line, "%s is already defined on line %d with a different type, interval or statistics", f.Name, prev.Line)
}

// parseWatchInterval reads the watch-interval column: an interval no
// shorter than MinInterval.
func parseWatchInterval(s string) (time.Duration, error) {
	d, err := ParseInterval(s)
	if err != nil {
		if errors.Is(err, ErrNotInterval) && strings.ContainsAny(s, " \t") {
			return 0, fmt.Errorf("watch interval %w; quote the help text if it contains commas", err)
		}
		return 0, fmt.Errorf("watch interval %w", err)
	}
	if d < MinInterval {
		return 0, fmt.Errorf("watch interval %s is below the minimum of %s", d, MinInterval)
	}
	return d, nil
}

// parseStats reads a space-separated list of window statistics and returns
// them in AllStats order, and whether the list turns the field's native
// histogram off (the word NoHistogramWord).
func parseStats(s string) ([]Stat, bool, error) {
	want := map[Stat]bool{}
	noHist := false
	for _, word := range strings.Fields(s) {
		if strings.EqualFold(word, NoHistogramWord) {
			noHist = true
			continue
		}
		st, ok := statByName(strings.ToLower(word))
		if !ok {
			return nil, false, fmt.Errorf("unknown statistic %q (want any of %s, or %s)", word, strings.Join(StatNames(), " "), NoHistogramWord)
		}
		want[st] = true
	}
	var out []Stat
	for _, st := range AllStats {
		if want[st] {
			out = append(out, st)
		}
	}
	if noHist && len(out) == 0 {
		return nil, false, fmt.Errorf("%s turns off the native histogram of a field with window statistics; this line asks for none", NoHistogramWord)
	}
	return out, noHist, nil
}

func statByName(name string) (Stat, bool) {
	for _, st := range AllStats {
		if st.String() == name {
			return st, true
		}
	}
	return 0, false
}

package counters

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// Vocabulary is a way of naming DCGM fields in a counters file.
type Vocabulary string

const (
	// VocabularyNew is DCGM 4.6's names and base-unit fields, as
	// dcgm-exporter 4.9 and later write them.
	VocabularyNew Vocabulary = "new"
	// VocabularyLegacy is the names and units before DCGM 4.6, as
	// dcgm-exporter 4.8 and earlier write them.
	VocabularyLegacy Vocabulary = "legacy"
)

// ParseVocabulary checks a vocabulary name.
func ParseVocabulary(s string) (Vocabulary, error) {
	switch v := Vocabulary(s); v {
	case VocabularyNew, VocabularyLegacy:
		return v, nil
	}
	return "", fmt.Errorf("unknown vocabulary %q (want new or legacy)", s)
}

// Rename is one field a migration renamed.
type Rename struct {
	Line     int
	From, To string
	// FromUnit and ToUnit differ when the new name is another field ID in
	// another unit; Factor then multiplies a From value into To's unit.
	FromUnit, ToUnit string
	Factor           float64
}

// UnitChanges reports whether the rename changes the series' unit, so that
// dashboards, rules and queries reading it must scale.
func (r Rename) UnitChanges() bool { return r.Factor != 1 }

// String says what changes, for the operator.
func (r Rename) String() string {
	if !r.UnitChanges() {
		return fmt.Sprintf("%d: %s -> %s", r.Line, r.From, r.To)
	}
	return fmt.Sprintf("%d: %s (%s) -> %s (%s): another field, values times %s", r.Line, r.From, unitName(r.FromUnit), r.To,
		unitName(r.ToUnit), strconv.FormatFloat(r.Factor, 'g', -1, 64))
}

func unitName(u string) string {
	if u == "" {
		return "no unit"
	}
	return u
}

// fieldAtStart is the field name of a counters line, or of a line that
// comments one out ("# DCGM_FI_..., gauge, ..."), with what surrounds it.
var fieldAtStart = regexp.MustCompile(`^(\s*(?:#\s*)?)([A-Za-z][A-Za-z0-9_]*)(\s*,)`)

// Migrate rewrites a counters file into the other DCGM vocabulary, line by
// line: only field names change, in lines that name a field and in lines
// that comment one out; comments, help texts, types, intervals and
// statistics stay as they are. Names the catalog does not know, and
// dcgm-exporter 1.x's lower-case names, stay too. From legacy to new then
// back gives the file it started from.
func Migrate(r io.Reader, w io.Writer, to Vocabulary) ([]Rename, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read counters file: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("counters file is larger than %d bytes", maxFileSize)
	}
	var renames []Rename
	var out bytes.Buffer
	out.Grow(len(data) + len(data)/8)
	// SplitAfter keeps each line's end, CRLF or none, as the file has it.
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if m := fieldAtStart.FindSubmatchIndex(line); m != nil {
			if rn, ok := rename(string(line[m[4]:m[5]]), to); ok {
				rn.Line = i + 1
				renames = append(renames, rn)
				out.Write(line[:m[4]])
				out.WriteString(rn.To)
				out.Write(line[m[5]:])
				continue
			}
		}
		out.Write(line)
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return nil, fmt.Errorf("write counters file: %w", err)
	}
	return renames, nil
}

// rename is the name of field name in vocabulary to, when it differs.
func rename(name string, to Vocabulary) (Rename, bool) {
	f, ok := Lookup(name)
	if !ok || !isDCGMName(name) {
		return Rename{}, false
	}
	target, factor := name, 1.0
	switch to {
	case VocabularyNew:
		if f.Deprecated {
			target = f.Current
		}
		if u, ok := fieldid.SupersededBy(f.ID); ok {
			target, factor = u.Name, u.Scale
		}
	case VocabularyLegacy:
		if u, ok := fieldid.BaseUnitOf(f.ID); ok {
			target, factor = u.LegacyName, 1/u.Scale
		} else if !f.curated && len(f.Replaces) > 0 {
			target = f.Replaces[0]
			for _, r := range f.Replaces {
				if old, ok := Lookup(r); ok && old.curated {
					target = r
					break
				}
			}
		}
	}
	if target == name {
		return Rename{}, false
	}
	t, _ := Lookup(target)
	return Rename{From: name, To: target, FromUnit: f.Unit, ToUnit: t.Unit, Factor: roundFactor(factor)}, true
}

// isDCGMName tells DCGM's upper-case names from dcgm-exporter 1.x's
// lower-case ones, which no migration touches.
func isDCGMName(name string) bool { return len(name) > 8 && name[:8] == "DCGM_FI_" }

// roundFactor makes 1/1e-3 the 1000 it stands for.
func roundFactor(f float64) float64 {
	if r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 12, 64), 64); err == nil {
		return r
	}
	return f
}

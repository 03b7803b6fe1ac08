package sampleapi

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s without the characters a terminal acts on: C0 and C1
// controls (escape sequences that retitle the window or leave the
// alternate screen start with one), DEL, and the bidirectional overrides
// that reorder what is shown. Invalid UTF-8 becomes U+FFFD. Everything a
// server sends that top or capture shows goes through it.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if !keep(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if keep(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func keep(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return true // written back as U+FFFD, which is harmless
	case unicode.IsControl(r):
		return false
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return false
	}
	return true
}

// sanitize makes every string of r that a client shows Printable.
func (r *Result) sanitize() {
	r.Hostname = Printable(r.Hostname)
	for i := range r.Fields {
		f := &r.Fields[i]
		f.Name, f.Unit, f.Help = Printable(f.Name), Printable(f.Unit), Printable(f.Help)
	}
	for i := range r.Entities {
		e := &r.Entities[i]
		e.Key, e.Kind = Printable(e.Key), Printable(e.Kind)
		if e.Labels != nil {
			clean := make(map[string]string, len(e.Labels))
			for k, v := range e.Labels {
				clean[Printable(k)] = Printable(v)
			}
			e.Labels = clean
		}
		for j := range e.Series {
			e.Series[j].Field = Printable(e.Series[j].Field)
		}
	}
}

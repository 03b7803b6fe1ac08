package main

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// headerFile is DCGM's field header as go-dcgm carries it.
const headerFile = "pkg/dcgm/dcgm_fields.h"

// header is what dcgm_fields.h says about field names beyond go-dcgm's maps:
// the deprecated aliases of DCGM 4.6's renaming (the DCGM_DEPRECATED block,
// each old name defined as its new name) and the fields a field under
// another ID supersedes ("Deprecated: Use X instead." above a define).
type header struct {
	// ids holds every DCGM_FI_ define with a number, and each alias
	// resolved to its target's number.
	ids map[string]uint16
	// aliasOf maps a deprecated name to the current name it is defined as.
	aliasOf map[string]string
	// supersededBy maps a field to the field its comment says to use instead.
	supersededBy map[string]string
	// comment is the doc comment above each numeric define, one line.
	comment map[string]string
}

var (
	defineNum   = regexp.MustCompile(`^#define\s+(DCGM_FI_\w+)\s+(\d+)\b`)
	defineAlias = regexp.MustCompile(`^#define\s+(DCGM_FI_\w+)\s+(DCGM_FI_\w+)\b`)
	useInstead  = regexp.MustCompile(`Deprecated:\s*Use\s+(DCGM_FI_\w+)\s+instead`)
)

func parseHeader(path string) (*header, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read DCGM field header: %w", err)
	}
	h := &header{ids: map[string]uint16{}, aliasOf: map[string]string{}, supersededBy: map[string]string{}, comment: map[string]string{}}
	var doc []string
	inDoc := false
	for n, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "/**"):
			inDoc, doc = true, nil
			continue
		case inDoc:
			if strings.HasPrefix(t, "*/") || strings.HasSuffix(t, "*/") {
				inDoc = false
			}
			t = strings.TrimSpace(strings.TrimSuffix(strings.TrimLeft(t, "* "), "*/"))
			if t != "" {
				doc = append(doc, t)
			}
			continue
		}
		if m := defineNum.FindStringSubmatch(t); m != nil {
			id, err := strconv.ParseUint(m[2], 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: field ID %s: %w", path, n+1, m[2], err)
			}
			h.ids[m[1]] = uint16(id)
			h.comment[m[1]] = strings.Join(doc, " ")
			if u := useInstead.FindStringSubmatch(strings.Join(doc, " ")); u != nil {
				h.supersededBy[m[1]] = u[1]
			}
		} else if m := defineAlias.FindStringSubmatch(t); m != nil {
			h.aliasOf[m[1]] = m[2]
		}
		if t != "" && !strings.HasPrefix(t, "//") {
			doc = nil
		}
	}
	for old := range h.aliasOf {
		target := old
		for i := 0; ; i++ {
			next, ok := h.aliasOf[target]
			if !ok {
				break
			}
			if i > len(h.aliasOf) {
				return nil, fmt.Errorf("%s: alias %s is defined in a loop", path, old)
			}
			target = next
		}
		id, ok := h.ids[target]
		if !ok {
			return nil, fmt.Errorf("%s: alias %s names %s, which has no field ID", path, old, target)
		}
		h.aliasOf[old] = target
		h.ids[old] = id
	}
	if len(h.ids) == 0 {
		return nil, fmt.Errorf("%s: no field defines found", path)
	}
	return h, nil
}

// unitRule is how a field with a base-unit suffix relates to the field it
// supersedes: the header names the new field's unit in its suffix and its
// comment, DCGM's field table and documentation the old one's.
type unitRule struct {
	suffix string // of the new field's name
	word   string // that the new field's header comment uses for its unit
	unit   string // of the new field
	legacy string // unit of the superseded field
	// scale multiplies a legacy value into the new unit.
	scale string
}

// unitRules are the unit changes DCGM 4.6.1 makes under new IDs. A field
// superseded under a new ID with a suffix no rule knows stops the
// generator: its conversion has to be decided, not guessed.
var unitRules = []unitRule{
	{suffix: "_HERTZ", word: "hertz", unit: "Hz", legacy: "MHz", scale: "1e6"},
	{suffix: "_BYTES", word: "bytes", unit: "B", legacy: "MiB", scale: "1048576"},
	{suffix: "_JOULES_TOTAL", word: "joules", unit: "J", legacy: "mJ", scale: "1e-3"},
	{suffix: "_RATIO", word: "ratio", unit: "ratio", legacy: "%", scale: "1e-2"},
}

// baseUnit is one field DCGM 4.6.1 added under a new ID in a base unit, with
// the legacy field it supersedes.
type baseUnit struct {
	name, legacy string
	rule         unitRule
}

// baseUnits finds the device fields that another device field supersedes
// under a new ID. A profiling field superseding a device one (PCIe
// throughput) measures something else, so it is not a unit change.
func (h *header) baseUnits() ([]baseUnit, error) {
	var out []baseUnit
	for old, cur := range h.supersededBy {
		if h.ids[old] == h.ids[cur] || !strings.HasPrefix(old, "DCGM_FI_DEV_") || !strings.HasPrefix(cur, "DCGM_FI_DEV_") {
			continue
		}
		var rule *unitRule
		for i := range unitRules {
			if strings.HasSuffix(cur, unitRules[i].suffix) {
				rule = &unitRules[i]
				break
			}
		}
		if rule == nil {
			return nil, fmt.Errorf("%s supersedes %s under a new ID with no known unit rule", cur, old)
		}
		if !strings.Contains(strings.ToLower(h.comment[cur]), rule.word) {
			return nil, fmt.Errorf("%s: its header comment %q does not name the unit %q", cur, h.comment[cur], rule.word)
		}
		out = append(out, baseUnit{name: cur, legacy: old, rule: *rule})
	}
	sort.Slice(out, func(i, j int) bool { return h.ids[out[i].name] < h.ids[out[j].name] })
	return out, nil
}

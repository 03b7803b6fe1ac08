// Command gen writes counters/fieldid/fieldid_gen.go: a named constant for
// every DCGM field ID and for gpuscope's exporter-side fields, the name
// tables the counters catalog is built from, and the facts DCGM states about
// each field (entity level, unit, profiling or not).
//
// Field names and IDs come from go-dcgm's const_fields.go (the module in
// go.mod); its dcgm_fields.h beside it says which names are DCGM's
// deprecated aliases (the DCGM_DEPRECATED block) and which fields a
// base-unit field under a new ID supersedes (header.go). The fieldid
// package cannot import go-dcgm (it needs cgo and the DCGM library at run
// time), so the tables are copied out of the module source at generate
// time.
//
// The per-field metadata lives in DCGM's own field table
// (dcgmlib/src/dcgm_fields.cpp), which go-dcgm does not carry. Its facts are
// kept, by field name, in dcgm-field-meta.tsv next to this file; -meta-from
// rewrites that file from a DCGM checkout of the release go-dcgm follows.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const (
	modulePath = "github.com/NVIDIA/go-dcgm"
	constFile  = "pkg/dcgm/const_fields.go"
	metaFile   = "dcgm-field-meta.tsv"
)

type entry struct {
	name string
	id   uint16
}

// fieldMeta is what DCGM's field table says about one field.
type fieldMeta struct {
	level string // DCGM_FE_* without the prefix
	unit  string
}

// exporterField is a field gpuscope derives instead of reading it from DCGM,
// named as dcgm-exporter names it (internal/pkg/counters/const.go).
type exporterField struct {
	name string
	// base is the DCGM field it is computed from, if any: a source that
	// reads the base field serves the derived one.
	base string
}

// exporterFields get IDs from firstExporterID+1 on, in this order; the
// order is part of no protocol, but keeping it keeps the IDs stable.
var exporterFields = []exporterField{
	{name: "DCGM_EXP_XID_ERRORS_COUNT", base: "DCGM_FI_DEV_XID_ERRORS"},
	{name: "DCGM_EXP_CLOCK_EVENTS_COUNT", base: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"},
	{name: "DCGM_EXP_GPU_HEALTH_STATUS"},
	{name: "DCGM_EXP_P2P_STATUS"},
}

// firstExporterID starts a range DCGM does not use (its IDs stay below
// DCGM_FI_MAX_FIELDS, a few thousand), so that one uint16 names any field.
const firstExporterID = 0xF000

func main() {
	out := flag.String("o", "fieldid_gen.go", "output file")
	src := flag.String("src", "", "path of go-dcgm's const_fields.go (default: located with go list)")
	meta := flag.String("meta", filepath.Join("internal", "gen", metaFile), "the DCGM field metadata table")
	metaFrom := flag.String("meta-from", "", "rewrite the -meta table from this DCGM dcgmlib/src/dcgm_fields.cpp, then generate")
	release := flag.String("dcgm-release", "", "with -meta-from: the DCGM release the file comes from, recorded in the table")
	flag.Parse()
	if err := run(*src, *meta, *metaFrom, *release, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(src, metaPath, metaFrom, release, out string) error {
	if src == "" {
		dir, err := moduleDir()
		if err != nil {
			return err
		}
		src = filepath.Join(dir, constFile)
	}
	maps, err := parseMaps(src, "dcgmFields", "legacyDCGMFields")
	if err != nil {
		return err
	}
	// The header sits beside const_fields.go in go-dcgm's pkg/dcgm.
	hdr, err := parseHeader(filepath.Join(filepath.Dir(src), filepath.Base(headerFile)))
	if err != nil {
		return err
	}
	t, err := split(maps["dcgmFields"], maps["legacyDCGMFields"], hdr)
	if err != nil {
		return err
	}
	// Both vocabularies name fields in DCGM's field table: DCGM before 4.6
	// registers the old names, 4.6 and later the new ones.
	known := append(append([]entry(nil), t.current...), aliasEntries(t.deprecated)...)
	if metaFrom != "" {
		meta, err := extractMeta(metaFrom, known)
		if err != nil {
			return err
		}
		if err := writeMeta(metaPath, release, meta, known); err != nil {
			return err
		}
	}
	if t.meta, err = readMeta(metaPath); err != nil {
		return err
	}
	code, err := render(t)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, code, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

// split sorts go-dcgm's legacy map into DCGM's deprecated upper-case names
// and dcgm-exporter 1.x's lower-case ones, and checks each deprecated name
// against the header: go-dcgm's map and DCGM's header must agree on its ID.
func split(current, legacyMap []entry, hdr *header) (*tables, error) {
	t := &tables{current: current}
	currentByName := map[string]uint16{}
	firstByID := map[uint16]string{}
	sort.Slice(current, func(i, j int) bool { return current[i].name < current[j].name })
	for _, e := range current {
		currentByName[e.name] = e.id
		if _, ok := firstByID[e.id]; !ok {
			firstByID[e.id] = e.name
		}
	}
	for _, e := range legacyMap {
		if !strings.HasPrefix(e.name, "DCGM_FI_") {
			t.legacy = append(t.legacy, e)
			continue
		}
		if id, ok := hdr.ids[e.name]; ok && id != e.id {
			return nil, fmt.Errorf("deprecated field %s: go-dcgm's map says ID %d, dcgm_fields.h says %d", e.name, e.id, id)
		}
		cur := hdr.aliasOf[e.name]
		if _, ok := currentByName[cur]; !ok {
			cur = firstByID[e.id]
		}
		if cur == "" {
			return nil, fmt.Errorf("deprecated field %s: ID %d has no current name", e.name, e.id)
		}
		t.deprecated = append(t.deprecated, alias{name: e.name, current: cur, id: e.id})
	}
	sort.Slice(t.deprecated, func(i, j int) bool { return t.deprecated[i].name < t.deprecated[j].name })
	units, err := hdr.baseUnits()
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		if _, ok := currentByName[u.name]; !ok {
			return nil, fmt.Errorf("base-unit field %s is in dcgm_fields.h but not in go-dcgm's map", u.name)
		}
		if hdr.ids[u.name] != currentByName[u.name] {
			return nil, fmt.Errorf("base-unit field %s: go-dcgm's map says ID %d, dcgm_fields.h says %d", u.name, currentByName[u.name], hdr.ids[u.name])
		}
	}
	t.units = units
	return t, nil
}

func aliasEntries(as []alias) []entry {
	out := make([]entry, 0, len(as))
	for _, a := range as {
		out = append(out, entry{name: a.name, id: a.id})
	}
	return out
}

func moduleDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w: %s", modulePath, err, strings.TrimSpace(stderr.String()))
	}
	dir := strings.TrimSpace(string(b))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: module not downloaded (run go mod download %s)", modulePath, modulePath)
	}
	return dir, nil
}

// parseMaps reads the named package-level map literals of string to integer.
func parseMaps(path string, names ...string) (map[string][]entry, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found := map[string][]entry{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, ident := range vs.Names {
				if !want[ident.Name] || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					return nil, fmt.Errorf("%s: %s is not a map literal", fset.Position(ident.Pos()), ident.Name)
				}
				entries, err := mapEntries(fset, lit)
				if err != nil {
					return nil, err
				}
				found[ident.Name] = entries
			}
		}
	}
	for _, n := range names {
		if len(found[n]) == 0 {
			return nil, fmt.Errorf("%s: map %s not found or empty", path, n)
		}
	}
	return found, nil
}

func mapEntries(fset *token.FileSet, lit *ast.CompositeLit) ([]entry, error) {
	entries := make([]entry, 0, len(lit.Elts))
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			return nil, fmt.Errorf("%s: expected key: value", fset.Position(elt.Pos()))
		}
		k, ok := kv.Key.(*ast.BasicLit)
		if !ok || k.Kind != token.STRING {
			return nil, fmt.Errorf("%s: key is not a string literal", fset.Position(kv.Pos()))
		}
		v, ok := kv.Value.(*ast.BasicLit)
		if !ok || v.Kind != token.INT {
			return nil, fmt.Errorf("%s: value is not an integer literal", fset.Position(kv.Value.Pos()))
		}
		name, err := strconv.Unquote(k.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fset.Position(k.Pos()), err)
		}
		id, err := strconv.ParseUint(v.Value, 0, 16)
		if err != nil {
			return nil, fmt.Errorf("%s: field ID %s: %w", fset.Position(v.Pos()), v.Value, err)
		}
		if id >= firstExporterID {
			return nil, fmt.Errorf("%s: field ID %s is in gpuscope's exporter-side range", fset.Position(v.Pos()), v.Value)
		}
		entries = append(entries, entry{name: name, id: uint16(id)})
	}
	return entries, nil
}

var (
	populateCall = regexp.MustCompile(`DcgmFieldsPopulateOneFieldWithFormatting\(([^;]*?)\);`)
	fieldLoop    = regexp.MustCompile(`for \(unsigned int fieldId = (DCGM_FI_\w+); fieldId <= (DCGM_FI_\w+); fieldId\+\+\)`)
	unitEnum     = regexp.MustCompile(`getTextForEnum\((DCGM_FIELD_UNIT_\w+)\)`)
	entityLevel  = regexp.MustCompile(`^DCGM_FE_(\w+)$`)
	cComment     = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
)

// unitText is DCGM's getTextForEnum, trimmed: the units its field table
// names through an enum rather than a string.
var unitText = map[string]string{
	"DCGM_FIELD_UNIT_TEMP_C":      "C",
	"DCGM_FIELD_UNIT_POW_W":       "W",
	"DCGM_FIELD_UNIT_BW_KBPS":     "KB/s",
	"DCGM_FIELD_UNIT_BW_MBPS":     "MB/s",
	"DCGM_FIELD_UNIT_MILLIJOULES": "mJ",
}

// extractMeta reads the entity level and unit of every field DCGM's field
// table registers, one DcgmFieldsPopulateOneFieldWithFormatting call per
// field or per loop over a contiguous range of IDs.
func extractMeta(path string, current []entry) (map[string]fieldMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read DCGM field table: %w", err)
	}
	text := string(b)
	byName := map[string]uint16{}
	byID := map[uint16][]string{}
	for _, e := range current {
		byName[e.name] = e.id
		byID[e.id] = append(byID[e.id], e.name)
	}
	meta := map[string]fieldMeta{}
	for _, m := range populateCall.FindAllStringSubmatchIndex(text, -1) {
		args := splitArgs(cComment.ReplaceAllString(text[m[2]:m[3]], ""))
		line := 1 + strings.Count(text[:m[0]], "\n")
		if len(args) != 10 {
			return nil, fmt.Errorf("%s:%d: want 10 arguments, got %d", path, line, len(args))
		}
		lm := entityLevel.FindStringSubmatch(args[8])
		if lm == nil {
			return nil, fmt.Errorf("%s:%d: entity level %q is not a DCGM_FE_ constant", path, line, args[8])
		}
		fm := fieldMeta{level: lm[1], unit: unitOf(args[7])}
		var names []string
		if args[0] == "fieldId" {
			loops := fieldLoop.FindAllStringSubmatch(text[:m[0]], -1)
			if len(loops) == 0 {
				return nil, fmt.Errorf("%s:%d: fieldId outside a loop over field IDs", path, line)
			}
			first, okFirst := byName[loops[len(loops)-1][1]]
			last, okLast := byName[loops[len(loops)-1][2]]
			if !okFirst || !okLast {
				return nil, fmt.Errorf("%s:%d: loop bounds %s..%s are not go-dcgm fields", path, line, loops[len(loops)-1][1], loops[len(loops)-1][2])
			}
			for id := first; id <= last; id++ {
				names = append(names, byID[id]...)
			}
		} else {
			id, ok := byName[args[0]]
			if !ok {
				// DCGM's table may know fields a go-dcgm release does not name yet.
				continue
			}
			names = byID[id]
		}
		for _, n := range names {
			meta[n] = fm
		}
	}
	if len(meta) == 0 {
		return nil, fmt.Errorf("%s: no field registrations found", path)
	}
	return meta, nil
}

// splitArgs splits a C argument list at its top-level commas.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	inStr := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' && (i == 0 || s[i-1] != '\\'):
			inStr = !inStr
		case inStr:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

func unitOf(arg string) string {
	if m := unitEnum.FindStringSubmatch(arg); m != nil {
		return unitText[m[1]]
	}
	u, err := strconv.Unquote(arg)
	if err != nil {
		return ""
	}
	u = strings.TrimSpace(u)
	// "#" marks counts and version numbers in DCGM's table: no unit.
	if u == "#" {
		return ""
	}
	return u
}

func writeMeta(path, release string, meta map[string]fieldMeta, current []entry) error {
	if release == "" {
		release = "(release not given)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# What DCGM's field table (dcgmlib/src/dcgm_fields.cpp of DCGM %s) states about\n", release)
	b.WriteString("# each field, by name: the entity level it is read at (DCGM_FE_*) and its unit.\n")
	b.WriteString("# Rewrite it from the DCGM release whose dcgm_fields.h go-dcgm carries, in counters/fieldid:\n")
	b.WriteString("# go run ./internal/gen -meta-from DCGM/dcgmlib/src/dcgm_fields.cpp -dcgm-release X.Y.Z\n")
	b.WriteString("# NAME\tENTITY LEVEL\tUNIT\n")
	names := make([]string, 0, len(meta))
	for _, e := range current {
		if _, ok := meta[e.name]; ok {
			names = append(names, e.name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", n, meta[n].level, meta[n].unit)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func readMeta(path string) (map[string]fieldMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read field metadata: %w", err)
	}
	defer f.Close()
	meta := map[string]fieldMeta{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 3 {
			return nil, fmt.Errorf("%s:%d: want NAME, ENTITY LEVEL and UNIT separated by tabs", path, n)
		}
		if _, ok := levels[cols[1]]; !ok {
			return nil, fmt.Errorf("%s:%d: unknown entity level %q", path, n, cols[1])
		}
		meta[cols[0]] = fieldMeta{level: cols[1], unit: cols[2]}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return meta, nil
}

// levels maps DCGM's entity groups to the fieldid.Level constants.
var levels = map[string]string{
	"NONE":     "LevelNone",
	"GPU":      "LevelGPU",
	"VGPU":     "LevelVGPU",
	"SWITCH":   "LevelNvSwitch",
	"GPU_I":    "LevelGPUInstance",
	"GPU_CI":   "LevelComputeInstance",
	"LINK":     "LevelLink",
	"CPU":      "LevelCPU",
	"CPU_CORE": "LevelCPUCore",
	"CONNECTX": "LevelConnectX",
}

// initialisms are the words of DCGM field names written in capitals (or
// their usual mixed case) in Go names.
var initialisms = map[string]string{
	"API": "API", "B2B": "B2B", "BAR1": "BAR1", "BER": "BER", "BUSID": "BusID", "C2C": "C2C", "CC": "CC", "CI": "CI", "CONNECTX": "ConnectX",
	"CPU": "CPU", "CRC": "CRC", "CUDA": "CUDA", "DBE": "DBE", "DFMA": "DFMA", "DL": "DL", "DRAM": "DRAM", "DVDD": "DVDD",
	"ECC": "ECC", "EUD": "EUD", "FB": "FB", "FBC": "FBC", "FEC": "FEC", "GI": "GI", "GPM": "GPM",
	"GPU": "GPU", "GR": "GR", "GUID": "GUID", "HMMA": "HMMA", "HVDD": "HVDD", "HW": "HW", "ID": "ID", "IDS": "IDs",
	"IMEX": "IMEX", "IMMA": "IMMA", "IRQ": "IRQ", "MIG": "MIG", "NCCL": "NCCL", "NVLINK": "NVLink",
	"NVML": "NVML", "NVSWITCH": "NVSwitch", "OEM": "OEM", "P2P": "P2P", "PCI": "PCI", "PCIE": "PCIe",
	"PLR": "PLR", "PPCNT": "PPCNT", "RX": "RX", "SBE": "SBE", "SM": "SM", "SW": "SW", "TX": "TX",
	"UUID": "UUID", "VBIOS": "VBIOS", "VDD": "VDD", "VGPU": "VGPU", "VM": "VM", "XID": "XID",
}

var laneWord = regexp.MustCompile(`^LANE(\d+)$`)

// goName turns a DCGM field name into a Go identifier: DCGM_FI_DEV_GPU_TEMP
// is GPUTemp, DCGM_FI_PROF_SM_ACTIVE is ProfSMActive, DCGM_EXP_P2P_STATUS is
// ExpP2PStatus.
func goName(name string) string {
	var rest string
	switch {
	case strings.HasPrefix(name, "DCGM_FI_DEV_"):
		rest = strings.TrimPrefix(name, "DCGM_FI_DEV_")
	case strings.HasPrefix(name, "DCGM_FI_"):
		rest = strings.TrimPrefix(name, "DCGM_FI_")
	case strings.HasPrefix(name, "DCGM_EXP_"):
		rest = "EXP_" + strings.TrimPrefix(name, "DCGM_EXP_")
	default:
		rest = name
	}
	var b strings.Builder
	for _, w := range strings.Split(rest, "_") {
		switch {
		case w == "":
		case initialisms[w] != "":
			b.WriteString(initialisms[w])
		case laneWord.MatchString(w):
			b.WriteString("Lane" + laneWord.FindStringSubmatch(w)[1])
		case strings.ContainsAny(w, "0123456789"):
			b.WriteString(w)
		default:
			b.WriteString(w[:1] + strings.ToLower(w[1:]))
		}
	}
	s := b.String()
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "Field" + s
	}
	return s
}

// Command gen writes counters/fieldid/fieldid_gen.go: a named constant for
// every DCGM field ID and for gpuscope's exporter-side fields, the name
// tables the counters catalog is built from, and the facts DCGM states about
// each field (entity level, unit, profiling or not).
//
// Field names and IDs come from go-dcgm's const_fields.go (the module in
// go.mod). The fieldid package cannot import go-dcgm (it needs cgo and the
// DCGM library at run time), so the tables are copied out of the module
// source at generate time.
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
	"go/format"
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
	if metaFrom != "" {
		meta, err := extractMeta(metaFrom, maps["dcgmFields"])
		if err != nil {
			return err
		}
		if err := writeMeta(metaPath, release, meta, maps["dcgmFields"]); err != nil {
			return err
		}
	}
	meta, err := readMeta(metaPath)
	if err != nil {
		return err
	}
	code, err := render(maps["dcgmFields"], maps["legacyDCGMFields"], meta)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, code, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
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

// linkMember matches the per-link members of a field family: the link
// index is an _L<n> word, as in DCGM_FI_DEV_NVLINK_BANDWIDTH_L3 and
// DCGM_FI_PROF_NVLINK_L3_TX_BYTES.
var linkMember = regexp.MustCompile(`^(DCGM_FI_\w*?)_L(\d+)((?:_\w+)?)$`)

type family struct {
	goName  string
	members []string // Go names, by link
}

// linkFamilies finds the families whose links are numbered 0..n-1 without
// a gap, so that a source can index their IDs by link.
func linkFamilies(current []entry, constName map[string]string) []family {
	byKey := map[string]map[int]string{}
	for _, e := range current {
		m := linkMember.FindStringSubmatch(e.name)
		if m == nil {
			continue
		}
		link, _ := strconv.Atoi(m[2])
		key := m[1] + m[3]
		if byKey[key] == nil {
			byKey[key] = map[int]string{}
		}
		byKey[key][link] = constName[e.name]
	}
	var out []family
	for key, links := range byKey {
		if len(links) < 2 {
			continue
		}
		f := family{goName: goName(key) + "ByLink"}
		for l := 0; l < len(links); l++ {
			n, ok := links[l]
			if !ok {
				f.members = nil
				break
			}
			f.members = append(f.members, n)
		}
		if f.members != nil {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].goName < out[j].goName })
	return out
}

func render(current, legacy []entry, meta map[string]fieldMeta) ([]byte, error) {
	sort.Slice(current, func(i, j int) bool { return current[i].name < current[j].name })
	sort.Slice(legacy, func(i, j int) bool { return legacy[i].name < legacy[j].name })

	constName := map[string]string{}
	owner := map[string]string{}
	for _, e := range current {
		n := goName(e.name)
		if prev, dup := owner[n]; dup {
			return nil, fmt.Errorf("%s and %s both become the Go name %s", prev, e.name, n)
		}
		owner[n], constName[e.name] = e.name, n
	}
	// byID names each ID by the constant of its first current name (sorted),
	// for the legacy table.
	byID := map[uint16]string{}
	for _, e := range current {
		if _, ok := byID[e.id]; !ok {
			byID[e.id] = constName[e.name]
		}
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by counters/fieldid/internal/gen from %s %s and %s; DO NOT EDIT.\n\n", modulePath, constFile, metaFile)
	b.WriteString("package fieldid\n\n")

	b.WriteString("// DCGM field IDs, as go-dcgm numbers them (dcgm_fields.h).\n")
	b.WriteString("const (\n")
	for _, e := range current {
		fmt.Fprintf(&b, "\t// %s is %s.\n\t%s uint16 = %d\n", constName[e.name], e.name, constName[e.name], e.id)
	}
	b.WriteString(")\n\n")

	b.WriteString("// Exporter-side fields have no DCGM field ID: gpuscope derives them. They\n")
	b.WriteString("// get IDs from a range DCGM does not use, so that one uint16 names any field.\n")
	b.WriteString("const (\n")
	fmt.Fprintf(&b, "\t// FirstExporter is the lowest ID of the exporter-side range.\n\tFirstExporter uint16 = %#x\n", firstExporterID)
	baseOf := map[string]string{}
	for i, x := range exporterFields {
		n := goName(x.name)
		if _, dup := owner[n]; dup {
			return nil, fmt.Errorf("exporter field %s collides with the Go name of %s", x.name, owner[n])
		}
		owner[n], constName[x.name] = x.name, n
		fmt.Fprintf(&b, "\t// %s is %s.\n\t%s uint16 = %#x\n", n, x.name, n, firstExporterID+1+i)
		if x.base != "" {
			base, ok := constName[x.base]
			if !ok {
				return nil, fmt.Errorf("exporter field %s: base field %s is not a go-dcgm field", x.name, x.base)
			}
			baseOf[n] = base
		}
	}
	b.WriteString(")\n\n")

	b.WriteString("// current is every current DCGM field name with its ID, sorted by name.\n")
	b.WriteString("var current = []Entry{\n")
	for _, e := range current {
		fmt.Fprintf(&b, "\t{%q, %s},\n", e.name, constName[e.name])
	}
	b.WriteString("}\n\n")

	b.WriteString("// legacy holds the lower-case names of dcgm-exporter 1.x, sorted by name.\n")
	b.WriteString("var legacy = []Entry{\n")
	for _, e := range legacy {
		id, ok := byID[e.id]
		if !ok {
			return nil, fmt.Errorf("legacy field %s: ID %d has no current name", e.name, e.id)
		}
		fmt.Fprintf(&b, "\t{%q, %s},\n", e.name, id)
	}
	b.WriteString("}\n\n")

	b.WriteString("// exporter is every exporter-side field, in ID order.\n")
	b.WriteString("var exporter = []Entry{\n")
	for _, x := range exporterFields {
		fmt.Fprintf(&b, "\t{%q, %s},\n", x.name, constName[x.name])
	}
	b.WriteString("}\n\n")

	b.WriteString("// facts holds what DCGM's field table states about each field, and the\n")
	b.WriteString("// base field of each derived exporter-side field.\n")
	b.WriteString("var facts = map[uint16]Facts{\n")
	seen := map[uint16]bool{}
	for _, e := range current {
		m, known := meta[e.name]
		prof := strings.HasPrefix(e.name, "DCGM_FI_PROF_")
		if (!known && !prof) || seen[e.id] {
			continue
		}
		seen[e.id] = true
		var parts []string
		if known {
			parts = append(parts, "Level: "+levels[m.level])
		}
		if m.unit != "" {
			parts = append(parts, fmt.Sprintf("Unit: %q", m.unit))
		}
		if prof {
			// DCGM_FI_PROF_* fields are the ones its profiling module samples.
			parts = append(parts, "Profiling: true")
		}
		fmt.Fprintf(&b, "\t%s: {%s},\n", constName[e.name], strings.Join(parts, ", "))
	}
	for _, x := range exporterFields {
		n := constName[x.name]
		if base, ok := baseOf[n]; ok {
			fmt.Fprintf(&b, "\t%s: {Level: LevelGPU, Base: %s},\n", n, base)
		} else {
			fmt.Fprintf(&b, "\t%s: {Level: LevelGPU},\n", n)
		}
	}
	b.WriteString("}\n\n")

	fams := linkFamilies(current, constName)
	if len(fams) > 0 {
		b.WriteString("// Per-link field families: the field ID of each link, by link index.\n")
		b.WriteString("var (\n")
		for _, f := range fams {
			fmt.Fprintf(&b, "\t%s = [...]uint16{%s}\n", f.goName, strings.Join(f.members, ", "))
		}
		b.WriteString(")\n")
	}

	code, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format generated code: %w", err)
	}
	return code, nil
}

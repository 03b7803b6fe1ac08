package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
)

// checkCounters loads each counters file and prints every problem and
// warning it has, or "FILE: ok (N fields)". It returns an error when any
// file is bad.
func checkCounters(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("no counters file given")
	}
	bad := 0
	for _, file := range files {
		set, err := counters.Load(file)
		if err != nil {
			bad++
			if _, werr := fmt.Fprintln(w, err.Error()); werr != nil {
				return fmt.Errorf("write report: %w", werr)
			}
			continue
		}
		var b strings.Builder
		for _, warn := range set.Warnings {
			b.WriteString("warning: " + warn + "\n")
		}
		for _, f := range set.Fields {
			if note := deprecationNote(f.Name); note != "" {
				fmt.Fprintf(&b, "warning: %s:%d: %s\n", file, f.Line, note)
			}
		}
		fmt.Fprintf(&b, "%s: ok (%d fields)\n", file, len(set.Fields))
		if _, err := io.WriteString(w, b.String()); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d counters files have problems", bad, len(files))
	}
	return nil
}

// deprecationNote says what DCGM deprecates a field name in favour of, ""
// when it does not. The name stays valid: gpuscope reads it and exports
// the metric under it.
func deprecationNote(name string) string {
	info, ok := counters.Lookup(name)
	if !ok {
		return ""
	}
	renamedIn, supersededIn := "DCGM 4.6", "DCGM 4.6.1"
	if fieldid.DeprecatedInDCGM47(name) {
		renamedIn, supersededIn = "DCGM 4.7", "DCGM 4.7"
	}
	switch {
	case info.Deprecated:
		return fmt.Sprintf("%s is deprecated since %s, which names the field %s; still valid, exported as %s", name, renamedIn, info.Current, name)
	case info.SupersededBy != "":
		return fmt.Sprintf("%s is deprecated since %s in favour of %s (a new field in %s); still valid, in %s", name, supersededIn, info.SupersededBy, info.SupersededUnit, unitOrNone(info.Unit))
	}
	return ""
}

func unitOrNone(u string) string {
	if u == "" {
		return "its own unit"
	}
	return u
}

// sourceSupport is what each registered source says it reads, in the
// order the SOURCES column lists them. DCGM reads every field of the
// catalog.
func sourceSupport() []counters.Support { return source.Supports() }

// supportNames lists the sources `counters list --source` takes.
func supportNames() string {
	var names []string
	for _, s := range sourceSupport() {
		names = append(names, s.Source)
	}
	return source.OneOf(names)
}

// listedField is a catalog field with the sources that serve it.
type listedField struct {
	counters.FieldInfo
	sources []string
	// nvmlNote says why the NVML source does not serve the field, when it
	// says so.
	nvmlNote string
}

func (f listedField) servedBy(source string) bool { return slices.Contains(f.sources, source) }

// listCounters prints the fields an operator can pick from: the described
// DCGM fields and the exporter-side ones, optionally only those one source
// serves. only is "" or a source's name; format is "table" or
// "csv". The csv format is itself a counters file: the everyday fields
// enabled, the others commented out.
func listCounters(w io.Writer, supports []counters.Support, only, format string) error {
	if only != "" && !slices.ContainsFunc(supports, func(s counters.Support) bool { return s.Source == only }) {
		names := make([]string, len(supports))
		for i, s := range supports {
			names[i] = s.Source
		}
		return fmt.Errorf("unknown source %q (want %s)", only, source.OneOf(names))
	}
	var fields []listedField
	for _, f := range counters.All() {
		if f.Legacy || !f.Described() {
			continue
		}
		lf := listedField{FieldInfo: f}
		for _, s := range supports {
			ok, note := s.Serves(f.ID)
			if ok {
				lf.sources = append(lf.sources, s.Source)
			} else if s.Source == "nvml" {
				lf.nvmlNote = note
			}
		}
		// The NVML table also lists what NVML cannot read, with the reason.
		if only != "" && !lf.servedBy(only) && (only != "nvml" || format == "csv") {
			continue
		}
		fields = append(fields, lf)
	}
	var err error
	switch format {
	case "", "table":
		err = writeTable(w, fields, only == "nvml")
	case "csv":
		err = writeCSV(w, fields)
	default:
		return fmt.Errorf("unknown format %q (want table or csv)", format)
	}
	if err != nil {
		return fmt.Errorf("write field list: %w", err)
	}
	return nil
}

func writeTable(w io.Writer, fields []listedField, nvml bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tREPLACES\tID\tTYPE\tUNIT\tDEPRECATED\tSOURCES\t"
	if nvml {
		header += "NVML\t"
	}
	fmt.Fprintln(tw, header+"HELP")
	for _, f := range fields {
		unit := f.Unit
		if unit == "" {
			unit = "-"
		}
		sources := "-"
		if len(f.sources) > 0 {
			sources = strings.Join(f.sources, ",")
		}
		name, replaces := vocabularies(f.FieldInfo)
		deprecated := "-"
		if f.SupersededBy != "" {
			deprecated = "use:" + f.SupersededBy
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t", name, replaces, fieldIDString(f.ID), f.Type, unit, deprecated, sources)
		if nvml {
			row += nvmlStatus(f) + "\t"
		}
		fmt.Fprintln(tw, row+f.Help)
	}
	return tw.Flush()
}

// vocabularies returns the name DCGM 4.6 gives a field and the older names
// it replaces (comma-separated, "-" for none): both are valid in a counters
// file.
func vocabularies(f counters.FieldInfo) (string, string) {
	name := f.Name
	var old []string
	if f.Deprecated {
		name = f.Current
		old = append(old, f.Name)
	}
	if cur, ok := counters.Lookup(name); ok {
		for _, r := range cur.Replaces {
			if !slices.Contains(old, r) {
				old = append(old, r)
			}
		}
	}
	if len(old) == 0 {
		return name, "-"
	}
	return name, strings.Join(old, ",")
}

// fieldIDString shows exporter-side IDs as "-": they are internal and a
// user never writes them.
func fieldIDString(id uint16) string {
	if fieldid.IsExporter(id) {
		return "-"
	}
	return strconv.Itoa(int(id))
}

func nvmlStatus(f listedField) string {
	switch {
	case f.servedBy("nvml"):
		return "yes"
	case f.nvmlNote != "":
		return f.nvmlNote
	}
	return "not read by the NVML source"
}

func writeCSV(w io.Writer, fields []listedField) error {
	var b strings.Builder
	b.WriteString("# gpuscope counters file, from `gpuscope counters list --format csv`.\n")
	b.WriteString("# FIELD, TYPE, HELP[, WATCH INTERVAL[, WINDOW STATS]]\n")
	b.WriteString("# Enabled lines are the everyday set; remove the leading '#' to enable more.\n\n")
	for _, f := range fields {
		if !f.Default {
			b.WriteString("# ")
		}
		fmt.Fprintf(&b, "%s, %s, %s\n", f.Name, f.Type, csvQuote(f.Help))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// csvQuote quotes s when it would otherwise split into more columns.
func csvQuote(s string) string {
	if !strings.ContainsAny(s, ",\"") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

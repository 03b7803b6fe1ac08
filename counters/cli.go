package counters

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Check loads each counters file and prints every problem and warning it
// has, or "FILE: ok (N fields)". It returns an error when any file is bad.
func Check(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("no counters file given")
	}
	bad := 0
	for _, file := range files {
		set, err := Load(file)
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

// List prints the fields an operator can pick from: the described DCGM
// fields and the exporter-side ones, optionally only those one source
// serves. source is "", "dcgm", "nvml" or "sim"; format is "table" or "csv".
// The csv format is itself a counters file: the everyday fields enabled,
// the others commented out.
func List(w io.Writer, source, format string) error {
	var want SourceSet
	if source != "" {
		s, ok := sourceByName(source)
		if !ok {
			return fmt.Errorf("unknown source %q (want dcgm, nvml or sim)", source)
		}
		want = s
	}
	var fields []FieldInfo
	for _, f := range All() {
		if f.Legacy || !f.Described() {
			continue
		}
		// The NVML table also lists what NVML cannot read, with the reason.
		if want != 0 && !f.Sources.Has(want) && (want != SourceNVML || format == "csv") {
			continue
		}
		fields = append(fields, f)
	}
	var err error
	switch format {
	case "", "table":
		err = writeTable(w, fields, want == SourceNVML)
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

func sourceByName(name string) (SourceSet, bool) {
	for _, n := range sourceNames {
		if n.name == name {
			return n.bit, true
		}
	}
	return 0, false
}

func writeTable(w io.Writer, fields []FieldInfo, nvml bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tID\tTYPE\tUNIT\tSOURCES\t"
	if nvml {
		header += "NVML\t"
	}
	fmt.Fprintln(tw, header+"HELP")
	for _, f := range fields {
		unit := f.Unit
		if unit == "" {
			unit = "-"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", f.Name, fieldIDString(f.ID), f.Type, unit, f.Sources)
		if nvml {
			row += nvmlStatus(f) + "\t"
		}
		fmt.Fprintln(tw, row+f.Help)
	}
	return tw.Flush()
}

// fieldIDString shows exporter-side IDs as "-": they are internal and a
// user never writes them.
func fieldIDString(id uint16) string {
	if id >= FirstExporterFieldID {
		return "-"
	}
	return strconv.Itoa(int(id))
}

func nvmlStatus(f FieldInfo) string {
	switch {
	case f.Sources.Has(SourceNVML):
		return "yes"
	case f.NVMLNote != "":
		return f.NVMLNote
	}
	return "not read by the NVML source"
}

func writeCSV(w io.Writer, fields []FieldInfo) error {
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

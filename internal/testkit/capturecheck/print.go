package capturecheck

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes every row, field by field.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tPHASE\tENTITY\tFIELD\tCAPTURE\tGPUSCOPE\tSTATUS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.File, r.Phase, r.Entity, r.Field, r.Capture, r.Gpuscope, r.Status)
	}
	return tw.Flush()
}

// WriteMismatches writes one line per field that differs.
func WriteMismatches(w io.Writer, rows []Row) {
	for _, r := range rows {
		if r.Status == Differ {
			fmt.Fprintf(w, "MISMATCH %s %s %s %s: capture %q, gpuscope %q\n", r.File, r.Phase, r.Entity, r.Field, r.Capture, r.Gpuscope)
		}
	}
}

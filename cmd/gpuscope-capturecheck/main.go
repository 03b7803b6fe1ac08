// Command gpuscope-capturecheck checks gpuscope's NVML source against real
// nvidia-smi captures: it builds an NVML from each capture file, runs the
// source on it and compares every exported field with the capture, in
// dcgm-exporter's units.
//
//	gpuscope-capturecheck FILE...
//
// It prints a field-by-field table, then one line per field that differs,
// and exits 0 when every field agrees, 1 when one differs, 2 on bad input.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpuscope/gpuscope/internal/testkit/capturecheck"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpuscope-capturecheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quiet := fs.Bool("quiet", false, "print only the fields that differ, not the table")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gpuscope-capturecheck [-quiet] FILE...  (captures made by scripts/take-capture.sh)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var rows []capturecheck.Row
	for _, path := range fs.Args() {
		rep, err := capturecheck.CheckFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "gpuscope-capturecheck: %v\n", err)
			return 2
		}
		rows = append(rows, rep.Rows...)
	}
	if !*quiet {
		if err := capturecheck.WriteTable(stdout, rows); err != nil {
			fmt.Fprintf(stderr, "gpuscope-capturecheck: %v\n", err)
			return 2
		}
	}
	capturecheck.WriteMismatches(stderr, rows)
	for _, r := range rows {
		if r.Status == capturecheck.Differ {
			return 1
		}
	}
	fmt.Fprintf(stderr, "gpuscope-capturecheck: every field of %d file(s) agrees\n", fs.NArg())
	return 0
}

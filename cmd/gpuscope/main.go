// Command gpuscope is a high-resolution GPU exporter for Prometheus: it reads
// the counters a CSV file selects from DCGM, NVML or simulated GPUs, and
// serves them with dcgm-exporter's names and labels.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/prometheus/common/version"
	"github.com/urfave/cli/v2"
)

func main() {
	// The live heap is small (a few MB) and steady, so the default GOGC of
	// 100 mostly buys headroom: 50 keeps the resident set of a large node
	// under 40 MiB for a fraction of a percent of a core. GOGC overrides it.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gpuscope:", err)
		os.Exit(exitCode(err))
	}
}

// usageError is a bad command line: an unknown flag or a bad value. It exits
// with 2, as flag parsing conventionally does, and prints one line, not the
// help.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func newApp() *cli.App {
	// Builds outside the Makefile carry no version; --version must still work.
	if version.Version == "" {
		version.Version = "dev"
	}
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintln(c.App.Writer, version.Print("gpuscope"))
	}
	return &cli.App{
		Name:    "gpuscope",
		Usage:   "high-resolution GPU metrics from DCGM and NVML for Prometheus",
		Version: version.Version,
		Description: "gpuscope samples the GPU fields that a counters CSV selects (dcgm-exporter's format, read " +
			"unchanged) in the background, each at its own watch interval, and serves them on /metrics " +
			"with dcgm-exporter's metric names and labels. Every flag can also be set through the " +
			"environment variable shown after it.",
		Flags: append(append(serveFlags(), apiFlags()...), webLimitFlags()...),
		// A mistyped flag gets one line naming it, not 60 lines of help.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usage(fmt.Errorf("%w (see gpuscope --help)", err))
		},
		Action:   serve,
		Commands: []*cli.Command{countersCommand(), profilingCommand(), captureCommand(), topCommand()},
	}
}

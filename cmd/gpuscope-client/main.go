// Command gpuscope-client holds the clients of a running gpuscope: top, a
// live terminal view, and capture, which records traces, charts and CSV. It
// is a binary of its own so that the terminal UI and the chart renderer
// (bubbletea, gonum/plot and their fonts) stay out of the exporter's
// memory; `gpuscope top` and `gpuscope capture` run it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/common/version"
	"github.com/urfave/cli/v2"
)

// helpWidth is the widest line of the help pages, as gpuscope's.
const helpWidth = 120

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gpuscope:", err)
		os.Exit(exitCode(err))
	}
}

func newApp() *cli.App {
	if version.Version == "" {
		version.Version = "dev"
	}
	cli.HelpPrinter = func(w io.Writer, templ string, data interface{}) {
		cli.HelpPrinterCustom(w, templ, data, map[string]interface{}{"wrapAt": func() int { return helpWidth }})
	}
	// A mistyped flag gets one line naming it, not the help.
	onUsage := func(_ *cli.Context, err error, _ bool) error {
		return usage(fmt.Errorf("%w (see gpuscope --help)", err))
	}
	cmds := []*cli.Command{captureCommand(), topCommand()}
	for _, c := range cmds {
		c.OnUsageError = onUsage
	}
	return &cli.App{
		Name:         "gpuscope",
		HelpName:     "gpuscope",
		Usage:        "clients of a running gpuscope: top and capture",
		Version:      version.Version,
		OnUsageError: onUsage,
		Commands:     cmds,
	}
}

// usageError is a bad command line; it exits with 2, as gpuscope's do.
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

func env(names ...string) []string { return names }

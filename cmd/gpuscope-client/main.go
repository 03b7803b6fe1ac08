// Command gpuscope-client holds gpuscope's clients: top, a live terminal
// view, and capture, which records traces, charts and CSV, of a running
// gpuscope; report, a GPU efficiency summary read from Prometheus. It is a
// binary of its own so that the terminal UI and the chart renderer
// (bubbletea, gonum/plot and their fonts) stay out of the exporter's
// memory; `gpuscope top`, `gpuscope capture` and `gpuscope report` run it.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/prometheus/common/version"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
)

// helpWidth is the widest line of the help pages, as gpuscope's.
const helpWidth = 120

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gpuscope:", err)
		os.Exit(exitcode.Of(err))
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
	cmds := []*cli.Command{captureCommand(), reportCommand(), topCommand()}
	for _, c := range cmds {
		c.OnUsageError = onUsage
	}
	return &cli.App{
		Name:         "gpuscope",
		HelpName:     "gpuscope",
		Usage:        "clients of gpuscope: top and capture (of a running exporter), report (from Prometheus)",
		Version:      version.Version,
		OnUsageError: onUsage,
		Commands:     cmds,
	}
}

// usage marks err as a bad command line: one line, no help, exit 2.
func usage(err error) error { return exitcode.Usage(err) }

func env(names ...string) []string { return names }

// Command gpuscope is a high-resolution GPU exporter for Prometheus: it reads
// the counters a CSV file selects from DCGM, NVML or simulated GPUs, and
// serves them with dcgm-exporter's names and labels.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/prometheus/common/version"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/serve/sighup"
)

func main() {
	// Heap profiles are served only with --enable-pprof (serve turns the
	// sampling back on then). Without it, the sampling's record of every
	// sampled call stack would be memory nobody reads.
	runtime.MemProfileRate = 0
	// The live heap is small (a few MB) and steady, so the default GOGC of
	// 100 mostly buys headroom: 50 keeps the resident set of a large node
	// under 40 MiB for a fraction of a percent of a core. GOGC overrides it.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	if err := runApp(newApp(), os.Args); err != nil {
		// A configuration with several problems has one per line; each
		// line carries the prefix, so that logs keep them together.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "gpuscope:", line)
		}
		os.Exit(exitcode.Of(err))
	}
}

// argsKey is where runApp leaves the command line in the app's Metadata, so
// that messages can name a flag as the user typed it.
const argsKey = "args"

func runApp(app *cli.App, args []string) error {
	if app.Metadata == nil {
		app.Metadata = map[string]interface{}{}
	}
	app.Metadata[argsKey] = args
	return app.Run(args)
}

// usage marks err as a bad command line: one line, no help, exit 2.
func usage(err error) error { return exitcode.Usage(err) }

func newApp() *cli.App { return newAppWith(serve) }

// newAppWith is the gpuscope command; its default command checks the
// configuration, then hands it to action.
func newAppWith(action func(context.Context, *config.Config) error) *cli.App {
	// Builds outside the Makefile carry no version; --version must still work.
	if version.Version == "" {
		version.Version = "dev"
	}
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintln(c.App.Writer, version.Print("gpuscope"))
	}
	in := config.Defaults()
	flags := serveFlags(&in)
	return &cli.App{
		Name:    "gpuscope",
		Usage:   "high-resolution GPU metrics from DCGM and NVML for Prometheus",
		Version: version.Version,
		Description: "gpuscope samples the GPU fields that a counters CSV selects (dcgm-exporter's format, read " +
			"unchanged) in the background, each at its own watch interval, and serves them on /metrics " +
			"with dcgm-exporter's metric names and labels. Every flag can also be set through the " +
			"environment variable shown after it.",
		Flags:                 flags,
		CustomAppHelpTemplate: cli.AppHelpTemplate + compatNames(flags),
		// A mistyped flag gets one line naming it, not 60 lines of help.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usage(fmt.Errorf("%w (see gpuscope --help)", err))
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usage(fmt.Errorf("unexpected argument %q; see gpuscope --help", c.Args().First()))
			}
			cfg, err := buildConfig(c, &in)
			if err != nil {
				return usage(err)
			}
			return action(c.Context, cfg)
		},
		Commands: releaseHUP(append([]*cli.Command{countersCommand(), profilingCommand()}, clientCommands()...)...),
	}
}

// buildConfig completes in with the values Destination cannot hold and the
// names the flags were given by, and builds the configuration.
func buildConfig(c *cli.Context, in *config.Input) (*config.Config, error) {
	config.FillSlices(in, c.StringSlice)
	args, _ := c.App.Metadata[argsKey].([]string)
	in.Given = map[string]string{}
	// c.IsSet(name) looks the flag up among all of them, computing every
	// flag's names with a regular expression each time: asked for every
	// flag, it made each parse quadratic in the number of flags. The same
	// answer, once: a flag is set where the command line used one of its
	// names, or where its environment variable set it (f.IsSet).
	used := map[string]bool{}
	for _, n := range c.LocalFlagNames() {
		used[n] = true
	}
	for _, f := range c.App.Flags {
		names := f.Names()
		if f.IsSet() || slices.ContainsFunc(names, func(n string) bool { return used[n] }) {
			in.Given[names[0]] = typedName(args, names)
		}
	}
	return config.Build(*in)
}

// typedName is how messages call a flag given under one of names: by the
// long name the command line last used, else (a one-letter alias, or a
// variable) by the flag's first name.
func typedName(args, names []string) string {
	name := names[0]
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a, _, _ = strings.Cut(strings.TrimLeft(a, "-"), "=")
		if len(a) > 1 && slices.Contains(names, a) {
			name = a
		}
	}
	return "--" + name
}

// releaseHUP gives SIGHUP back its default action in the commands other
// than serving: a terminal's hangup ends them.
func releaseHUP(cmds ...*cli.Command) []*cli.Command {
	for _, c := range cmds {
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			sighup.Release()
			if before != nil {
				return before(ctx)
			}
			return nil
		}
	}
	return cmds
}

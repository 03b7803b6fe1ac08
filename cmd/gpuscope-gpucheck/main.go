// Command gpuscope-gpucheck judges a scrape of gpuscope taken on a GPU
// machine (see internal/client/gpucheck and scripts/gpu-check.sh). It prints one line
// per finding and a summary, and exits 1 when any check fails.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/client/gpucheck"
)

func main() {
	app := &cli.App{
		Name:  "gpuscope-gpucheck",
		Usage: "check a gpuscope scrape from a GPU machine: fields present, values plausible, XID and MIG paths clean",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "metrics", Required: true, Usage: "a /metrics scrape", EnvVars: []string{"GPUCHECK_METRICS"}},
			&cli.StringFlag{Name: "collectors", Required: true, Usage: "the counters file the run used", EnvVars: []string{"GPUCHECK_COLLECTORS"}},
			&cli.StringFlag{Name: "log", Usage: "gpuscope's log of the run", EnvVars: []string{"GPUCHECK_LOG"}},
			&cli.IntFlag{Name: "gpus", Usage: "GPUs the driver lists (0: unknown)", EnvVars: []string{"GPUCHECK_GPUS"}},
			&cli.BoolFlag{Name: "expect-gpm", Usage: "the GPUs are Hopper or later: profiling fields must be served", EnvVars: []string{"GPUCHECK_EXPECT_GPM"}},
			&cli.BoolFlag{Name: "expect-mig", Usage: "MIG is enabled on some GPU", EnvVars: []string{"GPUCHECK_EXPECT_MIG"}},
		},
		Action: run,
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gpuscope-gpucheck:", err)
		os.Exit(1)
	}
}

func run(c *cli.Context) error {
	body, err := os.ReadFile(c.String("metrics"))
	if err != nil {
		return fmt.Errorf("--metrics: %w", err)
	}
	set, err := counters.Load(c.String("collectors"))
	if err != nil {
		return fmt.Errorf("--collectors: %w", err)
	}
	var logText []byte
	if p := c.String("log"); p != "" {
		if logText, err = os.ReadFile(p); err != nil {
			return fmt.Errorf("--log: %w", err)
		}
	}
	rep, err := gpucheck.Check(gpucheck.Input{
		Exposition: body, Counters: set, Log: string(logText),
		GPUs: c.Int("gpus"), ExpectGPM: c.Bool("expect-gpm"), ExpectMIG: c.Bool("expect-mig"),
	})
	if err != nil {
		return fmt.Errorf("%s: %w", c.String("metrics"), err)
	}
	printReport(os.Stdout, rep)
	if rep.Failed() {
		return cli.Exit("", 1)
	}
	return nil
}

func printReport(w io.Writer, rep gpucheck.Report) {
	for _, f := range rep.Findings {
		fmt.Fprintln(w, f)
	}
	fmt.Fprintf(w, "checked %d series, %d fields on %d GPUs: %d failed, %d warnings, %d notes\n",
		rep.Series, rep.Fields, rep.GPUs, rep.Failures(), rep.Warnings(), rep.Notes())
}

// Command gpuscope-gpucheck judges what scripts/gpu-check.sh gathers on a
// GPU machine (see internal/client/gpucheck): a scrape against the counters
// file and nvidia-smi, a soak of repeated scrapes, and a GPU under
// gpuscope-cudaload. It prints one line per finding and a summary, and
// exits 1 when any check fails.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/client/gpucheck"
)

func main() {
	app := &cli.App{
		Name:  "gpuscope-gpucheck",
		Usage: "check a gpuscope scrape from a GPU machine: fields present, values plausible and equal to nvidia-smi's, XID and MIG paths clean",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "metrics", Usage: "a /metrics scrape", EnvVars: []string{"GPUCHECK_METRICS"}},
			&cli.StringFlag{Name: "collectors", Usage: "the counters file the run used", EnvVars: []string{"GPUCHECK_COLLECTORS"}},
			&cli.StringFlag{Name: "log", Usage: "gpuscope's log of the run", EnvVars: []string{"GPUCHECK_LOG"}},
			&cli.IntFlag{Name: "gpus", Usage: "GPUs the driver lists (0: unknown)", EnvVars: []string{"GPUCHECK_GPUS"}},
			&cli.BoolFlag{Name: "expect-gpm", Usage: "the GPUs are Hopper or later: profiling fields must be served", EnvVars: []string{"GPUCHECK_EXPECT_GPM"}},
			&cli.BoolFlag{Name: "expect-mig", Usage: "MIG is enabled on some GPU", EnvVars: []string{"GPUCHECK_EXPECT_MIG"}},
			&cli.StringFlag{Name: "nvidia-smi-before", Usage: "nvidia-smi --query-gpu=$(gpuscope-gpucheck smi-query) --format=csv, taken just before the scrape", EnvVars: []string{"GPUCHECK_NVIDIA_SMI_BEFORE"}},
			&cli.StringFlag{Name: "nvidia-smi-after", Usage: "the same, taken just after the scrape", EnvVars: []string{"GPUCHECK_NVIDIA_SMI_AFTER"}},
		},
		Action: run,
		Commands: []*cli.Command{
			{Name: "smi-query", Usage: "print the --query-gpu list the cross-check needs", Action: func(*cli.Context) error {
				fmt.Println(gpucheck.SMIQuery())
				return nil
			}},
			{Name: "soak", Usage: "judge scrapes taken one after another: no failed read, no lost GPU, flat resident set", ArgsUsage: "SCRAPE...", Action: soak},
			{Name: "load", Usage: "judge a GPU under gpuscope-cudaload", Action: load, Flags: []cli.Flag{
				&cli.StringFlag{Name: "idle", Required: true, Usage: "a scrape taken before the load", EnvVars: []string{"GPUCHECK_LOAD_IDLE"}},
				&cli.StringSliceFlag{Name: "busy", Required: true, Usage: "scrapes taken during the load (repeat the flag)", EnvVars: []string{"GPUCHECK_LOAD_BUSY"}},
				&cli.StringFlag{Name: "summary", Required: true, Usage: "the output of gpuscope-cudaload (its last line is the JSON summary)", EnvVars: []string{"GPUCHECK_LOAD_SUMMARY"}},
				&cli.StringFlag{Name: "gpu", Value: "0", Usage: "the loaded GPU's gpu label", EnvVars: []string{"GPUCHECK_LOAD_GPU"}},
				&cli.BoolFlag{Name: "expect-gpm", Usage: "Hopper or later: SM activity and PCIe bytes must be served", EnvVars: []string{"GPUCHECK_EXPECT_GPM"}},
			}},
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gpuscope-gpucheck:", err)
		os.Exit(1)
	}
}

func run(c *cli.Context) error {
	for _, f := range []string{"metrics", "collectors"} {
		if c.String(f) == "" {
			return fmt.Errorf("--%s is required", f)
		}
	}
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
	in := gpucheck.Input{
		Exposition: body, Counters: set, Log: string(logText),
		GPUs: c.Int("gpus"), ExpectGPM: c.Bool("expect-gpm"), ExpectMIG: c.Bool("expect-mig"),
	}
	if in.SMIBefore, err = readSMI(c, "nvidia-smi-before"); err != nil {
		return err
	}
	if in.SMIAfter, err = readSMI(c, "nvidia-smi-after"); err != nil {
		return err
	}
	rep, err := gpucheck.Check(in)
	if err != nil {
		return fmt.Errorf("%s: %w", c.String("metrics"), err)
	}
	printSMI(os.Stdout, rep.SMI)
	return finish(rep)
}

func readSMI(c *cli.Context, flag string) (gpucheck.SMI, error) {
	p := c.String(flag)
	if p == "" {
		return nil, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	smi, err := gpucheck.ParseSMI(b)
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %w", flag, p, err)
	}
	return smi, nil
}

func soak(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("soak: name the scrapes, in the order they were taken")
	}
	var scrapes [][]byte
	for _, p := range c.Args().Slice() {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		scrapes = append(scrapes, b)
	}
	rep, err := gpucheck.Soak(scrapes)
	if err != nil {
		return err
	}
	return finish(rep)
}

func load(c *cli.Context) error {
	idle, err := os.ReadFile(c.String("idle"))
	if err != nil {
		return fmt.Errorf("--idle: %w", err)
	}
	in := gpucheck.LoadInput{Idle: idle, GPU: c.String("gpu"), ExpectGPM: c.Bool("expect-gpm")}
	for _, p := range c.StringSlice("busy") {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("--busy: %w", err)
		}
		in.Busy = append(in.Busy, b)
	}
	out, err := os.ReadFile(c.String("summary"))
	if err != nil {
		return fmt.Errorf("--summary: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &in.Load); err != nil {
		return fmt.Errorf("--summary %s: the last line is not gpuscope-cudaload's JSON summary: %w", c.String("summary"), err)
	}
	rep, err := gpucheck.CheckLoad(in)
	if err != nil {
		return err
	}
	return finish(rep)
}

func finish(rep gpucheck.Report) error {
	printReport(os.Stdout, rep)
	if rep.Failed() {
		return cli.Exit("", 1)
	}
	return nil
}

func printSMI(w io.Writer, rows []gpucheck.SMIRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "%-4s %-40s %-24s %-24s %s\n", "GPU", "FIELD", "NVIDIA-SMI", "GPUSCOPE", "")
	for _, r := range rows {
		res := "ok"
		if !r.OK {
			res = "DIFFERS"
		}
		fmt.Fprintf(w, "%-4s %-40s %-24s %-24s %s\n", r.GPU, r.Field, r.SMI, orNone(r.GPUScope), res)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

func printReport(w io.Writer, rep gpucheck.Report) {
	for _, f := range rep.Findings {
		fmt.Fprintln(w, f)
	}
	fmt.Fprintf(w, "checked %d series, %d fields on %d GPUs: %d failed, %d warnings, %d notes\n",
		rep.Series, rep.Fields, rep.GPUs, rep.Failures(), rep.Warnings(), rep.Notes())
}

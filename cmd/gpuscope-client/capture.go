package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/prometheus/common/version"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/client/capture"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

func captureCommand() *cli.Command {
	return &cli.Command{
		Name:  "capture",
		Usage: "record a running gpuscope's raw samples as a Chrome trace (Perfetto), a chart (svg, png) or CSV",
		Description: "capture reads /api/v1/stream for --duration, or with --duration 0 what the server's rings hold (its last " +
			"--window), and writes it to -o. The trace has one process per GPU and one counter track per field, with " +
			"timestamps in microseconds since the Unix epoch as PyTorch's profiler writes them, so both open side by side " +
			"in Perfetto or chrome://tracing.",
		Flags: append(clientFlags(),
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Value: 0, EnvVars: env("GPUSCOPE_CAPTURE_DURATION"),
				Usage: "how long to record; 0 takes what the server's rings hold now"},
			&cli.StringSliceFlag{Name: "field", EnvVars: env("GPUSCOPE_CAPTURE_FIELDS"),
				Usage: "field to record (repeat, or a comma list; default: the step fields the server serves)"},
			&cli.IntSliceFlag{Name: "gpu", EnvVars: env("GPUSCOPE_CAPTURE_GPUS"), Usage: "GPU index to record (repeat; default: all)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, EnvVars: env("GPUSCOPE_CAPTURE_OUTPUT"), Required: true,
				Usage: "file to write; - for standard output (json and csv)"},
			&cli.StringFlag{Name: "format", EnvVars: env("GPUSCOPE_CAPTURE_FORMAT"),
				Usage: "json (Chrome trace), csv, svg or png; default: from the output's extension, else json"},
		),
		Action: runCapture,
	}
}

func captureFormat(format, output string) (string, error) {
	if format == "" {
		switch strings.ToLower(filepath.Ext(output)) {
		case ".csv":
			format = "csv"
		case ".svg":
			format = "svg"
		case ".png":
			format = "png"
		default:
			format = "json"
		}
	}
	switch format {
	case "json", "csv", "svg", "png":
	default:
		return "", fmt.Errorf("--format %q: use json, csv, svg or png", format)
	}
	if output == "-" && (format == "svg" || format == "png") {
		return "", fmt.Errorf("--format %s: write charts to a file (-o chart.%s)", format, format)
	}
	return format, nil
}

func runCapture(c *cli.Context) error {
	if c.NArg() > 0 {
		return usage(fmt.Errorf("capture: unexpected argument %q", c.Args().First()))
	}
	if c.Duration("duration") < 0 {
		return usage(fmt.Errorf("--duration %s: must not be negative", c.Duration("duration")))
	}
	output := c.String("output")
	format, err := captureFormat(c.String("format"), output)
	if err != nil {
		return usage(err)
	}
	client, err := clientFrom(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fields := splitList(c.StringSlice("field"))
	if len(fields) == 0 {
		served, refused, err := client.Served(ctx, stepFields)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		if len(served) == 0 {
			return fmt.Errorf("capture: %s serves none of the step fields (%s); name fields with --field", client.Base, strings.Join(stepFields, ", "))
		}
		for _, f := range sortedKeys(refused) {
			fmt.Fprintf(c.App.ErrWriter, "capture: leaving out %s: %s\n", f, refused[f])
		}
		fields = served
	}
	if len(fields) > sampleapi.MaxFields {
		return usage(fmt.Errorf("--field: %d fields, at most %d", len(fields), sampleapi.MaxFields))
	}
	q := sampleapi.Query{Fields: fields, GPUs: c.IntSlice("gpu")}
	if d := c.Duration("duration"); d > 0 {
		fmt.Fprintf(c.App.ErrWriter, "capture: recording %d fields from %s for %s\n", len(fields), client.Base, d)
	}
	capt, err := capture.Record(ctx, client, q, c.Duration("duration"))
	if errors.Is(err, capture.ErrTooLarge) {
		err = fmt.Errorf("%w (--duration, --field, --gpu)", err)
	}
	if err != nil && capt == nil {
		return fmt.Errorf("capture: %w", err)
	}
	if err != nil {
		// Keep what was recorded before the server went away or the
		// user stopped.
		fmt.Fprintf(c.App.ErrWriter, "capture: stopped early: %v\n", err)
	}
	if capt.Len() == 0 {
		return fmt.Errorf("capture: no sample recorded from %s (a field without a WINDOW STATS column keeps samples "+
			"from the first request that names it: run again, or record with --duration)", client.Base)
	}
	// A signal that ended the recording is spent; a new one ends the
	// writing, which a chart of many samples can make long.
	stop()
	wctx, wstop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer wstop()
	done := make(chan error, 1)
	go func() {
		done <- writeCapture(capt, output, format, c.App.Writer, capture.Meta{Version: version.Version, Address: client.Base})
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("capture: writing %s: %w", output, err)
		}
	case <-wctx.Done():
		return fmt.Errorf("capture: interrupted while writing %s; it is incomplete", output)
	}
	fmt.Fprintf(c.App.ErrWriter, "capture: wrote %d samples of %d fields on %d entities to %s (%s)\n",
		capt.Len(), len(capt.Fields), len(capt.Entities), output, format)
	return nil
}

func writeCapture(capt *capture.Capture, output, format string, stdout io.Writer, meta capture.Meta) (err error) {
	w := stdout
	if output != "-" {
		f, err := os.Create(output)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}()
		w = f
	}
	switch format {
	case "csv":
		return capture.WriteCSV(w, capt)
	case "svg", "png":
		return capture.WriteChart(w, capt, format)
	}
	return capture.WriteTrace(w, capt, meta)
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
	"github.com/gpuscope/gpuscope/internal/client/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "the GPU efficiency summary of a pod, a namespace or an HPC job over a time range, from Prometheus",
		Description: "report reads Prometheus' HTTP API (no access to the nodes) and prints the GPUs and GPU-hours a pod, " +
			"namespace or HPC job held, its SM and tensor activity (mean and p99), bound classes and stalls (with --insight " +
			"on the exporter), memory peak, energy and idle GPUs, as a table or as compact JSON to store with the job " +
			"(docs/report.md). Exit status: 0 summary printed, 1 Prometheus down or a query refused, 2 bad command line, " +
			"3 the selection held no GPU in the range.",
		Flags:  reportFlags(),
		Action: runReport,
	}
}

func reportFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "prometheus.url", EnvVars: env("GPUSCOPE_PROMETHEUS_URL"),
			Usage: "Prometheus (or a Thanos or Mimir query frontend) that scrapes gpuscope: http://host:9090[/prefix]"},
		&cli.StringFlag{Name: "prometheus.username", EnvVars: env("GPUSCOPE_PROMETHEUS_USERNAME"), Usage: "basic-auth user"},
		&cli.StringFlag{Name: "prometheus.password", EnvVars: env("GPUSCOPE_PROMETHEUS_PASSWORD"), Usage: "basic-auth password"},
		&cli.StringFlag{Name: "prometheus.bearer-token-file", EnvVars: env("GPUSCOPE_PROMETHEUS_BEARER_TOKEN_FILE"),
			Usage: "file holding a bearer token to send"},
		&cli.StringFlag{Name: "namespace", EnvVars: env("GPUSCOPE_REPORT_NAMESPACE"), Usage: "the namespace to report on (with --pod: its pod)"},
		&cli.StringFlag{Name: "pod", EnvVars: env("GPUSCOPE_REPORT_POD"), Usage: "the pod to report on; needs --namespace"},
		&cli.StringFlag{Name: "hpc-job", EnvVars: env("GPUSCOPE_REPORT_HPC_JOB"), Usage: "the HPC job ID to report on (the hpc_job label; in a Slurm epilog, $SLURM_JOB_ID)"},
		&cli.StringFlag{Name: "start", EnvVars: env("GPUSCOPE_REPORT_START"), Usage: "start of the range: RFC 3339 or Unix seconds (default: --since before --end)"},
		&cli.StringFlag{Name: "end", EnvVars: env("GPUSCOPE_REPORT_END"), Usage: "end of the range: RFC 3339 or Unix seconds (default: now)"},
		&cli.DurationFlag{Name: "since", Value: time.Hour, EnvVars: env("GPUSCOPE_REPORT_SINCE"), Usage: "length of the range when --start is not given"},
		&cli.StringFlag{Name: "format", Value: "table", EnvVars: env("GPUSCOPE_REPORT_FORMAT"), Usage: "table, or json (one compact line to store with the job)"},
		&cli.DurationFlag{Name: "resolution", EnvVars: env("GPUSCOPE_REPORT_RESOLUTION"),
			Usage: "step at which the time each GPU is held is counted (default: a 2000th of the range, 1s to 5m)"},
		&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, EnvVars: env("GPUSCOPE_REPORT_TIMEOUT"), Usage: "limit on each query to Prometheus"},
	}
}

func runReport(c *cli.Context) error {
	if c.NArg() > 0 {
		return usage(fmt.Errorf("report: unexpected argument %q", c.Args().First()))
	}
	opts, err := reportOptions(c, time.Now())
	if err != nil {
		return usage(err)
	}
	client, err := reportClient(c)
	if err != nil {
		return err
	}
	format := c.String("format")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := report.Build(ctx, client, opts)
	switch {
	case errors.Is(err, report.ErrNotFound):
		return exitcode.NotFound(fmt.Errorf("report: %w", err))
	case err != nil:
		return fmt.Errorf("report: %w", err)
	}
	if format == "json" {
		return sum.WriteJSON(c.App.Writer)
	}
	return sum.WriteTable(c.App.Writer)
}

// reportOptions reads the selection, the range and the format, naming the
// flag of any bad value.
func reportOptions(c *cli.Context, now time.Time) (report.Options, error) {
	o := report.Options{
		Selection:  report.Selection{Namespace: c.String("namespace"), Pod: c.String("pod"), HPCJob: c.String("hpc-job")},
		Resolution: c.Duration("resolution"),
	}
	if err := o.Selection.Validate(); err != nil {
		return o, fmt.Errorf("--namespace, --pod, --hpc-job: %w", err)
	}
	if f := c.String("format"); f != "table" && f != "json" {
		return o, fmt.Errorf("--format %q: use table or json", f)
	}
	var err error
	o.End = now
	if s := c.String("end"); s != "" {
		if o.End, err = parseTime(s); err != nil {
			return o, fmt.Errorf("--end: %w", err)
		}
	}
	o.Start = o.End.Add(-c.Duration("since"))
	if s := c.String("start"); s != "" {
		if o.Start, err = parseTime(s); err != nil {
			return o, fmt.Errorf("--start: %w", err)
		}
	} else if c.Duration("since") <= 0 {
		return o, fmt.Errorf("--since %s: must be positive", c.Duration("since"))
	}
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("--start, --end, --resolution: %w", err)
	}
	return o, nil
}

// parseTime reads RFC 3339 or Unix seconds (with a fraction).
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		return time.UnixMilli(int64(secs * 1000)), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-05-01T12:00:00Z) or Unix seconds", s)
	}
	return t, nil
}

func reportClient(c *cli.Context) (*report.Client, error) {
	if c.String("prometheus.url") == "" {
		return nil, usage(errors.New("--prometheus.url (or GPUSCOPE_PROMETHEUS_URL): the Prometheus to read is not given"))
	}
	base, err := report.ParseURL(c.String("prometheus.url"))
	if err != nil {
		return nil, usage(fmt.Errorf("--prometheus.url: %w", err))
	}
	cl := &report.Client{Base: base, Username: c.String("prometheus.username"), Password: c.String("prometheus.password"),
		Timeout: c.Duration("timeout")}
	if f := c.String("prometheus.bearer-token-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, usage(fmt.Errorf("--prometheus.bearer-token-file: %w", err))
		}
		cl.BearerToken = strings.TrimSpace(string(b))
	}
	return cl, nil
}

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/cmd/internal/exitcode"
	"github.com/gpuscope/gpuscope/internal/client/report"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	app.ExitErrHandler = func(*cli.Context, error) {}
	err := app.Run(append([]string{"gpuscope"}, args...))
	return out.String(), err
}

// TestHelpIsReadable: each client's help names it as users call it
// (gpuscope top, gpuscope capture) and fits the width of gpuscope's.
func TestHelpIsReadable(t *testing.T) {
	for cmd, flag := range map[string]string{"capture": "--address", "top": "--address", "report": "--prometheus.url"} {
		t.Run(cmd, func(t *testing.T) {
			out, err := run(t, cmd, "--help")
			require.NoError(t, err)
			assert.Contains(t, out, "gpuscope "+cmd)
			assert.Contains(t, out, flag)
			for i, line := range strings.Split(out, "\n") {
				assert.LessOrEqual(t, len(line), helpWidth, "line %d: %q", i+1, line)
			}
		})
	}
}

func TestBadArgumentsExitTwo(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"top", "extra"}, `top: unexpected argument "extra"`},
		{[]string{"capture", "-o", "x.json", "--duration", "-1s"}, "--duration -1s: must not be negative"},
		{[]string{"top", "--no-such-flag"}, "no-such-flag"},
		{[]string{"report", "--hpc-job", "1"}, "--prometheus.url (or GPUSCOPE_PROMETHEUS_URL): the Prometheus to read is not given"},
		{[]string{"report", "--prometheus.url", "prom:9090", "--hpc-job", "1"}, "--prometheus.url: URL \"prom:9090\": want http://host:port"},
		{[]string{"report", "--prometheus.url", "http://p:9090"}, "--namespace, --pod, --hpc-job: give a namespace (and a pod) or an HPC job"},
		{[]string{"report", "--prometheus.url", "http://p:9090", "--hpc-job", "1", "--namespace", "ml"}, "not both"},
		{[]string{"report", "--prometheus.url", "http://p:9090", "--hpc-job", "1", "--start", "yesterday"}, `--start: "yesterday": want RFC 3339`},
		{[]string{"report", "--prometheus.url", "http://p:9090", "--hpc-job", "1", "--since", "0s"}, "--since 0s: must be positive"},
		{[]string{"report", "--prometheus.url", "http://p:9090", "--hpc-job", "1", "--format", "yaml"}, `--format "yaml": use table or json`},
		{[]string{"report", "--prometheus.url", "http://p:9090", "--hpc-job", "1", "--start", "2026-01-02T00:00:00Z", "--end", "2026-01-01T00:00:00Z"},
			"the start must be before the end"},
		{[]string{"report", "--prometheus.url", "http://p:9090", "--hpc-job", "1", "--prometheus.bearer-token-file", "/no/such/file"},
			"--prometheus.bearer-token-file: open /no/such/file"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Equal(t, 2, exitcode.Of(err))
		})
	}
}

// The range of a report: --start and --end in either form, --since before
// --end (now by default), each also from its variable.
func TestReportRange(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		args       []string
		env        map[string]string
		start, end time.Time
	}{
		{nil, nil, now.Add(-time.Hour), now},
		{[]string{"--since", "30m"}, nil, now.Add(-30 * time.Minute), now},
		{[]string{"--start", "1777622400", "--end", "1777626000.5"}, nil, time.Unix(1777622400, 0), time.UnixMilli(1777626000500)},
		{[]string{"--start", "2026-05-01T10:00:00Z"}, nil, time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), now},
		{nil, map[string]string{"GPUSCOPE_REPORT_START": "2026-05-01T11:00:00Z", "GPUSCOPE_REPORT_END": "2026-05-01T11:30:00Z"},
			time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 11, 30, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var got report.Options
			app := &cli.App{Flags: reportFlags(), Action: func(c *cli.Context) error {
				var err error
				got, err = reportOptions(c, now)
				return err
			}}
			require.NoError(t, app.Run(append([]string{"report", "--hpc-job", "1"}, tt.args...)))
			assert.True(t, tt.start.Equal(got.Start), "start %s, want %s", got.Start, tt.start)
			assert.True(t, tt.end.Equal(got.End), "end %s, want %s", got.End, tt.end)
		})
	}
}

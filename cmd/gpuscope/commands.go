package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/client/sameorigin"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
	"github.com/gpuscope/gpuscope/internal/serve/server"
)

func countersCommand() *cli.Command {
	return &cli.Command{
		Name:  "counters",
		Usage: "check counters files, list the fields gpuscope knows, migrate a file between DCGM's vocabularies",
		Subcommands: []*cli.Command{
			{
				Name:      "check",
				Usage:     "check counters CSV files and print every problem with its line",
				ArgsUsage: "FILE...",
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return fmt.Errorf("counters check: give at least one FILE")
					}
					if err := checkCounters(c.App.Writer, c.Args().Slice()); err != nil {
						return cli.Exit("", 1)
					}
					return nil
				},
			},
			{
				Name:  "list",
				Usage: "print the field catalog: name, ID, type, unit, which sources serve it, help",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "source", Usage: "only what this source can serve: " + supportNames() + " (empty: all)", EnvVars: env("GPUSCOPE_LIST_SOURCE")},
					&cli.StringFlag{Name: "format", Value: "table", Usage: "table, or csv to seed a counters file", EnvVars: env("GPUSCOPE_LIST_FORMAT")},
				},
				Action: func(c *cli.Context) error {
					return listCounters(c.App.Writer, sourceSupport(), c.String("source"), c.String("format"))
				},
			},
			{
				Name:      "migrate",
				Usage:     "rewrite a counters file into DCGM 4.6's names and base units (new) or back (legacy); what changes unit goes to stderr",
				ArgsUsage: "FILE",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "to", Required: true, Usage: "new (dcgm-exporter 4.9 and later) or legacy (4.8 and earlier)", EnvVars: env("GPUSCOPE_MIGRATE_TO")},
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the result here (empty: standard output)", EnvVars: env("GPUSCOPE_MIGRATE_OUTPUT")},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("counters migrate: give one FILE")
					}
					return migrateCounters(c.App.Writer, c.App.ErrWriter, c.Args().First(), c.String("to"), c.String("output"))
				},
			},
		},
	}
}

func profilingCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:9400", EnvVars: env("GPUSCOPE_URL"), Usage: "base URL of the running gpuscope"},
		&cli.StringFlag{Name: "username", EnvVars: env("GPUSCOPE_USERNAME"), Usage: "basic-auth user, when the web config asks for one"},
		&cli.StringFlag{Name: "password", EnvVars: env("GPUSCOPE_PASSWORD"), Usage: "basic-auth password"},
		&cli.StringFlag{Name: "tls.ca-file", EnvVars: env("GPUSCOPE_TLS_CA_FILE"), Usage: "PEM file of the CA that signed the exporter's certificate (a self-signed one, say)"},
		&cli.BoolFlag{Name: "tls.insecure-skip-verify", EnvVars: env("GPUSCOPE_TLS_INSECURE_SKIP_VERIFY"), Usage: "accept any certificate from the exporter; for tests only"},
	}
	action := func(verb string) cli.ActionFunc {
		return func(c *cli.Context) error {
			client, err := profilingClient(c.String("tls.ca-file"), c.Bool("tls.insecure-skip-verify"))
			if err != nil {
				return fmt.Errorf("profiling %s: %w", verb, err)
			}
			return postProfiling(c.App.Writer, client, c.String("url"), verb, c.String("username"), c.String("password"))
		}
	}
	return &cli.Command{
		Name:  "profiling",
		Usage: "release or retake DCGM's profiling lock on a running gpuscope, so Nsight can run on the node",
		Subcommands: []*cli.Command{
			{Name: "pause", Usage: "release the profiling fields", Flags: flags, Action: action("pause")},
			{Name: "resume", Usage: "watch the profiling fields again", Flags: flags, Action: action("resume")},
		},
	}
}

// profilingClient trusts the system's CAs, plus caFile when given.
func profilingClient(caFile string, insecure bool) (*http.Client, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls.ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls.ca-file %s: no PEM certificate in it", caFile)
		}
		tlsCfg.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	return &http.Client{Timeout: 30 * time.Second, Transport: tr, CheckRedirect: sameorigin.CheckRedirect}, nil
}

func postProfiling(w io.Writer, client *http.Client, base, verb, user, pass string) error {
	endpoint := strings.TrimRight(base, "/") + "/api/v1/profiling/" + verb
	req, err := http.NewRequest(http.MethodPost, endpoint, nil)
	if err != nil {
		return fmt.Errorf("profiling %s: %w", verb, redactErr(err, endpoint))
	}
	// The exporter refuses requests a browser could forge without it.
	req.Header.Set(server.ProfilingRequestHeader, "1")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := client.Do(req)
	if re, ok := sameorigin.AsRedirect(err); ok {
		return fmt.Errorf("profiling %s: %w", verb, re)
	}
	if err != nil {
		return fmt.Errorf("profiling %s: %w", verb, redactErr(err, endpoint))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	// What the server sends reaches a terminal: nothing it could act on.
	text := sampleapi.Printable(strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD")))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling %s: %s answered %s: %s", verb, resp.Request.URL.Redacted(), sampleapi.Printable(resp.Status), text)
	}
	fmt.Fprintln(w, text)
	return nil
}

// redactErr writes err with endpoint's password, if any, redacted.
func redactErr(err error, endpoint string) error {
	u, perr := url.Parse(endpoint)
	if perr != nil || u.User == nil {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), endpoint, u.Redacted()))
}

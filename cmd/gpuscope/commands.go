package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/counters"
)

func countersCommand() *cli.Command {
	return &cli.Command{
		Name:  "counters",
		Usage: "check counters files and list the fields gpuscope knows",
		Subcommands: []*cli.Command{
			{
				Name:      "check",
				Usage:     "check counters CSV files and print every problem with its line",
				ArgsUsage: "FILE...",
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return fmt.Errorf("counters check: give at least one FILE")
					}
					if err := counters.Check(c.App.Writer, c.Args().Slice()); err != nil {
						return cli.Exit("", 1)
					}
					return nil
				},
			},
			{
				Name:  "list",
				Usage: "print the field catalog: name, ID, type, unit, which sources serve it, help",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "source", Usage: "only what this source can serve: dcgm, nvml or sim (empty: all)", EnvVars: env("GPUSCOPE_LIST_SOURCE")},
					&cli.StringFlag{Name: "format", Value: "table", Usage: "table, or csv to seed a counters file", EnvVars: env("GPUSCOPE_LIST_FORMAT")},
				},
				Action: func(c *cli.Context) error {
					return counters.List(c.App.Writer, c.String("source"), c.String("format"))
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
	}
	action := func(verb string) cli.ActionFunc {
		return func(c *cli.Context) error {
			return postProfiling(c.App.Writer, c.String("url"), verb, c.String("username"), c.String("password"))
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

func postProfiling(w io.Writer, base, verb, user, pass string) error {
	url := strings.TrimRight(base, "/") + "/api/v1/profiling/" + verb
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return fmt.Errorf("profiling %s: %w", verb, err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("profiling %s: %w", verb, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling %s: %s answered %s: %s", verb, url, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprint(w, string(body))
	return nil
}

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/serve/server"
)

const flagAPIMaxStreams = "api-max-streams"

// apiFlags are the serve flags of the raw-sample API.
func apiFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: flagAPIMaxStreams, Value: server.DefaultMaxStreams, EnvVars: env("GPUSCOPE_API_MAX_STREAMS"),
			Usage: "most /api/v1/stream clients (gpuscope top, gpuscope capture) served at once; more are refused with 429"},
	}
}

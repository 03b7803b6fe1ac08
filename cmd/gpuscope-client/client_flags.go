package main

import (
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/client/top"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// stepFields are what `capture` records by default: the fields `top`
// shows, the activity of a training step, its traffic, power, heat and
// memory.
var stepFields = top.Fields

// clientFlags say where a running gpuscope is, for the commands that read
// its raw-sample API (top, capture). GPUSCOPE_URL, GPUSCOPE_USERNAME and
// GPUSCOPE_PASSWORD are shared with `gpuscope profiling`, whose flag for
// the same URL is --url and whose TLS flags differ.
func clientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "address", Value: "localhost:9400", EnvVars: env("GPUSCOPE_URL"),
			Usage: "the running gpuscope: host:port or a URL (https:// with TLS); works through kubectl port-forward"},
		&cli.StringFlag{Name: "username", EnvVars: env("GPUSCOPE_USERNAME"), Usage: "basic-auth user, when the web config asks for one"},
		&cli.StringFlag{Name: "password", EnvVars: env("GPUSCOPE_PASSWORD"), Usage: "basic-auth password"},
		&cli.BoolFlag{Name: "insecure-skip-verify", EnvVars: env("GPUSCOPE_INSECURE_SKIP_VERIFY"), Usage: "accept any TLS certificate (a self-signed one)"},
	}
}

func clientFrom(c *cli.Context) (*sampleapi.Client, error) {
	base, err := sampleapi.BaseURL(c.String("address"))
	if err != nil {
		return nil, usage(err)
	}
	return &sampleapi.Client{Base: base, Username: c.String("username"), Password: c.String("password"),
		InsecureSkipVerify: c.Bool("insecure-skip-verify")}, nil
}

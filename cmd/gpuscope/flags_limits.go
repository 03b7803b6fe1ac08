package main

import (
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/server"
)

// Flags of the server's protections and grace periods, kept apart from
// the dcgm-exporter-compatible set.
const (
	flagEnableProfilingAPI = "web.enable-profiling-api"
	flagMaxConnections     = "web.max-connections"
	flagK8sLabelGrace      = "kubernetes.label-grace"
)

func webLimitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: flagEnableProfilingAPI, EnvVars: env("GPUSCOPE_WEB_ENABLE_PROFILING_API"),
			Usage: "serve POST /api/v1/profiling/{pause,resume} (for `gpuscope profiling`); off by default, like Prometheus' --web.enable-admin-api: protect it with a web config"},
		&cli.IntFlag{Name: flagMaxConnections, Value: server.DefaultMaxConnections, EnvVars: env("GPUSCOPE_WEB_MAX_CONNECTIONS"),
			Usage: "connections served at once; the excess is answered 503 and closed"},
		&cli.DurationFlag{Name: flagK8sLabelGrace, EnvVars: env("GPUSCOPE_KUBERNETES_LABEL_GRACE"),
			Usage: "how long the last pod labels stay on the series while the kubelet does not answer (0: three --kubernetes.refresh-interval)"},
	}
}

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/internal/serve/server"
	"github.com/gpuscope/gpuscope/source/dcgm"
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

// validateEnums checks the source and the DCGM connection flags, whatever
// the source (setupLogging checks the log flags): a typo in --dcgm.mode must not
// quietly serve NVML and probe DCGM forever in auto mode.
func validateEnums(c *cli.Context) error {
	switch v := c.String(flagSource); v {
	case "auto", "dcgm", "nvml", "sim":
	default:
		return fmt.Errorf("--%s %q: use auto, dcgm, nvml or sim", flagSource, v)
	}
	cfg := dcgm.Config{Mode: dcgm.Mode(c.String(flagDCGMMode)), RemoteHostengine: c.String(flagDCGMRemote)}
	if c.String(flagDCGMRemote) != "" && !c.IsSet(flagDCGMMode) {
		cfg.Mode = dcgm.ModeRemote
	}
	return cfg.Validate()
}

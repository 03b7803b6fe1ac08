package config

import (
	"time"
)

// dcgm-exporter's flags added after its 4.8.2 release. Names, variables and
// defaults are those of its pkg/cmd/app.go (commit 0048f87c and the newer
// copy listed in cmd/gpuscope/testdata/dcgm-exporter-flags-newest.tsv).
const (
	FlagConfigFile             = "config-file"
	FlagWebReadTimeout         = "web-read-timeout"
	FlagWebWriteTimeout        = "web-write-timeout"
	FlagMaxConcurrentScrapes   = "max-concurrent-scrapes"
	FlagEnableExporterMetrics  = "enable-exporter-metrics"
	FlagHealthRequireGPUs      = "health-require-gpus"
	FlagWatchMaxKeepAge        = "watch-max-keep-age"
	FlagWatchMaxKeepSamples    = "watch-max-keep-samples"
	FlagContainerLabels        = "container-labels"
	FlagContainerRuntimeSocket = "container-runtime-socket"
)

// dcgm-exporter's defaults of those flags (internal/pkg/appconfig/types.go:
// DefaultWatchMaxKeepAge, DefaultWatchMaxSamples).
const (
	DCGMExporterWatchMaxKeepAge = 10 * time.Minute
)

func exporter48Options(in *Input) []Option {
	return []Option{
		{Name: FlagConfigFile, Category: CatCollection, Compat: []string{"DCGM_EXPORTER_CONFIG_FILE"},
			Value: String(&in.ConfigFile, ""),
			Usage: "dcgm-exporter's YAML configuration file (version 1 or 2); flags and variables given explicitly override it, as there. docs/upgrading.md lists the keys read"},
		{Name: FlagWebReadTimeout, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_WEB_READ_TIMEOUT"},
			Value: Duration(&in.Web.ReadTimeout, 0),
			Usage: "longest time to read a whole HTTP request (0: only the headers are bounded, by 10s)",
			Check: func(c *Config) error {
				return problem(c.Web.ReadTimeout < 0, "%s: use 0 or a positive Go duration", c.Web.ReadTimeout)
			}},
		{Name: FlagWebWriteTimeout, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_WEB_WRITE_TIMEOUT"},
			Value: Duration(&in.Web.WriteTimeout, 0),
			Usage: "longest time to render and write an HTTP response (0: 1m); the stream API lifts it for its own responses",
			Check: func(c *Config) error {
				return problem(c.Web.WriteTimeout < 0, "%s: use 0 or a positive Go duration", c.Web.WriteTimeout)
			}},
		{Name: FlagMaxConcurrentScrapes, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_MAX_CONCURRENT_SCRAPES"},
			Value: Int(&in.Web.MaxConcurrentScrapes, 0),
			Usage: "most /metrics requests served at once; more are answered 503 (0: no limit beyond --web-max-connections; the admitted ones share one rendering)",
			Check: func(c *Config) error {
				return problem(c.Web.MaxConcurrentScrapes < 0, "%d: use 0 (no limit) or more", c.Web.MaxConcurrentScrapes)
			}},
		{Name: FlagEnableExporterMetrics, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_ENABLE_EXPORTER_METRICS"},
			Value: Bool(&in.EnableExporterMetrics, false),
			Usage: "serve the Go runtime's (go_*) and the process's (process_*) families; gpuscope serves them unless --web-disable-exporter-metrics is given"},
		{Name: FlagHealthRequireGPUs, Category: CatWeb, Compat: []string{"DCGM_EXPORTER_HEALTH_REQUIRE_GPUS"},
			Value: Bool(&in.HealthRequireGPUs, false),
			Usage: "answer /health with 503 while the source shows no GPU or MIG instance, so that a liveness probe restarts an exporter that started before the driver"},
		{Name: FlagWatchMaxKeepAge, Category: CatSources, Compat: []string{"DCGM_EXPORTER_WATCH_MAX_KEEP_AGE"},
			Value: Duration(&in.WatchMaxKeepAge, DCGMExporterWatchMaxKeepAge),
			Usage: "dcgm-exporter's retention of DCGM's field watches; accepted and checked, but gpuscope keeps its own bounded sample rings (--window), so it changes nothing",
			Check: func(c *Config) error {
				return problem(c.Collection.WatchMaxKeepAge < 0, "%s: use 0s or a positive Go duration", c.Collection.WatchMaxKeepAge)
			}},
		{Name: FlagWatchMaxKeepSamples, Category: CatSources, Compat: []string{"DCGM_EXPORTER_WATCH_MAX_KEEP_SAMPLES"},
			Value: Int64(&in.WatchMaxKeepSamples, 0),
			Usage: "dcgm-exporter's sample-count retention of DCGM's field watches; accepted and checked, changes nothing here (see --watch-max-keep-age)",
			Check: func(c *Config) error {
				return problem(c.Collection.WatchMaxKeepSamples < 0, "%d: use 0 or more samples", c.Collection.WatchMaxKeepSamples)
			}},
		{Name: FlagContainerLabels, Category: CatKubernetes, Compat: []string{"DCGM_EXPORTER_CONTAINER_LABELS"},
			Value: Bool(&in.ContainerLabels, false),
			Usage: "dcgm-exporter's container-runtime labels outside Kubernetes; refused when set: gpuscope does not query container runtimes (use --kubernetes or --hpc-job-mapping-dir)"},
		{Name: FlagContainerRuntimeSocket, Category: CatKubernetes, Compat: []string{"DCGM_CONTAINER_RUNTIME_SOCKET"},
			Value: String(&in.ContainerRuntimeSocket, ""),
			Usage: "dcgm-exporter's container runtime socket for --container-labels; refused when set, as that flag is"},
	}
}

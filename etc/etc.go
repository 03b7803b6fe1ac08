// Package etc embeds the counters files gpuscope ships, so the binary runs
// with the everyday set when no --collectors file is given.
package etc

import (
	"bytes"
	_ "embed"
	"io"
)

var (
	//go:embed default-counters.csv
	defaultCounters []byte
	//go:embed dcp-metrics.csv
	dcpMetrics []byte
)

// DefaultCounters returns etc/default-counters.csv, the everyday set.
func DefaultCounters() io.Reader { return bytes.NewReader(defaultCounters) }

// DCPMetrics returns etc/dcp-metrics.csv, the profiling set.
func DCPMetrics() io.Reader { return bytes.NewReader(dcpMetrics) }

// Package integration runs the real engine over the real sources, each fed by
// its fake backend (go-nvml's mock servers, our fake DCGM host engine, the
// seeded simulator), and checks what a scrape shows.
package integration

import (
	"bytes"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/etc"
	"github.com/gpuscope/gpuscope/source/sourcetest"
)

func newClock() *sourcetest.Clock { return sourcetest.NewClock(time.Unix(1_750_000_000, 0)) }

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func defaultSet(t testing.TB) *counters.Set {
	t.Helper()
	set, err := counters.Parse("etc/default-counters.csv", etc.DefaultCounters())
	require.NoError(t, err)
	return set
}

func dcpSet(t testing.TB) *counters.Set {
	t.Helper()
	set, err := counters.Parse("etc/dcp-metrics.csv", etc.DCPMetrics())
	require.NoError(t, err)
	return set
}

func parse(t testing.TB, exposition []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(exposition))
	require.NoError(t, err, "exposition must parse")
	return mfs
}

// labelNames returns the sorted label names of a family's first series.
func labelNames(mf *dto.MetricFamily) string {
	if len(mf.Metric) == 0 {
		return ""
	}
	var names []string
	for _, l := range mf.Metric[0].Label {
		names = append(names, l.GetName())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func gpusOf(mf *dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	if mf == nil {
		return out
	}
	for _, m := range mf.Metric {
		for _, l := range m.Label {
			if l.GetName() == "gpu" {
				out[l.GetValue()] = true
			}
		}
	}
	return out
}

func gaugeOf(m *dto.Metric) float64 {
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Untyped.GetValue()
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

package fieldspage

import (
	"fmt"
	"strings"

	"github.com/gpuscope/gpuscope/counters"
)

// countersCSV writes the selection as a counters file, with the watch
// interval and window statistics columns where a field sets them.
func countersCSV(fields []counters.Field) string {
	var b strings.Builder
	b.WriteString("# gpuscope counters file, chosen on the /fields page.\n")
	b.WriteString("# FIELD, TYPE, HELP[, WATCH INTERVAL[, WINDOW STATS]]\n")
	for _, f := range fields {
		fmt.Fprintf(&b, "%s, %s, %s", f.Name, f.Type, csvQuote(f.Help))
		if f.Interval > 0 || len(f.Stats) > 0 {
			b.WriteString(", ")
			if f.Interval > 0 {
				b.WriteString(f.Interval.String())
			}
		}
		if len(f.Stats) > 0 {
			names := make([]string, len(f.Stats))
			for i, st := range f.Stats {
				names[i] = st.String()
			}
			b.WriteString(", " + strings.Join(names, " "))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// csvQuote quotes s when it would otherwise split into more columns.
func csvQuote(s string) string {
	if !strings.ContainsAny(s, ",\"") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// configMapName and configMapKey are the ConfigMap the Helm chart mounts
// (release gpuscope): applying this one over it reaches the pod, which
// reloads the file without a restart.
const (
	configMapName = "gpuscope-counters"
	configMapKey  = "counters.csv"
)

// configMap wraps the counters file in a Kubernetes ConfigMap.
func configMap(csv string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + configMapName + "\ndata:\n  " +
		configMapKey + ": |\n" + indent(csv, "    ")
}

// helmValues puts the counters file in the chart's counters.csv value.
func helmValues(csv string) string {
	return "counters:\n  csv: |\n" + indent(csv, "    ")
}

func indent(s, by string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(by + l)
		}
	}
	return b.String()
}

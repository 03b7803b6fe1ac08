package scenarios

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// recording is what a Prometheus scraping the exporter at every step would
// have stored of the families the rules read: one value (or nothing) per
// step for each series.
type recording struct {
	steps int
	// series are keyed by the series as the exposition writes it, labels
	// in the exporter's order, which stays the same from scrape to scrape.
	series map[string][]string // series -> value per step, "" when absent
	target string              // the target's labels, as Prometheus adds them
}

// client answers the exporter's requests; a move of 30 s of sampling takes
// milliseconds, so a minute is only reached by a hung binary. It asks for
// the exposition uncompressed: the series are the same, and gzip on both
// ends was a fifth of a recording's work.
var client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableCompression: true}}

// advance moves the binary's manual clock by step and waits for the move's
// collections, which the answer says are done.
func advance(t *testing.T, base string, step time.Duration) {
	t.Helper()
	resp, err := client.Post(base+"/api/v1/sim/advance?by="+step.String(), "application/json", nil)
	if err != nil {
		t.Fatalf("advancing the clock: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("advancing the clock: %s: %s", resp.Status, body)
	}
}

// scrape reads /metrics in the text format, as Debian's Prometheus asks for
// it.
func scrape(t *testing.T, base string) []byte {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scraping: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping: %s %v", resp.Status, err)
	}
	return body
}

// record scrapes the binary at the start and after each of steps moves of
// step, keeping the families keep accepts. Every series gets the target's
// labels (job, instance), as Prometheus adds them, and up is written as
// Prometheus writes it for a target that answers.
func record(t *testing.T, base string, steps int, step time.Duration, target map[string]string, keep func(string) bool) *recording {
	t.Helper()
	r := &recording{steps: steps + 1, series: map[string][]string{}, target: labelPairs(target)}
	for i := 0; i <= steps; i++ {
		if i > 0 {
			advance(t, base, step)
		}
		if err := r.add(i, scrape(t, base), keep); err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		r.set(i, "up", "1")
	}
	return r
}

func (r *recording) set(i int, series, value string) {
	vals := r.series[series]
	if vals == nil {
		vals = make([]string, r.steps)
		r.series[series] = vals
	}
	vals[i] = value
}

// add stores the samples of one scrape at step i, of the families keep
// accepts. Each sample line is the series, as Prometheus identifies it,
// and its value; gpuscope writes no timestamps. The lines of the other
// families are passed over unparsed: most of a scrape is families no rule
// reads.
func (r *recording) add(i int, body []byte, keep func(string) bool) error {
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if end := bytes.IndexAny(line, "{ "); end > 0 && !keep(familyOf(string(line[:end]))) {
			continue
		}
		series, value, err := splitSample(string(line))
		if err != nil {
			return err
		}
		r.set(i, series, value)
	}
	return nil
}

// splitSample splits a sample line of the text format into the series (the
// name and its labels, whose quoted values may hold spaces and braces) and
// the value.
func splitSample(line string) (string, string, error) {
	end := strings.IndexAny(line, "{ ")
	if end < 0 {
		return "", "", fmt.Errorf("no value: %q", line)
	}
	if line[end] == '{' {
		var err error
		if end, err = labelsEnd(line, end); err != nil {
			return "", "", err
		}
	}
	fields := strings.Fields(line[end:])
	if len(fields) != 1 {
		return "", "", fmt.Errorf("want one value and no timestamp: %q", line)
	}
	return line[:end], fields[0], nil
}

// labelsEnd is where the labels that open at open end, past their '}'.
func labelsEnd(line string, open int) (int, error) {
	inQuote := false
	for i := open + 1; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case c == '}' && !inQuote:
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated labels: %q", line)
}

// familyOf is the family a sample's name belongs to: a histogram's and a
// summary's series carry a suffix their family lacks. keep accepts a
// family by any of those names.
func familyOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// promSeries writes a recorded series in promtool's notation, with the
// target's labels: the text format escapes label values as PromQL does.
func (r *recording) promSeries(series string) string {
	name, labels, ok := strings.Cut(series, "{")
	labels = strings.TrimSuffix(labels, "}")
	if !ok || labels == "" {
		return name + "{" + r.target + "}"
	}
	return name + "{" + r.target + "," + labels + "}"
}

// values writes a series' values in promtool's notation: a value per step,
// "stale" at the first step a series is missing after it was there (the
// staleness marker Prometheus writes then), "_" for the other gaps.
func values(vals []string) string {
	out := make([]string, len(vals))
	for i, v := range vals {
		switch {
		case v == "+Inf":
			out[i] = "Inf"
		case v != "":
			out[i] = v
		case i > 0 && vals[i-1] != "":
			out[i] = "stale"
		default:
			out[i] = "_"
		}
	}
	return strings.Join(out, " ")
}

// labelPairs writes labels in PromQL's notation, sorted.
func labelPairs(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return strings.Join(parts, ",")
}

var identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// readBy returns whether rules that read the names in texts read a family:
// by its own name, or by one of the series a histogram or a summary makes.
func readBy(texts ...string) func(string) bool {
	names := map[string]bool{}
	for _, text := range texts {
		for _, n := range identifier.FindAllString(text, -1) {
			names[n] = true
		}
	}
	return func(family string) bool {
		return names[family] || names[family+"_bucket"] || names[family+"_sum"] || names[family+"_count"]
	}
}

// describe lists the series of a recording, for the log.
func (r *recording) describe() string {
	keys := make([]string, 0, len(r.series))
	for k := range r.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Sprintf("%d series over %d scrapes, e.g. %s", len(keys), r.steps, strings.Join(keys[:min(3, len(keys))], ", "))
}

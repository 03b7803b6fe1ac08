// Package cost says what a selection of counters costs Prometheus on a node:
// series, bytes per scrape and samples per second. It reads them from a
// text exposition, and models a field's cost from the label sets the
// exposition shows, so that a field not exported yet can be priced too. The
// budget test (test/budget) and the /fields page both count with it.
package cost

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Series is one sample line of a text exposition.
type Series struct {
	Name   string
	Labels map[string]string
	// Value is the sample's value as written.
	Value string
	// Bytes is the line's length with its newline.
	Bytes int
}

// Family is what one metric family, or a sum of them, costs.
type Family struct {
	Series int `json:"series"`
	// Bytes counts the sample lines and the HELP and TYPE lines.
	Bytes int `json:"bytes"`
}

// Add returns the sum of f and g.
func (f Family) Add(g Family) Family {
	return Family{Series: f.Series + g.Series, Bytes: f.Bytes + g.Bytes}
}

// Exposition is a parsed text exposition.
type Exposition struct {
	// Series are the sample lines kept (those drop did not match).
	Series []Series
	// Bytes is the size of the whole body, dropped families included: a
	// metric_relabel_configs rule drops series after the scrape.
	Bytes int
	// Families holds the cost of each kept family by name.
	Families map[string]Family
}

// Parse reads a text exposition. drop, when not nil, names the families a
// relabel rule would drop: they are left out of Series and Families.
func Parse(body []byte, drop func(name string) bool) (Exposition, error) {
	x := Exposition{Bytes: len(body), Families: map[string]Family{}}
	for i, raw := range bytes.SplitAfter(body, []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		line := strings.TrimSuffix(string(raw), "\n")
		if line == "" {
			continue
		}
		if line[0] == '#' {
			if name := commentFamily(line); name != "" && (drop == nil || !drop(name)) {
				f := x.Families[name]
				f.Bytes += len(raw)
				x.Families[name] = f
			}
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return x, fmt.Errorf("exposition line %d %q: %w", i+1, line, err)
		}
		if drop != nil && drop(s.Name) {
			continue
		}
		s.Bytes = len(raw)
		x.Series = append(x.Series, s)
		f := x.Families[s.Name]
		f.Series++
		f.Bytes += len(raw)
		x.Families[s.Name] = f
	}
	return x, nil
}

// commentFamily is the family a "# HELP name ..." or "# TYPE name ..." line
// speaks of, or "" for any other comment.
func commentFamily(line string) string {
	parts := strings.SplitN(line, " ", 4)
	if len(parts) < 3 || parts[0] != "#" || (parts[1] != "HELP" && parts[1] != "TYPE") {
		return ""
	}
	return parts[2]
}

func parseLine(line string) (Series, error) {
	s := Series{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.Name = line[:i]
	if line[i] == ' ' {
		s.Value = firstWord(line[i+1:])
		return s, nil
	}
	rest := line[i+1:]
	for {
		if strings.HasPrefix(rest, "}") {
			s.Value = firstWord(rest[1:])
			return s, nil
		}
		eq := strings.Index(rest, `="`)
		if eq <= 0 {
			return s, fmt.Errorf("bad label at %q", rest)
		}
		name := rest[:eq]
		rest = rest[eq+2:]
		var v strings.Builder
		j := 0
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' && j+1 < len(rest) {
				j++
			}
			v.WriteByte(rest[j])
		}
		if j == len(rest) {
			return s, fmt.Errorf("unterminated value of %s", name)
		}
		s.Labels[name] = v.String()
		rest = strings.TrimPrefix(rest[j+1:], ",")
	}
}

// firstWord is the value of a sample line's tail, without its timestamp.
func firstWord(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// Scrape is the interval the page and the budget table price samples at,
// a common Prometheus scrape interval.
const Scrape = 15 * time.Second

// SamplesPerSecond is what series cost a Prometheus server that scrapes
// them every scrape interval.
func SamplesPerSecond(series int, scrape time.Duration) float64 {
	if scrape <= 0 {
		return 0
	}
	return float64(series) / scrape.Seconds()
}

// Package rulesubset writes the part of Prometheus rule files that decides
// what some alerts and expressions answer: those alerting rules and every
// recording rule they read, directly or through other recording rules. A
// promtool test that asserts only those answers then evaluates only the
// rules it needs; the others (recording rules for dashboards and reports,
// alerts it does not name) cannot change them.
package rulesubset

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// ruleFile is a rule file, as much of it as Write reads; the rest of each
// group and rule is kept as it is.
type ruleFile struct {
	Groups []map[string]any `yaml:"groups"`
}

// identifier matches the names an expression may read. It matches label
// names and words in strings too: a rule kept for those is kept in vain,
// never left out wrongly.
var identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// alertSeries are the series Prometheus writes for the alerting rules: an
// expression that reads one reads every alert.
var alertSeries = []string{"ALERTS", "ALERTS_FOR_STATE"}

// Write writes into dir, under each file's own base name (files must not
// share one), the rules of files that the alerts named and the expressions
// read, and returns the paths, one per file, in their order. Each rule
// group keeps its settings (interval, labels) and the order of its rules; a
// group left with no rule is left out. Where the expressions or a kept rule
// read ALERTS, every alerting rule is kept.
func Write(files, alerts, exprs []string, dir string) ([]string, error) {
	docs, err := read(files)
	if err != nil {
		return nil, err
	}
	keep := needed(docs, alerts, exprs)
	var out []string
	for i, f := range files {
		var groups []map[string]any
		for _, g := range docs[i].Groups {
			var kept []any
			for _, r := range rules(g) {
				if keep[ruleName(r)] {
					kept = append(kept, r)
				}
			}
			if len(kept) > 0 {
				g["rules"] = kept
				groups = append(groups, g)
			}
		}
		b, err := yaml.Marshal(ruleFile{Groups: groups})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		path := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

// read parses the rule files.
func read(files []string) ([]ruleFile, error) {
	docs := make([]ruleFile, len(files))
	seen := map[string]string{}
	for i, f := range files {
		if other, ok := seen[filepath.Base(f)]; ok {
			return nil, fmt.Errorf("%s and %s share a name; Write keeps each file's name", other, f)
		}
		seen[filepath.Base(f)] = f
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(b, &docs[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return docs, nil
}

// ruleName names a rule by its kind and name: "record NAME" or "alert NAME".
func ruleName(r any) string {
	if name := field(r, "record"); name != "" {
		return "record " + name
	}
	return "alert " + field(r, "alert")
}

// needed is the set of rules (ruleName) that the alerts named and the
// expressions read, and what those read in turn.
func needed(docs []ruleFile, alerts, exprs []string) map[string]bool {
	exprsOf := map[string][]string{} // by ruleName
	var allAlerts []string
	for _, d := range docs {
		for _, g := range d.Groups {
			for _, r := range rules(g) {
				name := ruleName(r)
				if field(r, "alert") != "" && exprsOf[name] == nil {
					allAlerts = append(allAlerts, name)
				}
				exprsOf[name] = append(exprsOf[name], field(r, "expr"))
			}
		}
	}
	keep := map[string]bool{}
	var pending []string // expressions whose reads are not yet kept
	add := func(name string) {
		if !keep[name] {
			keep[name] = true
			pending = append(pending, exprsOf[name]...)
		}
	}
	for _, a := range alerts {
		add("alert " + a)
	}
	pending = append(pending, exprs...)
	for len(pending) > 0 {
		reads := map[string]bool{}
		for _, e := range pending {
			for _, n := range identifier.FindAllString(e, -1) {
				reads[n] = true
			}
		}
		pending = nil
		for n := range reads {
			if exprsOf["record "+n] != nil {
				add("record " + n)
			}
		}
		if slices.ContainsFunc(alertSeries, func(s string) bool { return reads[s] }) {
			for _, a := range allAlerts {
				add(a)
			}
		}
	}
	return keep
}

func rules(g map[string]any) []any {
	rs, _ := g["rules"].([]any)
	return rs
}

func field(rule any, key string) string {
	m, _ := rule.(map[string]any)
	s, _ := m[key].(string)
	return s
}

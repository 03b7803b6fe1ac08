package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ruleInterval is the evaluation interval of the rules in a fleet run: a
// range over a recorded series reads one sample per interval, and so does
// the subquery that replaces it.
const ruleInterval = "15s"

// readRules returns the expression of every recording rule of a rules file.
func readRules(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = strings.TrimSpace(r.Expr)
			}
		}
	}
	return out, nil
}

// readRuleGroups returns the group of every recording rule of a rules file.
func readRuleGroups(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rf struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Record string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = g.Name
			}
		}
	}
	return out, nil
}

// noRawGroups are the rule groups whose series have no raw-series version
// worth timing, with the reason the report gives.
var noRawGroups = map[string]string{
	"gpuscope.accounting": "none: per-minute accounts (each minute against the value before it, up to an hour back)",
	"gpuscope.cost":       "none: per-minute accounts times the recorded prices",
	"gpuscope.efficiency": "none: reads the day's highest SM clock, recorded hourly",
}

// inputSeries are recorded names the rules read but do not record: the
// prices per GPU-hour, which the chart records from its values
// (prometheusRule.pricePerGPUHour). A raw-series version reads them as
// they are.
var inputSeries = map[string]bool{
	"model:gpuscope_price_per_gpu_hour:value": true,
}

// noRaw says why a query that reads a rule of noRawGroups has no raw-series
// version, or "" when it has one.
func noRaw(expr string, groups map[string]string) string {
	for _, m := range recordedSelector.FindAllStringSubmatch(expr, -1) {
		name, _, _ := strings.Cut(m[0], "{")
		if why, ok := noRawGroups[groups[name]]; ok {
			return why
		}
	}
	return ""
}

// recordedSelector matches a selector of a recorded series (its name holds
// a colon, which no raw series, label or function name does), with its
// matchers.
var recordedSelector = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*:[A-Za-z0-9_:]*(\{[^}]*\})?`)

// rawSelector matches a selector of a series gpuscope exports.
var rawSelector = regexp.MustCompile(`(DCGM_[A-Za-z0-9_]+|gpuscope_[A-Za-z0-9_]+)(\{([^}]*)\})?`)

// expandRules rewrites an expression that reads recording rules into the
// one that reads the raw series they are computed from: each recorded
// selector becomes its rule's expression, recursively, with the selector's
// matchers carried onto every raw selector inside. It is what the
// dashboard would cost without the rules.
func expandRules(expr string, rules map[string]string) (string, error) {
	return expand(expr, rules, 0)
}

func expand(expr string, rules map[string]string, depth int) (string, error) {
	if depth > 10 {
		return "", fmt.Errorf("recording rules nest deeper than 10 levels at %q", expr)
	}
	var b strings.Builder
	last := 0
	for _, m := range recordedSelector.FindAllStringSubmatchIndex(expr, -1) {
		start, end := m[0], m[1]
		// A token inside a longer word or duration is not a selector.
		if start > 0 && isWordByte(expr[start-1]) {
			continue
		}
		name := expr[start:end]
		matchers := ""
		if m[2] >= 0 {
			name = expr[start:m[2]]
			matchers = strings.TrimSpace(expr[m[2]+1 : m[3]-1])
		}
		if inputSeries[name] {
			continue
		}
		ruleExpr, ok := rules[name]
		if !ok {
			return "", fmt.Errorf("%s is not recorded by any rule", name)
		}
		inner, err := expand(ruleExpr, rules, depth+1)
		if err != nil {
			return "", err
		}
		b.WriteString(expr[last:start])
		b.WriteString("(" + withMatchers(inner, matchers) + ")")
		last = end
		// A range over a recorded series becomes a subquery over its
		// expression, at the rules' evaluation interval.
		if end < len(expr) && expr[end] == '[' {
			if j := strings.IndexByte(expr[end:], ']'); j > 0 && !strings.Contains(expr[end:end+j], ":") {
				b.WriteString(expr[end:end+j] + ":" + ruleInterval + "]")
				last = end + j + 1
			}
		}
	}
	b.WriteString(expr[last:])
	return b.String(), nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// withMatchers adds matchers to every raw selector of expr; a name inside
// a recorded one (an inputSeries left as it is) is not a raw selector.
func withMatchers(expr, matchers string) string {
	if matchers == "" {
		return expr
	}
	var b strings.Builder
	last := 0
	for _, m := range rawSelector.FindAllStringSubmatchIndex(expr, -1) {
		if m[0] > 0 && isWordByte(expr[m[0]-1]) {
			continue
		}
		b.WriteString(expr[last:m[0]])
		name := expr[m[2]:m[3]]
		inner := ""
		if m[6] >= 0 {
			inner = strings.TrimSpace(expr[m[6]:m[7]])
		}
		if inner != "" {
			b.WriteString(name + "{" + inner + ", " + matchers + "}")
		} else {
			b.WriteString(name + "{" + matchers + "}")
		}
		last = m[1]
	}
	b.WriteString(expr[last:])
	return b.String()
}

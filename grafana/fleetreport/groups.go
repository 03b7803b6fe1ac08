package main

import (
	"fmt"
	"sort"
	"strings"
)

// groupBudget is the share of its interval a rule group's evaluation may
// take: a group near its interval misses evaluations as soon as the
// machine is busier, and the per-minute accounts lose those minutes.
const groupBudget = 1.0 / 3

// groupFigures adds, for every rule group Prometheus evaluates, its
// interval, its last and slowest evaluation of the last 5 minutes, and
// whether the slowest stayed under a third of the interval.
func (r *queryReport) groupFigures() error {
	last, err := r.byGroup(`prometheus_rule_group_last_duration_seconds{job="prometheus"}`)
	if err != nil {
		return err
	}
	slowest, err := r.byGroup(`max_over_time(prometheus_rule_group_last_duration_seconds{job="prometheus"}[5m])`)
	if err != nil {
		return err
	}
	interval, err := r.byGroup(`prometheus_rule_group_interval_seconds{job="prometheus"}`)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(interval))
	for n := range interval {
		names = append(names, n)
	}
	sort.Strings(names)
	var over []string
	for _, n := range names {
		share := slowest[n] / interval[n]
		verdict := "under a third"
		if share >= groupBudget {
			verdict = "OVER A THIRD"
			over = append(over, n)
		}
		r.t.add(fmt.Sprintf("rule group %s, every %.0f s: last / slowest evaluation over 5m", n, interval[n]), "",
			fmt.Sprintf("%.4f s / %.4f s (%.1f%% of the interval, %s)", last[n], slowest[n], 100*share, verdict), "", "")
	}
	all := "yes"
	if len(over) > 0 {
		all = "no: " + strings.Join(over, ", ")
	}
	r.t.add("every rule group's slowest evaluation under a third of its interval", "", all, "", "")
	return nil
}

// byGroup answers a query by rule group: the file's base name and the
// group's, from Prometheus' rule_group label ("/path/file.yml;group").
func (r *queryReport) byGroup(expr string) (map[string]float64, error) {
	s, err := r.prom.query(expr, true, r.at, 0)
	if err != nil {
		return nil, fmt.Errorf("rule group figures: %w", err)
	}
	out := map[string]float64{}
	for _, x := range s {
		if len(x.values) == 0 {
			continue
		}
		out[groupName(x.metric["rule_group"])] = x.values[0]
	}
	return out, nil
}

// groupName shortens Prometheus' "/path/to/file.yml;group" to
// "file.yml;group".
func groupName(ruleGroup string) string {
	file, group, ok := strings.Cut(ruleGroup, ";")
	if !ok {
		return ruleGroup
	}
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	return file + ";" + group
}

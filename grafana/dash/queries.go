package dash

import (
	"encoding/json"
	"fmt"
)

// Query is one PromQL expression of a dashboard panel.
type Query struct {
	Panel   string
	RefID   string
	Expr    string
	Instant bool
}

// Variable is one query variable of a dashboard; Regex, when set, picks
// each value out of a query_result line, as Grafana does.
type Variable struct {
	Name  string
	Query string
	// AllValue is what the variable's "All" option selects, "" when it has
	// none: Grafana selects it when the query finds no value (a single
	// cluster whose series carry no cluster label).
	AllValue string
	Regex    string
}

type rawDashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			RefID   string `json:"refId"`
			Expr    string `json:"expr"`
			Instant bool   `json:"instant"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Type       string `json:"type"`
			Name       string `json:"name"`
			Query      any    `json:"query"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
			Regex      string `json:"regex"`
		} `json:"list"`
	} `json:"templating"`
}

// Extract reads the PromQL of every panel target and query variable of a
// dashboard's JSON, so that tests can run them against a real Prometheus.
func Extract(raw []byte) ([]Query, []Variable, error) {
	var d rawDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, fmt.Errorf("decoding dashboard JSON: %w", err)
	}
	var qs []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			if t.Expr == "" {
				return nil, nil, fmt.Errorf("panel %q target %s: empty expr", p.Title, t.RefID)
			}
			qs = append(qs, Query{Panel: p.Title, RefID: t.RefID, Expr: t.Expr, Instant: t.Instant})
		}
	}
	var vs []Variable
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		s, ok := v.Query.(string)
		if !ok || s == "" {
			return nil, nil, fmt.Errorf("variable %q: query is not a string", v.Name)
		}
		all := ""
		if v.IncludeAll {
			all = v.AllValue
		}
		vs = append(vs, Variable{Name: v.Name, Query: s, AllValue: all, Regex: v.Regex})
	}
	return qs, vs, nil
}

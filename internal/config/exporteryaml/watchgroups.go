package exporteryaml

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/gpuscope/gpuscope/counters"
)

// WatchGroup is one group of fields at its own interval.
type WatchGroup struct {
	Name     string
	Interval time.Duration
	// Patterns are field names or glob patterns (path.Match), matched
	// against the names the counters file writes.
	Patterns []string
	// Where is the file, line and key, for messages.
	Where string
}

// WatchGroups are a file's groups, in its order.
type WatchGroups []WatchGroup

// Apply gives each line of set that a group matches the group's interval,
// as dcgm-exporter partitions its watches (its README, "Use
// collection.watchGroups ..."): a field two groups match, or a group that
// matches no field, is an error; the others keep the default interval. A
// line that gives its own interval keeps it: it is the more specific.
func (gs WatchGroups) Apply(set *counters.Set) error {
	if len(gs) == 0 {
		return nil
	}
	matched := make([]bool, len(gs))
	for i := range set.Fields {
		f := &set.Fields[i]
		owner := -1
		for gi, g := range gs {
			if !g.matches(f.Name) {
				continue
			}
			if owner >= 0 {
				return fmt.Errorf("%s: %s (line %d of %s) is also in watch group %q: a field may be in one group only",
					g.Where, f.Name, f.Line, set.File, gs[owner].Name)
			}
			owner, matched[gi] = gi, true
		}
		if owner >= 0 && f.Interval == 0 {
			f.Interval = gs[owner].Interval
		}
	}
	for gi, g := range gs {
		if !matched[gi] {
			return fmt.Errorf("%s: watch group %q matches no field of %s (%s)", g.Where, g.Name, set.File, strings.Join(g.Patterns, ", "))
		}
	}
	return nil
}

func (g WatchGroup) matches(name string) bool {
	for _, p := range g.Patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

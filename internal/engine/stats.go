package engine

import (
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine/window"
)

type statsView struct{ window.Stats }

func (s statsView) get(st counters.Stat) float64 {
	switch st {
	case counters.StatMin:
		return s.Min
	case counters.StatMax:
		return s.Max
	case counters.StatAvg:
		return s.Avg
	case counters.StatP50:
		return s.P50
	case counters.StatP90:
		return s.P90
	case counters.StatP99:
		return s.P99
	}
	return 0
}

package engine

import (
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine/window"
)

type statsView struct{ window.Stats }

func (s *statsView) get(st counters.Stat) float64 {
	if i := st.Index(); i >= 0 {
		return s.Of(i)
	}
	return 0
}

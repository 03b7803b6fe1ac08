package auto

import (
	"fmt"

	"github.com/gpuscope/gpuscope/source"
)

// Name is the auto source's name, as --source spells it.
const Name = "auto"

func init() {
	source.Register(source.Kind{Name: Name, Usage: "auto (DCGM, else NVML)", Open: open})
}

// open serves the registered DCGM source when it connects and the NVML one
// otherwise.
func open(env source.Env) (source.Source, error) {
	a, err := New(func() (source.Source, error) { return env.Open(DCGM) }, func() (source.Source, error) { return env.Open(NVML) }, env.Log)
	if err != nil {
		return nil, fmt.Errorf("%w; to try gpuscope without a GPU, use --source=sim", err)
	}
	return a, nil
}

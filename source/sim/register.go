package sim

import "github.com/gpuscope/gpuscope/source"

// Name is the sim source's name, as --source spells it.
const Name = "sim"

func init() {
	source.Register(source.Kind{Name: Name, Usage: "sim (simulated GPUs)", Support: Support, Open: open})
}

// open opens the simulated node of env.Settings[Name] (a Config), or the
// default one.
func open(env source.Env) (source.Source, error) {
	c, ok := env.Settings[Name].(Config)
	if !ok {
		c = DefaultConfig()
		c.Hostname, c.BindUnbindPoll = env.Hostname, env.BindUnbindPoll
	}
	s, err := New(c)
	if err != nil {
		return nil, err
	}
	return s, nil
}

package nvml

import "github.com/gpuscope/gpuscope/source"

// Name is the NVML source's name, as --source spells it.
const Name = "nvml"

func init() {
	source.Register(source.Kind{Name: Name, Support: Support, Open: openSource})
}

// openSource opens the NVML source with the settings every source shares.
func openSource(env source.Env) (source.Source, error) {
	s, err := New(Config{Hostname: env.Hostname, Logger: env.Log.WithField("source", Name), BindUnbindPoll: env.BindUnbindPoll})
	if err != nil {
		return nil, err
	}
	return s, nil
}

package godcgm

import (
	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
)

// Settings are the DCGM source's own settings, env.Settings[dcgm.Name]:
// the source's and the production client's.
type Settings struct {
	Source dcgm.Config
	// HostEngineLogLevel and AcceptFakeGPUs are the Client's.
	HostEngineLogLevel string
	AcceptFakeGPUs     bool
}

// The DCGM source registers here, beside the client it runs on in
// production.
func init() {
	source.Register(source.Kind{Name: dcgm.Name, Support: dcgm.Support, Open: open})
}

// open opens the DCGM source over go-dcgm with env.Settings[dcgm.Name]
// (Settings), or the shared settings alone.
func open(env source.Env) (source.Source, error) {
	st, ok := env.Settings[dcgm.Name].(Settings)
	if !ok {
		st.Source = dcgm.Config{Window: env.Window, Log: env.Log.WithField("source", dcgm.Name), BindUnbindPoll: env.BindUnbindPoll}
	}
	client := New()
	client.HostEngineLogLevel, client.AcceptFakeGPUs = st.HostEngineLogLevel, st.AcceptFakeGPUs
	s, err := dcgm.New(WithMIGUUIDs(client, gonvml.New(), st.Source.Log), st.Source)
	if err != nil {
		return nil, err
	}
	return s, nil
}

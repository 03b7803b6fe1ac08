package dcgmfake

import (
	"fmt"

	"github.com/gpuscope/gpuscope/source/dcgm"
)

// DefaultVersion is the release a fake host engine claims unless told
// otherwise: the one go.mod's go-dcgm follows.
const DefaultVersion = "4.6.1"

// firstBaseUnitID is the lowest field ID DCGM 4.6.1 added (1600,
// DCGM_FI_DEV_BAR1_CAPACITY_BYTES in go-dcgm v1.4611.0's dcgm_fields.h):
// an older host engine does not know it or any above it.
const firstBaseUnitID = 1600

// WithVersion makes the fake an older (or newer) host engine. Before 4.6.1
// it refuses field groups with the base-unit fields, as a real one refuses
// a field ID it does not know.
func WithVersion(v string) Option { return func(f *Fake) { f.version = v } }

// HostEngineVersion implements dcgm.Client.
func (f *Fake) HostEngineVersion() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return "", err
	}
	if f.version == "" {
		return DefaultVersion, nil
	}
	return f.version, nil
}

// knowsFields is called with mu held.
func (f *Fake) knowsFields(fields []uint16) error {
	if f.version == "" || dcgm.KnowsBaseUnits(f.version) {
		return nil
	}
	for _, id := range fields {
		if id >= firstBaseUnitID && id < 0xF000 {
			return fmt.Errorf("fake host engine %s: unknown field ID %d", f.version, id)
		}
	}
	return nil
}

package dcgm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// TestBindUnbindWatch unbinds and rebinds a GPU of the fake host engine and
// checks what the source reports at each poll: dcgm-exporter's
// --enable-gpu-bind-unbind-watch (pkg/cmd/app.go, internal/pkg/watcher/gpu.go)
// serves the GPUs DCGM lists after each change, without a restart. The GPU
// that stays keeps every sample across the change: one per second, no gap.
func TestBindUnbindWatch(t *testing.T) {
	g0 := dcgm.GPUInfo{ID: 0, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", PCIBusID: "00000000:07:00.0", Model: "NVIDIA H100 80GB HBM3"}
	g1 := dcgm.GPUInfo{ID: 1, UUID: "GPU-bbbbbbbb-1111-1111-1111-111111111111", PCIBusID: "00000000:0F:00.0", Model: "NVIDIA H100 80GB HBM3"}
	f, clk := newFake(dcgmfake.WithGPUs(g0, g1))
	l, _ := quietLog()
	cfg := testConfig(l, clk)
	cfg.BindUnbindPoll = 2 * time.Second
	s, err := dcgm.New(f, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{group(time.Second, fieldid.GPUTemp)}))
	rec := &dcgmfake.Recorder{}
	uuids := func() []string {
		var out []string
		for _, e := range s.Entities() {
			out = append(out, e.UUID)
		}
		return out
	}
	// step moves the clock a second and collects, following a change as
	// the engine does: it reads the entities and collects again at once.
	changes := 0
	step := func() {
		t.Helper()
		clk.Add(time.Second)
		err := s.Collect(context.Background(), 0, rec)
		if err != nil {
			require.ErrorIs(t, err, source.ErrEntitiesChanged)
			changes++
			s.Entities()
			require.NoError(t, s.Collect(context.Background(), 0, rec))
		}
	}
	step()
	polls := f.GPUCalls()
	step()
	assert.Equal(t, polls, f.GPUCalls(), "no listing before the poll interval has passed")
	require.Equal(t, []string{g0.UUID, g1.UUID}, uuids())
	require.Zero(t, changes)

	f.SetGPUs(g0)
	step()
	step()
	assert.Equal(t, 1, changes, "the unbind is seen within one poll interval, once")
	assert.Equal(t, []string{g0.UUID}, uuids())
	last := f.WatchCalls()[len(f.WatchCalls())-1]
	assert.Equal(t, []dcgm.EntityRef{{Group: dcgm.EntityGPU, ID: 0}}, last.Entities, "the fields are watched on the bound GPU only")
	step()
	step()
	f.SetGPUs(g0, g1)
	step()
	step()
	assert.Equal(t, 2, changes, "the bind is seen at the next poll")
	assert.Equal(t, []string{g0.UUID, g1.UUID}, uuids())
	step()
	step()

	var ts0, ts1 []int64
	for _, v := range rec.Values(fieldid.GPUTemp) {
		switch v.Key {
		case "gpu/" + g0.UUID:
			ts0 = append(ts0, v.TS)
		case "gpu/" + g1.UUID:
			ts1 = append(ts1, v.TS)
		}
	}
	require.NotEmpty(t, ts0)
	for i := 1; i < len(ts0); i++ {
		assert.Equal(t, time.Second.Nanoseconds(), ts0[i]-ts0[i-1], "GPU 0's sample %d follows the previous one by one interval", i)
	}
	// Reads come a second apart, as the watch samples; the first one a
	// second after the watch started, when the latest sample is the second.
	assert.Equal(t, 10, len(ts0), "GPU 0 has every sample from the first read to the clock's last second")
	require.NotEmpty(t, ts1)
	gap := int64(0)
	for i := 1; i < len(ts1); i++ {
		gap = max(gap, ts1[i]-ts1[i-1])
	}
	assert.Less(t, len(ts1), len(ts0), "GPU 1 is not sampled while unbound")
	assert.Greater(t, gap, time.Second.Nanoseconds(), "GPU 1's series has a hole while it was unbound")
}

// TestBindUnbindWatchOff: without the watch the host engine is asked for its
// GPUs only when connecting.
func TestBindUnbindWatchOff(t *testing.T) {
	f, clk := newFake()
	s := newSource(t, f, group(time.Second, fieldid.GPUTemp))
	calls := f.GPUCalls()
	f.SetGPUs()
	for i := 0; i < 5; i++ {
		clk.Add(time.Second)
		require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
	}
	assert.Equal(t, calls, f.GPUCalls())
	assert.Len(t, s.Entities(), 2)
}

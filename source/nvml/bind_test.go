package nvml

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	timesource "github.com/gpuscope/gpuscope/internal/clock"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

// gpuUUIDs lists the UUIDs of the GPU entities by index.
func gpuUUIDs(s *Source) map[int]string {
	out := map[int]string{}
	for _, e := range s.Entities() {
		if e.Kind == source.GPU {
			out[e.GPU] = e.UUID
		}
	}
	return out
}

// TestBindUnbindWatch unbinds and rebinds GPUs of a fake DGX H100 and checks
// what the source reports at each poll of the bound GPUs: dcgm-exporter's
// --enable-gpu-bind-unbind-watch (pkg/cmd/app.go, internal/pkg/watcher/gpu.go)
// serves the GPUs bound after each change, without a restart.
func TestBindUnbindWatch(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	s, err := New(Config{Lib: f, Logger: quietLogger(), EventWait: 20 * time.Millisecond, Clock: clk, BindUnbindPoll: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.GPUTemp)}}))
	uuid := func(slot int) string { return f.GPUs[slot].UUID }
	collect := func() (*recordingSink, error) {
		sink := newSink()
		return sink, s.Collect(context.Background(), 0, sink)
	}
	_, err = collect()
	require.NoError(t, err)
	before := map[string]*source.Entity{}
	for _, e := range s.Entities() {
		before[e.UUID] = e
	}
	require.Len(t, before, 8)

	// Unbinding the last GPU renumbers nothing.
	f.Update(7, func(g *nvmlfake.GPU) { g.Unbound = true })
	_, err = collect()
	require.NoError(t, err, "the change is not seen before the poll interval has passed")
	assert.Len(t, gpuUUIDs(s), 8)
	clk.Add(time.Second)
	sink, err := collect()
	require.ErrorIs(t, err, source.ErrEntitiesChanged)
	got := gpuUUIDs(s)
	require.Len(t, got, 7)
	assert.NotContains(t, got, 7)
	for i := 0; i < 7; i++ {
		e := gpuEntity(t, s, i)
		assert.Same(t, before[uuid(i)], e, "GPU %d keeps its entity, so the engine keeps its series", i)
		_, ok := sink.value(e, fieldid.GPUTemp)
		assert.True(t, ok, "GPU %d is read in the collection that noticed the change", i)
	}
	_, err = collect()
	require.NoError(t, err, "a change is reported once")

	// Binding it again brings it back at the next poll.
	f.Update(7, func(g *nvmlfake.GPU) { g.Unbound = false })
	clk.Add(time.Second)
	_, err = collect()
	require.ErrorIs(t, err, source.ErrEntitiesChanged)
	assert.Equal(t, uuid(7), gpuUUIDs(s)[7])
	sink, err = collect()
	require.NoError(t, err)
	v, ok := sink.value(gpuEntity(t, s, 7), fieldid.GPUTemp)
	assert.True(t, ok, "the rebound GPU is read")
	assert.Equal(t, 47.0, v, "GPU 7's temperature from the fake")

	// Unbinding a GPU in the middle renumbers the ones after it, as NVML
	// enumerates the bound GPUs from 0.
	f.Update(3, func(g *nvmlfake.GPU) { g.Unbound = true })
	clk.Add(time.Second)
	_, err = collect()
	require.ErrorIs(t, err, source.ErrEntitiesChanged)
	want := map[int]string{}
	for i, slot := range []int{0, 1, 2, 4, 5, 6, 7} {
		want[i] = uuid(slot)
	}
	assert.Equal(t, want, gpuUUIDs(s))
	assert.Equal(t, "nvidia3", gpuEntity(t, s, 3).Device, "the renumbered GPU's device label follows its index")

	// Every GPU gone, then back: the source keeps serving, never fails.
	for i := range f.GPUs {
		f.Update(i, func(g *nvmlfake.GPU) { g.Unbound = true })
	}
	clk.Add(time.Second)
	_, err = collect()
	require.ErrorIs(t, err, source.ErrEntitiesChanged)
	assert.Empty(t, s.Entities())
	_, err = collect()
	require.NoError(t, err)
	for i := range f.GPUs {
		f.Update(i, func(g *nvmlfake.GPU) { g.Unbound = false })
	}
	clk.Add(time.Second)
	_, err = collect()
	require.ErrorIs(t, err, source.ErrEntitiesChanged)
	assert.Len(t, gpuUUIDs(s), 8)
	s.xid.devMu.Lock()
	assert.Len(t, s.xid.devices, 8, "GPUs that left are no longer tracked for XID events")
	s.xid.devMu.Unlock()
}

// TestBindUnbindWatchOff: without the watch the GPUs found at start stay the
// entities and NVML is never asked to list them again.
func TestBindUnbindWatchOff(t *testing.T) {
	f := nvmlfake.New(nvmlfake.DGXH100)
	clk := timesource.NewFake(time.Unix(1_750_000_000, 0))
	s, err := New(Config{Lib: f, Logger: quietLogger(), EventWait: 20 * time.Millisecond, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{{Interval: time.Second, Fields: fields(fieldid.GPUTemp)}}))
	counted := len(f.DeviceGetCountCalls())
	f.Update(7, func(g *nvmlfake.GPU) { g.Unbound = true })
	for i := 0; i < 3; i++ {
		clk.Add(time.Second)
		require.NoError(t, s.Collect(context.Background(), 0, newSink()))
	}
	assert.Len(t, gpuUUIDs(s), 8)
	assert.Len(t, f.DeviceGetCountCalls(), counted)
	assert.Equal(t, []string{gpuEntity(t, s, 7).Key()}, s.Status().Lost, "the unbound GPU is reported lost instead")
}

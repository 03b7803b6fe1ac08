package dcgm_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// fakeReader lists scripted processes by GPU UUID, as NVML beside DCGM
// would; hold, when not nil, makes every read wait until it is closed.
type fakeReader struct {
	mu     sync.Mutex
	procs  map[string][]source.Process
	failOn map[string]error
	asked  []string
	hold   chan struct{}
	closed bool
}

func (r *fakeReader) GPUProcesses(uuid string) ([]source.Process, error) {
	r.mu.Lock()
	hold := r.hold
	r.asked = append(r.asked, uuid)
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failOn[uuid]; err != nil {
		return nil, err
	}
	return append([]source.Process(nil), r.procs[uuid]...), nil
}

func (r *fakeReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *fakeReader) set(f func(r *fakeReader)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

const (
	uuid0 = "GPU-00000000-0000-0000-0000-000000000000"
	uuid1 = "GPU-11111111-1111-1111-1111-111111111111"
)

func processSource(t *testing.T, f *dcgmfake.Fake, open func() (dcgm.ProcessReader, error)) *dcgm.Source {
	t.Helper()
	l, _ := quietLog()
	cfg := testConfig(l, f.Clock())
	cfg.Processes = dcgm.ProcessConfig{Open: open, Interval: time.Second, CloseWait: 20 * time.Millisecond}
	s, err := dcgm.New(f, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{group(100*time.Millisecond, fieldid.GPUTemp)}))
	return s
}

func byPID(p []source.Process) []source.Process {
	out := append([]source.Process(nil), p...)
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// The DCGM source lists the processes of the GPUs the host engine lists,
// read beside it by UUID, refreshed during collections at the process
// interval.
func TestDCGMListsProcessesOfItsGPUs(t *testing.T) {
	f, clk := newFake()
	r := &fakeReader{procs: map[string][]source.Process{
		uuid0: {{PID: 100, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 3 << 30, SMUtil: 30},
			{PID: 101, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: 20}},
		uuid1: {{PID: 200, UUID: uuid1, GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: -1}},
		// A GPU the host engine does not list is never asked for.
		"GPU-elsewhere": {{PID: 9, UUID: "GPU-elsewhere", GPUInstanceID: -1}},
	}}
	s := processSource(t, f, func() (dcgm.ProcessReader, error) { return r, nil })
	assert.Nil(t, s.Processes(), "nothing can be listed before the reader is opened")

	sink := &dcgmfake.Recorder{}
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	testwait.For(t, "the first process read", func() bool { return len(s.Processes()) == 3 })
	assert.Equal(t, []source.Process{
		{PID: 100, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 3 << 30, SMUtil: 30},
		{PID: 101, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: 20},
		{PID: 200, UUID: uuid1, GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: -1},
	}, byPID(s.Processes()))

	// A process ends: the list follows at the next read after the interval,
	// not before.
	r.set(func(r *fakeReader) { r.procs[uuid0] = r.procs[uuid0][:1] })
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	assert.Len(t, s.Processes(), 3, "read again before the interval")
	clk.Add(time.Second)
	require.NoError(t, s.Collect(context.Background(), 0, sink))
	testwait.For(t, "the second process read", func() bool { return len(s.Processes()) == 2 })
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.ElementsMatch(t, []string{uuid0, uuid1, uuid0, uuid1}, r.asked)
}

// A GPU whose read fails keeps its last list; the others are read on.
func TestDCGMProcessReadFailureKeepsTheLastList(t *testing.T) {
	f, clk := newFake()
	r := &fakeReader{procs: map[string][]source.Process{
		uuid0: {{PID: 100, UUID: uuid0, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: 10}},
		uuid1: {{PID: 200, UUID: uuid1, GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: 10}},
	}}
	s := processSource(t, f, func() (dcgm.ProcessReader, error) { return r, nil })
	require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
	testwait.For(t, "the first process read", func() bool { return len(s.Processes()) == 2 })

	r.set(func(r *fakeReader) {
		r.failOn = map[string]error{uuid0: errors.New("GPU is lost")}
		r.procs[uuid1] = append(r.procs[uuid1], source.Process{PID: 201, UUID: uuid1, GPUInstanceID: -1, SMUtil: 5})
	})
	clk.Add(time.Second)
	require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
	testwait.For(t, "the second process read", func() bool { return len(s.Processes()) == 3 })
	pids := []uint32{}
	for _, p := range byPID(s.Processes()) {
		pids = append(pids, p.PID)
	}
	assert.Equal(t, []uint32{100, 200, 201}, pids, "GPU 0 keeps its last list, GPU 1 has its new one")
}

// Without NVML beside DCGM the source says it cannot list processes (nil,
// so pod attribution copies the fields instead of giving pods 0), warns
// once, and tries again at the next interval.
func TestDCGMWithoutNVMLListsNoProcesses(t *testing.T) {
	f, clk := newFake()
	r := &fakeReader{procs: map[string][]source.Process{uuid0: {{PID: 1, UUID: uuid0, GPUInstanceID: -1, SMUtil: -1}}}}
	var mu sync.Mutex
	opens, fail := 0, true
	l, hook := quietLog()
	cfg := testConfig(l, f.Clock())
	cfg.Processes = dcgm.ProcessConfig{Interval: time.Second, Open: func() (dcgm.ProcessReader, error) {
		mu.Lock()
		defer mu.Unlock()
		opens++
		if fail {
			return nil, errors.New("nvml process list: NVIDIA driver library libnvidia-ml.so.1 not found")
		}
		return r, nil
	}}
	s, err := dcgm.New(f, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{group(100*time.Millisecond, fieldid.GPUTemp)}))

	for i := 0; i < 3; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
		testwait.For(t, "an open attempt", func() bool { mu.Lock(); defer mu.Unlock(); return opens == i+1 })
		assert.Nil(t, s.Processes())
		clk.Add(time.Second)
	}
	warnings := 0
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings, "one warning for a reader that cannot be opened")

	mu.Lock()
	fail = false
	mu.Unlock()
	require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
	testwait.For(t, "the processes once NVML opens", func() bool { return len(s.Processes()) == 1 })
}

// While the host engine is down the source lists no processes: its GPUs
// are unknown then, and auto mode serves NVML's list instead.
func TestDCGMListsNoProcessesWhileDown(t *testing.T) {
	f, _ := newFake()
	r := &fakeReader{procs: map[string][]source.Process{uuid0: {{PID: 1, UUID: uuid0, GPUInstanceID: -1, SMUtil: -1}}}}
	s := processSource(t, f, func() (dcgm.ProcessReader, error) { return r, nil })
	require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
	testwait.For(t, "the first process read", func() bool { return len(s.Processes()) == 1 })
	f.Kill()
	err := s.Collect(context.Background(), 0, &dcgmfake.Recorder{})
	require.Error(t, err)
	require.False(t, s.Status().Up)
	assert.Nil(t, s.Processes())
}

// A read that hangs in NVML holds no collection, is never joined by a
// second, and keeps the reader open at Close rather than closing NVML
// under it.
func TestDCGMHungProcessReadHoldsNothing(t *testing.T) {
	f, clk := newFake()
	hold := make(chan struct{})
	r := &fakeReader{hold: hold, procs: map[string][]source.Process{}}
	s := processSource(t, f, func() (dcgm.ProcessReader, error) { return r, nil })
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}), "a collection while the process read hangs")
		clk.Add(time.Second)
	}
	testwait.For(t, "the hung read", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.asked) == 1 })
	require.NoError(t, s.Close())
	r.mu.Lock()
	assert.False(t, r.closed, "NVML closed under a running call")
	assert.Len(t, r.asked, 1, "a second read joined the hung one")
	r.mu.Unlock()
	close(hold)
}

// Close closes the reader.
func TestDCGMCloseClosesTheProcessReader(t *testing.T) {
	f, _ := newFake()
	r := &fakeReader{procs: map[string][]source.Process{}}
	s := processSource(t, f, func() (dcgm.ProcessReader, error) { return r, nil })
	require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
	testwait.For(t, "the first process read", func() bool { return s.Processes() != nil })
	require.NoError(t, s.Close())
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.True(t, r.closed)
}

// A NVML that finds none of the host engine's GPUs (the host engine runs on
// another host) cannot list their processes: the source says so (nil), so
// that pods are not given 0, and warns once; a GPU NVML finds again lists.
func TestDCGMWhenNVMLSeesOtherGPUs(t *testing.T) {
	f, clk := newFake()
	lost := errors.New("DeviceGetHandleByUUID: ERROR_NOT_FOUND")
	r := &fakeReader{procs: map[string][]source.Process{}, failOn: map[string]error{uuid0: lost, uuid1: lost}}
	l, hook := quietLog()
	cfg := testConfig(l, f.Clock())
	cfg.Processes = dcgm.ProcessConfig{Interval: time.Second, Open: func() (dcgm.ProcessReader, error) { return r, nil }}
	s, err := dcgm.New(f, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Watch([]source.Group{group(100*time.Millisecond, fieldid.GPUTemp)}))
	asked := func(n int) func() bool {
		return func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.asked) == n }
	}
	for i := 1; i <= 2; i++ {
		require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
		testwait.For(t, "a read of both GPUs", asked(2*i))
		testwait.For(t, "the read's end", func() bool { return s.Processes() == nil })
		clk.Add(time.Second)
	}
	warnings := 0
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings)

	r.set(func(r *fakeReader) {
		delete(r.failOn, uuid1)
		r.procs[uuid1] = []source.Process{{PID: 7, UUID: uuid1, GPUInstanceID: -1, SMUtil: 3}}
	})
	require.NoError(t, s.Collect(context.Background(), 0, &dcgmfake.Recorder{}))
	testwait.For(t, "GPU 1's process", func() bool { return len(s.Processes()) == 1 })
}

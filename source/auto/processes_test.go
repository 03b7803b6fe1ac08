package auto_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/auto"
)

// listedReader is DCGM's process reader beside it, listing a fixed set.
type listedReader []source.Process

func (r listedReader) GPUProcesses(uuid string) ([]source.Process, error) {
	var out []source.Process
	for _, p := range r {
		if p.UUID == uuid {
			out = append(out, p)
		}
	}
	return out, nil
}

func (listedReader) Close() error { return nil }

// nvmlProcess marks the NVML stand-in's process list.
var nvmlProcess = source.Process{PID: 9999, UUID: "GPU-00000000-0000-0000-0000-000000000000", GPUInstanceID: -1, SMUtil: 1}

func (n *fakeNVML) Processes() []source.Process { return []source.Process{nvmlProcess} }

// Auto mode lists processes whichever backend serves: DCGM's (through
// NVML beside it) while DCGM is active, the NVML source's during an outage.
func TestProcessesFromWhicheverBackendServes(t *testing.T) {
	c := newCtors()
	c.procs = []source.Process{
		{PID: 100, UUID: "GPU-00000000-0000-0000-0000-000000000000", GPUInstanceID: -1, UsedMemoryBytes: 1 << 30, SMUtil: 40},
		{PID: 200, UUID: "GPU-11111111-1111-1111-1111-111111111111", GPUInstanceID: -1, UsedMemoryBytes: 2 << 30, SMUtil: 60},
	}
	a, _ := newAuto(t, c)
	pids := func() []uint32 {
		var out []uint32
		for _, p := range a.Processes() {
			out = append(out, p.PID)
		}
		return out
	}
	collectFrom(t, c, a, false)
	testwait.For(t, "DCGM's process list", func() bool { return len(a.Processes()) == 2 })
	assert.ElementsMatch(t, []uint32{100, 200}, pids())
	assert.Equal(t, auto.DCGM, a.Status().Active)

	c.fake.Kill()
	collectFrom(t, c, a, true)
	assert.Equal(t, []uint32{9999}, pids(), "NVML's list during the outage")

	c.fake.Restart()
	collectFrom(t, c, a, false)
	testwait.For(t, "DCGM's process list again", func() bool {
		c.clk.Add(10 * time.Second)
		collectFrom(t, c, a, false)
		return len(a.Processes()) == 2
	})
	assert.ElementsMatch(t, []uint32{100, 200}, pids())
}

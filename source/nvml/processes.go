package nvml

import (
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// noInstance is NVML's GPU instance ID of a process outside MIG.
const noInstance = 0xFFFFFFFF

// Processes implements source.ProcessLister from the last snapshot; it
// calls no NVML function.
func (s *Source) Processes() []source.Process {
	s.procMu.RLock()
	defer s.procMu.RUnlock()
	// Not nil when empty: nil says "cannot list" (source.ProcessLister).
	out := []source.Process{}
	for _, d := range s.devs() {
		out = append(out, s.procs[d.index]...)
	}
	return out
}

// refreshProcesses renews a GPU's process snapshot when it is older than
// the process interval. It runs in the GPU's read goroutine.
func (s *Source) refreshProcesses(d *device, h gonvml.Device, now time.Time) {
	if d.procsDisabled || now.Sub(d.lastProcRefresh) < s.cfg.ProcessInterval {
		return
	}
	d.lastProcRefresh = now
	log := s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid})
	infos, ret := h.GetComputeRunningProcesses()
	if ret == gonvml.ERROR_NOT_SUPPORTED {
		d.procsDisabled = true
		log.Info("GPU cannot list its compute processes; process list disabled for it")
		return
	}
	if err := nvmlErr("GetComputeRunningProcesses", ret); err != nil {
		log.WithError(err).Debug("process list not refreshed")
		return
	}
	// SM utilisation per PID, from the samples newer than the last ones
	// seen. NOT_FOUND means no process ran since then.
	smUtil := map[uint32]float64{}
	samples, ret := h.GetProcessUtilization(d.lastProcTS)
	if ret == gonvml.SUCCESS {
		latest := map[uint32]uint64{}
		for _, smp := range samples {
			if smp.TimeStamp >= latest[smp.Pid] {
				latest[smp.Pid] = smp.TimeStamp
				smUtil[smp.Pid] = float64(smp.SmUtil)
			}
			d.lastProcTS = max(d.lastProcTS, smp.TimeStamp)
		}
	}
	n := min(len(infos), s.cfg.MaxProcesses)
	procs := make([]source.Process, 0, n)
	for _, p := range infos[:n] {
		gi := -1
		if d.migEnabled && p.GpuInstanceId != noInstance {
			gi = int(p.GpuInstanceId)
		}
		util, ok := smUtil[p.Pid]
		if !ok {
			util = -1
		}
		procs = append(procs, source.Process{PID: p.Pid, UUID: d.uuid, GPUInstanceID: gi,
			UsedMemoryBytes: p.UsedGpuMemory, SMUtil: util})
	}
	s.procMu.Lock()
	s.procs[d.index] = procs
	s.procMu.Unlock()
}

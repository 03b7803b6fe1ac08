package nvml

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// noInstance is NVML's GPU instance ID of a process outside MIG.
const noInstance = 0xFFFFFFFF

// errNoProcessList says a GPU cannot list its compute processes at all
// (nvmlDeviceGetComputeRunningProcesses answers NOT_SUPPORTED); it is not
// asked again.
var errNoProcessList = errors.New("GPU cannot list its compute processes")

// procCursor is what the process list of one GPU keeps between reads.
type procCursor struct {
	// lastTS is the newest per-process utilisation sample seen, so each
	// read asks only for newer ones.
	lastTS   uint64
	disabled bool
	// names are the names of the processes of the last read, by PID, so
	// that a process is named once rather than at every read; it holds
	// the last read's processes only.
	names map[uint32]string
}

// Tokens nvidia-smi prints for a process name it cannot read
// (nvidia_gpu_exporter's internal/nvmlnative/format.go writes the same
// for its nvml backend, internal/nvmlnative/backend_nvml.go: tok).
const (
	nameNotAvailable  = "[N/A]"
	nameNoPermission  = "[Insufficient Permissions]"
	nameUnknownError  = "[Unknown Error]"
	nameNotFoundInLib = "[Function Not Found]"
)

// processName is the name of a process as nvmlSystemGetProcessName gives
// it, or nvidia-smi's token for why it cannot be read.
func processName(lib gonvml.Interface, pid uint32) string {
	name, ret := lib.SystemGetProcessName(int(pid))
	switch ret {
	case gonvml.SUCCESS:
		return name
	case gonvml.ERROR_NOT_SUPPORTED:
		return nameNotAvailable
	case gonvml.ERROR_NO_PERMISSION:
		return nameNoPermission
	case gonvml.ERROR_FUNCTION_NOT_FOUND:
		return nameNotFoundInLib
	}
	return nameUnknownError
}

// nameOf is the name of process pid: the last read's, or the driver's for
// a process not seen then. It records the name for the next read in next.
func (cur *procCursor) nameOf(lib gonvml.Interface, pid uint32, next map[uint32]string) string {
	name, ok := cur.names[pid]
	if !ok {
		name = processName(lib, pid)
	}
	next[pid] = name
	return name
}

// listProcesses reads the compute processes of one GPU
// (nvmlDeviceGetComputeRunningProcesses: PID, memory, GPU instance), their
// SM utilisation (nvmlDeviceGetProcessUtilization, the samples newer
// than the cursor's) and their names (nvmlSystemGetProcessName, once per
// process). The NVML source and the process reader beside DCGM
// both read through it, so the two backends list processes alike. At most
// maxN processes are kept. On a MIG-enabled GPU each process carries its
// GPU instance, and NVML gives no per-process utilisation there: SMUtil
// is -1, as it is for a process the driver sampled none of.
func listProcesses(lib gonvml.Interface, h gonvml.Device, uuid string, mig bool, cur *procCursor, maxN int) ([]source.Process, error) {
	if cur.disabled {
		return nil, errNoProcessList
	}
	infos, ret := h.GetComputeRunningProcesses()
	if ret == gonvml.ERROR_NOT_SUPPORTED {
		cur.disabled = true
		return nil, errNoProcessList
	}
	if err := nvmlErr("GetComputeRunningProcesses", ret); err != nil {
		return nil, err
	}
	// SM utilisation per PID, from the samples newer than the last ones
	// seen. NOT_FOUND means no process ran since then.
	smUtil := map[uint32]float64{}
	samples, ret := h.GetProcessUtilization(cur.lastTS)
	if ret == gonvml.SUCCESS {
		latest := map[uint32]uint64{}
		for _, smp := range samples {
			if smp.TimeStamp >= latest[smp.Pid] {
				latest[smp.Pid] = smp.TimeStamp
				smUtil[smp.Pid] = float64(smp.SmUtil)
			}
			cur.lastTS = max(cur.lastTS, smp.TimeStamp)
		}
	}
	n := min(len(infos), maxN)
	procs := make([]source.Process, 0, n)
	names := make(map[uint32]string, n)
	for _, p := range infos[:n] {
		gi := -1
		if mig && p.GpuInstanceId != noInstance {
			gi = int(p.GpuInstanceId)
		}
		util, ok := smUtil[p.Pid]
		if !ok || gi >= 0 {
			util = -1
		}
		procs = append(procs, source.Process{PID: p.Pid, UUID: uuid, GPUInstanceID: gi,
			UsedMemoryBytes: p.UsedGpuMemory, SMUtil: util, Name: cur.nameOf(lib, p.Pid, names)})
	}
	cur.names = names
	return procs, nil
}

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

// refreshProcesses starts a refresh of every GPU's process snapshot when
// the last is older than the process interval and none still runs. The
// refresh runs beside the reads, in a goroutine of its own: listing and
// naming processes is a driver call per GPU and one per new process, which
// a 100 ms group cannot wait for, and a GPU whose process list hangs
// keeps its fields. Only Collect calls it, one collection at a time.
func (s *Source) refreshProcesses(devices []*device, now time.Time) {
	if now.Sub(s.lastProcRefresh) < s.cfg.ProcessInterval || !s.procRunning.CompareAndSwap(false, true) {
		return
	}
	s.lastProcRefresh = now
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		defer s.procRunning.Store(false)
		s.refreshAllProcesses(devices)
	}()
}

// RefreshProcesses renews every GPU's process snapshot now and returns once
// it is stored, or when ctx ends first (a GPU whose process list hangs).
// Collect never calls it: it refreshes the snapshot beside the reads, so
// Processes may lag the GPUs by up to the process interval. RefreshProcesses
// is for tests and tools that compare the list with a known state and
// cannot wait for that interval. It runs after a refresh that Collect
// started, never alongside it.
func (s *Source) RefreshProcesses(ctx context.Context) error {
	if s.closed.Load() {
		return errors.New("nvml: process refresh after close")
	}
	done := make(chan struct{})
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		defer close(done)
		s.refreshAllProcesses(s.devs())
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("nvml: process refresh: %w", ctx.Err())
	}
}

// refreshAllProcesses renews the process snapshot of each GPU that can
// list its processes. procRefreshMu keeps two refreshes from sharing a
// GPU's cursor.
func (s *Source) refreshAllProcesses(devices []*device) {
	s.procRefreshMu.Lock()
	defer s.procRefreshMu.Unlock()
	for _, d := range devices {
		if s.closed.Load() {
			return
		}
		if !d.isLost() && !d.procs.disabled {
			s.refreshGPUProcesses(d)
		}
	}
}

// refreshGPUProcesses renews one GPU's process snapshot.
func (s *Source) refreshGPUProcesses(d *device) {
	mig := d.migEnabled.Load()
	log := s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid})
	procs, err := listProcesses(s.lib, d.handle(), d.uuid, mig, &d.procs, s.cfg.MaxProcesses)
	if isNoPermission(err) && mig {
		if !d.procPermissionWarned {
			d.procPermissionWarned = true
			log.WithError(err).Warn("in MIG mode NVML lists the whole GPU's processes to root only; listing each MIG instance's instead")
		}
		procs, err = listMIGDeviceProcesses(s.lib, d.handle(), d.uuid, &d.procs, s.cfg.MaxProcesses)
	}
	switch {
	case errors.Is(err, errNoProcessList):
		log.Info("GPU cannot list its compute processes; process list disabled for it")
		return
	case err != nil:
		log.WithError(err).Debug("process list not refreshed")
		return
	}
	s.procMu.Lock()
	defer s.procMu.Unlock()
	// The refresh runs beside Collect, which may have dropped the GPU
	// meanwhile (unbound, or renumbered and opened afresh under its index).
	if slices.Contains(s.devs(), d) {
		s.procs[d.index] = procs
	}
}

// listMIGDeviceProcesses lists a MIG GPU's processes through its MIG
// device handles, which nvml.h names for "per-instance information" and
// which need no privileges where the whole GPU's list does. Each process
// carries the GPU instance it was listed on; a PID that several compute
// instances list is kept once. At most maxN processes are kept.
func listMIGDeviceProcesses(lib gonvml.Interface, h gonvml.Device, uuid string, cur *procCursor, maxN int) ([]source.Process, error) {
	count, ret := h.GetMaxMigDeviceCount()
	if err := nvmlErr("GetMaxMigDeviceCount", ret); err != nil {
		return nil, err
	}
	var procs []source.Process
	seen := map[uint32]bool{}
	names := map[uint32]string{}
	for i := 0; i < count; i++ {
		mh, ret := h.GetMigDeviceHandleByIndex(i)
		if ret == gonvml.ERROR_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		if err := nvmlErr(fmt.Sprintf("GetMigDeviceHandleByIndex(%d)", i), ret); err != nil {
			return nil, err
		}
		gi, ret := mh.GetGpuInstanceId()
		if err := nvmlErr("GetGpuInstanceId", ret); err != nil {
			return nil, fmt.Errorf("MIG device %d: %w", i, err)
		}
		infos, ret := mh.GetComputeRunningProcesses()
		if err := nvmlErr("GetComputeRunningProcesses", ret); err != nil {
			return nil, fmt.Errorf("MIG device %d: %w", i, err)
		}
		for _, p := range infos {
			if seen[p.Pid] || len(procs) >= maxN {
				continue
			}
			seen[p.Pid] = true
			procs = append(procs, source.Process{PID: p.Pid, UUID: uuid, GPUInstanceID: gi,
				UsedMemoryBytes: p.UsedGpuMemory, SMUtil: -1, Name: cur.nameOf(lib, p.Pid, names)})
		}
	}
	cur.names = names
	return procs, nil
}

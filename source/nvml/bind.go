package nvml

import (
	"fmt"
	"slices"

	"github.com/sirupsen/logrus"
)

// boundGPU is one GPU as NVML enumerates it now.
type boundGPU struct {
	index int
	uuid  string
}

// listBound compares the GPUs bound to the driver with the ones sampled and,
// when they differ, replaces the device list and flags the entities as
// changed. dcgm-exporter reacts to a bind or unbind with a full restart of
// its collectors (pkg/cmd/app.go, handleGPUTopologyChange); here the GPUs
// that stay keep their device state, and with it their series, and only
// the ones that came or went are opened or dropped.
func (s *Source) listBound() {
	bound, err := s.enumerate()
	if err != nil {
		// A driver in the middle of a rebind can fail the listing; the next
		// poll looks again, and the GPUs known so far keep being sampled.
		s.log.WithError(err).Debug("cannot list the bound GPUs; keeping the known ones")
		return
	}
	old := s.devs()
	if slices.EqualFunc(old, bound, func(d *device, b boundGPU) bool { return d.index == b.index && d.uuid == b.uuid }) {
		return
	}
	byUUID := make(map[string]*device, len(old))
	for _, d := range old {
		byUUID[d.uuid] = d
	}
	next := make([]*device, 0, len(bound))
	kept := make(map[*device]bool, len(old))
	for _, b := range bound {
		if d := byUUID[b.uuid]; d != nil && d.index == b.index {
			next = append(next, d)
			kept[d] = true
			continue
		}
		// A new GPU, or one NVML renumbered: its entity carries the index,
		// so it is opened afresh. The engine keys series by UUID, so a
		// renumbered GPU keeps its series under its new gpu label.
		d, err := s.openDevice(b.index)
		if err != nil {
			s.log.WithError(err).WithField("gpu", b.index).Warn("a newly bound GPU cannot be opened; it is tried again at the next poll")
			return
		}
		if d.uuid != b.uuid {
			s.log.WithFields(logrus.Fields{"gpu": b.index, "uuid": d.uuid}).Debug("the GPUs changed while being listed; looking again at the next poll")
			return
		}
		next = append(next, d)
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "model": d.gpu.ModelName,
			"gpm": d.gpmSupported, "mig_instances": len(d.instances)}).Info("GPU bound to the driver; sampling it")
	}
	for _, d := range old {
		if kept[d] {
			continue
		}
		s.xid.unregister(d)
		s.procMu.Lock()
		delete(s.procs, d.index)
		s.procMu.Unlock()
		// A read still running holds the GPM samples; it frees nothing
		// itself, so they are only freed when no read is in flight.
		if d.busy.CompareAndSwap(false, true) {
			d.gpm.free()
			for _, in := range d.instances {
				in.gpm.free()
			}
		}
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid}).Info("GPU unbound from the driver; its series are dropped")
	}
	for _, d := range next {
		if !kept[d] {
			s.xid.register(d, d.handle())
		}
	}
	s.devMu.Lock()
	s.devices = next
	s.devMu.Unlock()
	s.entitiesChanged.Store(true)
}

// enumerate lists the GPUs NVML sees now, by index.
func (s *Source) enumerate() ([]boundGPU, error) {
	n, ret := s.lib.DeviceGetCount()
	if err := nvmlErr("DeviceGetCount", ret); err != nil {
		return nil, err
	}
	out := make([]boundGPU, 0, n)
	for i := 0; i < n; i++ {
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if err := nvmlErr("DeviceGetHandleByIndex", ret); err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		uuid, ret := h.GetUUID()
		if err := nvmlErr("GetUUID", ret); err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		out = append(out, boundGPU{index: i, uuid: uuid})
	}
	return out, nil
}

// unregister forgets a GPU that left. NVML drops its events with the
// device, so only the bookkeeping goes.
func (w *xidWatcher) unregister(d *device) {
	w.devMu.Lock()
	w.devices = slices.DeleteFunc(w.devices, func(k *device) bool { return k == d })
	w.devMu.Unlock()
	w.mu.Lock()
	delete(w.last, d)
	w.queue = slices.DeleteFunc(w.queue, func(e xidEvent) bool { return e.dev == d })
	w.mu.Unlock()
}

package nvml

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// fieldKey names one (entity, field) pair of a device: entity 0 is the GPU,
// 1.. its MIG instances in order.
type fieldKey struct {
	entity int
	field  uint16
}

// instance is one MIG GPU instance of a device.
type instance struct {
	entity *source.Entity
	giID   int
	// h is the MIG device handle, for per-instance memory.
	h   gonvml.Device
	gpm gpmStates
}

// device is one physical GPU. Everything below busy is touched only by the
// goroutine that holds busy, so a read never races with another read of
// the same GPU.
type device struct {
	index int
	uuid  string

	mu sync.Mutex
	// h is replaced when a lost GPU is re-acquired.
	h         gonvml.Device
	gpu       *source.Entity
	instances []*instance
	lost      bool
	lostErr   error
	nextRetry time.Time
	backoff   time.Duration

	busy atomic.Bool

	gpmSupported bool
	migEnabled   bool
	links        int
	gen          uint64
	reported     map[fieldKey]bool
	// allFailed counts the reads in a row in which every field failed.
	allFailed int
	gpm       gpmStates
	// nvlink is the baseline of DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL's rate.
	nvlink counterBaseline

	lastProcRefresh time.Time
	procs           procCursor
}

func (d *device) handle() gonvml.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h
}

func (d *device) isLost() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost
}

// entities returns the GPU and its MIG instances.
func (d *device) entities() []*source.Entity {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*source.Entity, 0, 1+len(d.instances))
	out = append(out, d.gpu)
	for _, in := range d.instances {
		out = append(out, in.entity)
	}
	return out
}

// cString converts NVML's fixed-size C strings.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// openDevice reads a GPU's identity and capabilities.
func (s *Source) openDevice(index int) (*device, error) {
	h, ret := s.lib.DeviceGetHandleByIndex(index)
	if err := nvmlErr("DeviceGetHandleByIndex", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	uuid, ret := h.GetUUID()
	if err := nvmlErr("GetUUID", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	name, ret := h.GetName()
	if err := nvmlErr("GetName", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	pci, ret := h.GetPciInfo()
	if err := nvmlErr("GetPciInfo", ret); err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	// The device label is "nvidia" + the GPU index, as dcgm-exporter writes
	// it (internal/pkg/collector/gpu_collector.go, toMetric), even where the
	// device node's minor number differs.
	gpu := source.NewGPU(index, uuid, cString(pci.BusId[:]), name)
	d := &device{index: index, uuid: uuid, h: h, gpu: &gpu, links: -1, reported: map[fieldKey]bool{}}
	d.gpmSupported = queryGPM(h)
	instances, migEnabled, err := s.enumerateMIG(d, h)
	if err != nil {
		return nil, fmt.Errorf("GPU %d (%s): %w", index, uuid, err)
	}
	d.instances, d.migEnabled = instances, migEnabled
	return d, nil
}

// queryGPM says whether the GPU has GPM (Hopper and later).
func queryGPM(h gonvml.Device) bool {
	sup, ret := h.GpmQueryDeviceSupport()
	return ret == gonvml.SUCCESS && sup.IsSupportedDevice != 0
}

// enumerateMIG lists the GPU instances of a GPU in MIG mode.
func (s *Source) enumerateMIG(d *device, h gonvml.Device) ([]*instance, bool, error) {
	mode, _, ret := h.GetMigMode()
	if ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_FUNCTION_NOT_FOUND {
		return nil, false, nil
	}
	if err := nvmlErr("GetMigMode", ret); err != nil {
		return nil, false, err
	}
	if mode != gonvml.DEVICE_MIG_ENABLE {
		return nil, false, nil
	}
	count, ret := h.GetMaxMigDeviceCount()
	if err := nvmlErr("GetMaxMigDeviceCount", ret); err != nil {
		return nil, true, err
	}
	var out []*instance
	for i := 0; i < count; i++ {
		mh, ret := h.GetMigDeviceHandleByIndex(i)
		if ret == gonvml.ERROR_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		if err := nvmlErr(fmt.Sprintf("GetMigDeviceHandleByIndex(%d)", i), ret); err != nil {
			return nil, true, err
		}
		gi, ret := mh.GetGpuInstanceId()
		if err := nvmlErr("GetGpuInstanceId", ret); err != nil {
			return nil, true, fmt.Errorf("MIG device %d: %w", i, err)
		}
		migUUID, ret := mh.GetUUID()
		if err := nvmlErr("GetUUID", ret); err != nil {
			return nil, true, fmt.Errorf("MIG device %d: %w", i, err)
		}
		profile, err := s.profileName(h, gi)
		if err != nil {
			return nil, true, fmt.Errorf("MIG device %d: %w", i, err)
		}
		e := *d.gpu
		e.Kind = source.GPUInstance
		e.GPUInstanceID = gi
		e.GPUInstanceProfile = profile
		e.MIGUUID = migUUID
		out = append(out, &instance{entity: &e, giID: gi, h: mh})
	}
	return out, true, nil
}

// profileName returns a GPU instance's profile name, "1g.10gb".
func (s *Source) profileName(h gonvml.Device, giID int) (string, error) {
	gi, ret := h.GetGpuInstanceById(giID)
	if err := nvmlErr(fmt.Sprintf("GetGpuInstanceById(%d)", giID), ret); err != nil {
		return "", err
	}
	info, ret := gi.GetInfo()
	if err := nvmlErr("GpuInstance.GetInfo", ret); err != nil {
		return "", err
	}
	// GpuInstanceInfo holds the profile ID; the profile queries take the
	// profile index, so look the index up.
	for idx := 0; idx < gonvml.GPU_INSTANCE_PROFILE_COUNT; idx++ {
		p, ret := h.GetGpuInstanceProfileInfo(idx)
		if ret != gonvml.SUCCESS || p.Id != info.ProfileId {
			continue
		}
		if s.realLib {
			// Only the real library can answer the versioned query: its
			// handler type is bound to a real device handle.
			if v2, ret := h.GetGpuInstanceProfileInfoV(idx).V2(); ret == gonvml.SUCCESS {
				if name := strings.TrimPrefix(cString(v2.Name[:]), "MIG "); name != "" {
					return name, nil
				}
			}
		}
		return deriveProfileName(p), nil
	}
	return "", fmt.Errorf("GPU instance %d: profile %d not among the device's profiles", giID, info.ProfileId)
}

// deriveProfileName builds the "<slices>g.<GB>gb" name NVIDIA uses from a
// profile's slice count and memory, rounding the memory up to whole GB as
// the published names do (4864 MiB is "5gb").
func deriveProfileName(p gonvml.GpuInstanceProfileInfo) string {
	gb := int(math.Ceil(float64(p.MemorySizeMB) / 1024))
	return fmt.Sprintf("%dg.%dgb", p.SliceCount, gb)
}

// markLost takes a GPU out of sampling until it answers again.
func (s *Source) markLost(d *device, err error, now time.Time) {
	d.mu.Lock()
	already := d.lost
	d.lost, d.lostErr = true, err
	d.backoff = s.cfg.RetryBackoff
	d.nextRetry = now.Add(d.backoff)
	d.mu.Unlock()
	if !already {
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "error": err.Error()}).
			Warn("GPU stopped answering; its fields are skipped and it is retried with backoff")
	}
	d.gpm.free()
	for _, in := range d.instances {
		in.gpm.free()
	}
}

// retryDue says whether a lost GPU's next retry time has come.
func (d *device) retryDue(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !now.Before(d.nextRetry)
}

// recover re-acquires a lost GPU's handle by UUID. On failure the backoff
// doubles, up to the configured maximum.
func (s *Source) recover(d *device, now time.Time) bool {
	h, ret := s.lib.DeviceGetHandleByUUID(d.uuid)
	err := nvmlErr("DeviceGetHandleByUUID", ret)
	if err == nil {
		_, ret = h.GetUUID()
		err = nvmlErr("GetUUID", ret)
	}
	var instances []*instance
	var migEnabled bool
	if err == nil {
		instances, migEnabled, err = s.enumerateMIG(d, h)
	}
	if err != nil {
		d.mu.Lock()
		d.lostErr = err
		d.backoff = min(2*d.backoff, s.cfg.MaxRetryBackoff)
		d.nextRetry = now.Add(d.backoff)
		d.mu.Unlock()
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "error": err.Error()}).Debug("lost GPU still not answering")
		return false
	}
	changed := !sameInstances(d.instances, instances)
	d.mu.Lock()
	d.h, d.lost, d.lostErr = h, false, nil
	if changed {
		d.instances = instances
	} else {
		for i, in := range d.instances {
			in.h = instances[i].h
		}
	}
	d.mu.Unlock()
	d.migEnabled, d.links = migEnabled, -1
	d.gpmSupported = queryGPM(h)
	if changed {
		s.entitiesChanged.Store(true)
		clear(d.reported)
	}
	s.xid.register(d, h)
	s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid}).Info("lost GPU answers again")
	return true
}

func sameInstances(a, b []*instance) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].giID != b[i].giID || a[i].entity.MIGUUID != b[i].entity.MIGUUID ||
			a[i].entity.GPUInstanceProfile != b[i].entity.GPUInstanceProfile {
			return false
		}
	}
	return true
}

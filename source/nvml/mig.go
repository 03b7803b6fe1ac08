package nvml

import (
	"fmt"
	"math"
	"strings"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source"
)

// enumerateMIG lists the GPU instances of a GPU in MIG mode. A MIG device
// that cannot be read is left out, with a log line, and the others are
// listed; an error is returned only when the layout cannot be listed at
// all, and then the GPU is served without instances.
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
			return out, true, err
		}
		if err := s.addMIGDevice(d, h, mh, &out); err != nil {
			d.migWarn(s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "mig_device": i, "error": err.Error()}),
				"MIG device cannot be read; it is not sampled")
		}
	}
	return out, true, nil
}

// addMIGDevice files one MIG device under its GPU instance. NVML's MIG
// device is a compute instance (nvmlDeviceGetComputeInstanceId): a GPU
// instance with several compute instances has a MIG device for each, so
// the GPU instance is one entity (DCGM's FE_GPU_I, dcgm-exporter's
// GPU_I_ID and GPU_I_PROFILE labels) and each compute instance another
// (FE_GPU_CI, GPU_CI_ID), as DCGM's entity model has them. The GPU
// instance takes the MIG UUID of its first compute instance, which is the
// MIG device the device plugin hands out when the two are one.
func (s *Source) addMIGDevice(d *device, h, mh gonvml.Device, out *[]*instance) error {
	giID, ret := mh.GetGpuInstanceId()
	if err := nvmlErr("GetGpuInstanceId", ret); err != nil {
		return err
	}
	ciID, ret := mh.GetComputeInstanceId()
	if err := nvmlErr("GetComputeInstanceId", ret); err != nil {
		return err
	}
	migUUID, ret := mh.GetUUID()
	if err := nvmlErr("GetUUID", ret); err != nil {
		return err
	}
	var in *instance
	for _, o := range *out {
		if o.giID == giID {
			in = o
		}
	}
	if in == nil {
		if len(*out) >= maxMIGInstances {
			return fmt.Errorf("more than %d GPU instances", maxMIGInstances)
		}
		e := *d.gpu
		e.Kind = source.GPUInstance
		e.GPUInstanceID = giID
		e.GPUInstanceProfile = s.profileName(d, h, mh, giID)
		e.MIGUUID = migUUID
		in = &instance{entity: &e, giID: giID, h: mh}
		*out = append(*out, in)
	}
	ce := *in.entity
	ce.Kind = source.ComputeInstance
	ce.ComputeInstanceID = ciID
	ce.MIGUUID = migUUID
	in.cis = append(in.cis, &computeInstance{entity: &ce, ciID: ciID, h: mh})
	return nil
}

// migWarn logs a problem of a GPU's MIG listing: the first at warning
// level, the ones the periodic listings find after it at debug level, so
// that a lasting problem is said once. Only the goroutine that lists the
// GPU's layout calls it.
func (d *device) migWarn(l *logrus.Entry, msg string) {
	if d.migWarned {
		l.Debug(msg)
		return
	}
	d.migWarned = true
	l.Warn(msg)
}

// maxMIGInstances bounds the GPU instances kept per GPU: NVML has at most
// seven per GPU today, and a driver that answered more is not believed.
const maxMIGInstances = 64

// profileName returns a GPU instance's profile name, "1g.10gb". The
// profile ID comes from the GPU instance, which nvml.h says only a
// privileged user may open (nvmlDeviceGetGpuInstanceById); without that,
// the MIG device's attributes (nvmlDeviceGetAttributes_v2, which takes
// MIG device handles and needs no privileges) give its slices and memory,
// and the profile with both is the one. An instance whose profile cannot
// be found at all keeps an empty profile label and is still sampled.
func (s *Source) profileName(d *device, h, mh gonvml.Device, giID int) string {
	var match func(p gonvml.GpuInstanceProfileInfo) bool
	gi, ret := h.GetGpuInstanceById(giID)
	why := nvmlErr(fmt.Sprintf("GetGpuInstanceById(%d)", giID), ret)
	if why == nil {
		info, ret := gi.GetInfo()
		if why = nvmlErr("GpuInstance.GetInfo", ret); why == nil {
			match = func(p gonvml.GpuInstanceProfileInfo) bool { return p.Id == info.ProfileId }
		}
	}
	var attrs gonvml.DeviceAttributes
	if match == nil {
		attrs, ret = mh.GetAttributes()
		if err := nvmlErr("GetAttributes", ret); err != nil {
			d.migWarn(s.log.WithFields(logrus.Fields{"gpu": d.index, "gpu_instance": giID, "error": why.Error(),
				"attributes_error": err.Error()}), "MIG profile unknown; GPU_I_PROFILE is empty")
			return ""
		}
		match = func(p gonvml.GpuInstanceProfileInfo) bool {
			return p.SliceCount == attrs.GpuInstanceSliceCount && p.MemorySizeMB == attrs.MemorySizeMB
		}
	}
	// The profile queries take the profile index, so look the index up.
	for idx := 0; idx < gonvml.GPU_INSTANCE_PROFILE_COUNT; idx++ {
		p, ret := h.GetGpuInstanceProfileInfo(idx)
		if ret != gonvml.SUCCESS || !match(p) {
			continue
		}
		if s.realLib {
			// Only the real library can answer the versioned query: its
			// handler type is bound to a real device handle.
			if v2, ret := h.GetGpuInstanceProfileInfoV(idx).V2(); ret == gonvml.SUCCESS {
				if name := strings.TrimPrefix(cString(v2.Name[:]), "MIG "); name != "" {
					return name
				}
			}
		}
		return deriveProfileName(p.SliceCount, p.MemorySizeMB)
	}
	if attrs.GpuInstanceSliceCount > 0 {
		return deriveProfileName(attrs.GpuInstanceSliceCount, attrs.MemorySizeMB)
	}
	d.migWarn(s.log.WithFields(logrus.Fields{"gpu": d.index, "gpu_instance": giID}), "MIG profile not among the GPU's profiles; GPU_I_PROFILE is empty")
	return ""
}

// deriveProfileName builds the "<slices>g.<GB>gb" name NVIDIA uses from a
// profile's slice count and memory, rounding the memory up to whole GB as
// the published names do (4864 MiB is "5gb").
func deriveProfileName(slices uint32, memoryMB uint64) string {
	gb := int(math.Ceil(float64(memoryMB) / 1024))
	return fmt.Sprintf("%dg.%dgb", slices, gb)
}

// layoutKey says what identifies a MIG layout: the instances, their
// profiles and the MIG devices (compute instances) in each.
func layoutKey(ins []*instance) string {
	var b strings.Builder
	for _, in := range ins {
		fmt.Fprintf(&b, "%d/%s:", in.giID, in.entity.GPUInstanceProfile)
		for _, ci := range in.cis {
			fmt.Fprintf(&b, "%d=%s,", ci.ciID, ci.entity.MIGUUID)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// adoptLayout replaces a GPU's MIG instances with a fresh listing, which
// has fresh handles. When the layout is the same, the known instances stay
// and only take the fresh handles: the engine finds an entity's series by
// the entity it was given. When it changed, a GPU instance that stays
// keeps its GPM samples, the samples of one that went are freed, and what
// was reported unsupported is reported again for the new entities. It
// reports whether the layout changed. It runs where the GPU's reads
// cannot: in its read goroutine, or while the GPU is not busy.
func (s *Source) adoptLayout(d *device, next []*instance) bool {
	d.mu.Lock()
	old := d.instances
	if layoutKey(old) == layoutKey(next) {
		for i, o := range old {
			o.h = next[i].h
			for j, ci := range o.cis {
				ci.h = next[i].cis[j].h
			}
		}
		d.mu.Unlock()
		return false
	}
	for _, o := range old {
		kept := false
		for _, n := range next {
			if n.giID == o.giID && n.entity.MIGUUID == o.entity.MIGUUID {
				n.gpm, kept = o.gpm, true
			}
		}
		if !kept {
			o.gpm.free()
		}
	}
	d.instances = next
	d.numberEntities()
	d.mu.Unlock()
	clear(d.reported)
	s.entitiesChanged.Store(true)
	return true
}

// relistMIG looks at a GPU's MIG layout again, at most once per MIGPoll or
// at the next read after an instance's handle went stale, so that new
// instances appear and removed ones go without a restart. It costs one
// nvmlDeviceGetMigMode on a GPU without MIG, and the listing's few calls
// per MIG device on one with MIG.
func (s *Source) relistMIG(d *device, h gonvml.Device, now time.Time) {
	if !d.migStale && now.Sub(d.lastMIGList) < s.cfg.MIGPoll {
		return
	}
	d.lastMIGList, d.migStale = now, false
	next, migEnabled, err := s.enumerateMIG(d, h)
	if err != nil {
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "error": err.Error()}).
			Debug("cannot list the GPU's MIG instances; keeping the known ones")
		return
	}
	d.migEnabled.Store(migEnabled)
	if s.adoptLayout(d, next) {
		s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "mig_instances": len(next)}).
			Info("MIG layout changed; its instances' series follow it")
	}
}

// isStaleHandle reports errors a MIG device handle answers once its
// instance was destroyed.
func isStaleHandle(err error) bool {
	ret, ok := returnOf(err)
	return ok && (ret == gonvml.ERROR_INVALID_ARGUMENT || ret == gonvml.ERROR_NOT_FOUND)
}

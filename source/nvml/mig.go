package nvml

import (
	"fmt"
	"math"
	"strings"

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
		in, err := s.openInstance(d, h, mh)
		if err != nil {
			s.log.WithFields(logrus.Fields{"gpu": d.index, "uuid": d.uuid, "mig_device": i, "error": err.Error()}).
				Warn("MIG device cannot be read; it is not sampled")
			continue
		}
		out = append(out, in)
	}
	return out, true, nil
}

// openInstance reads the identity of one MIG device.
func (s *Source) openInstance(d *device, h, mh gonvml.Device) (*instance, error) {
	gi, ret := mh.GetGpuInstanceId()
	if err := nvmlErr("GetGpuInstanceId", ret); err != nil {
		return nil, err
	}
	migUUID, ret := mh.GetUUID()
	if err := nvmlErr("GetUUID", ret); err != nil {
		return nil, err
	}
	e := *d.gpu
	e.Kind = source.GPUInstance
	e.GPUInstanceID = gi
	e.GPUInstanceProfile = s.profileName(d, h, mh, gi)
	e.MIGUUID = migUUID
	return &instance{entity: &e, giID: gi, h: mh}, nil
}

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
			s.log.WithFields(logrus.Fields{"gpu": d.index, "gpu_instance": giID, "error": why.Error(),
				"attributes_error": err.Error()}).Warn("MIG profile unknown; GPU_I_PROFILE is empty")
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
	s.log.WithFields(logrus.Fields{"gpu": d.index, "gpu_instance": giID}).Warn("MIG profile not among the GPU's profiles; GPU_I_PROFILE is empty")
	return ""
}

// deriveProfileName builds the "<slices>g.<GB>gb" name NVIDIA uses from a
// profile's slice count and memory, rounding the memory up to whole GB as
// the published names do (4864 MiB is "5gb").
func deriveProfileName(slices uint32, memoryMB uint64) string {
	gb := int(math.Ceil(float64(memoryMB) / 1024))
	return fmt.Sprintf("%dg.%dgb", slices, gb)
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

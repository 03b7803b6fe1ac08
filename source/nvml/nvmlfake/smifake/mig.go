package smifake

import (
	"fmt"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
)

// Profile is a MIG GPU instance profile as NVIDIA's MIG user guide lists
// it ("Supported MIG Profiles", H100 and H200 tables): nvidia-smi -q does
// not print a MIG device's profile, only its SM count and memory, so the
// profile is the one of the GPU's model with that SM count.
type Profile struct {
	Name   string
	Slices uint32
	SMs    int
	// ID is NVML's profile ID (nvml.h, NVML_GPU_INSTANCE_PROFILE_*).
	ID int
}

// profiles are the GPU instance profiles by model name prefix. The media
// extension profiles (+me) have the SM count of their base profile and
// one OFA; a device with an OFA is looked up as such.
var profiles = map[string][]Profile{
	"NVIDIA H100 80GB HBM3": {
		{"1g.10gb", 1, 16, gonvml.GPU_INSTANCE_PROFILE_1_SLICE}, {"1g.20gb", 1, 26, gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2},
		{"2g.20gb", 2, 32, gonvml.GPU_INSTANCE_PROFILE_2_SLICE}, {"3g.40gb", 3, 60, gonvml.GPU_INSTANCE_PROFILE_3_SLICE},
		{"4g.40gb", 4, 64, gonvml.GPU_INSTANCE_PROFILE_4_SLICE}, {"7g.80gb", 7, 132, gonvml.GPU_INSTANCE_PROFILE_7_SLICE},
	},
	"NVIDIA H200": {
		{"1g.18gb", 1, 16, gonvml.GPU_INSTANCE_PROFILE_1_SLICE}, {"1g.35gb", 1, 26, gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2},
		{"2g.35gb", 2, 32, gonvml.GPU_INSTANCE_PROFILE_2_SLICE}, {"3g.71gb", 3, 60, gonvml.GPU_INSTANCE_PROFILE_3_SLICE},
		{"4g.71gb", 4, 64, gonvml.GPU_INSTANCE_PROFILE_4_SLICE}, {"7g.141gb", 7, 132, gonvml.GPU_INSTANCE_PROFILE_7_SLICE},
	},
}

// ProfileOf is the profile of a MIG device of a GPU model, false when the
// table does not know the model or the SM count.
func ProfileOf(model string, d smicapture.MIGDevice) (Profile, bool) {
	for prefix, list := range profiles {
		if !strings.HasPrefix(model, prefix) {
			continue
		}
		for _, p := range list {
			if p.SMs == d.SMs {
				if d.OFAs > 0 && p.Slices == 1 {
					p.Name += "+me"
					p.ID = gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1
				}
				return p, true
			}
		}
	}
	return Profile{}, false
}

// MIGUUID is the UUID the fake gives a MIG device (nvidia-smi -q does not
// print it): the GPU's, as MIG-..., ending in the GPU instance ID.
func MIGUUID(gpuUUID string, gi int) string {
	body := strings.TrimPrefix(gpuUUID, "GPU-")
	if len(body) < 4 {
		body = "00000000-0000-0000-0000-000000000000"
	}
	return fmt.Sprintf("MIG-%s%04x", body[:len(body)-4], gi)
}

// installMIG gives the GPU its MIG devices: a handle each, with its GPU
// instance ID and memory, and the GPU instances and profiles the source
// names them by. A device whose profile is unknown still gets one, with
// its slice count 0, so the mismatch shows in the profile name.
func installMIG(d *mock.Device, g *smicapture.GPU, uuid string) ([]string, error) {
	model := g.Field("name").Text()
	type migDev struct {
		dev  *mock.Device
		gi   *mock.GpuInstance
		info gonvml.GpuInstanceProfileInfo
	}
	var devs []migDev
	var uuids []string
	for _, m := range g.MIG {
		p, _ := ProfileOf(model, m)
		info := gonvml.GpuInstanceProfileInfo{Id: uint32(p.ID), SliceCount: p.Slices,
			MultiprocessorCount: uint32(m.SMs), MemorySizeMB: uint64(m.TotalMiB)}
		m := m
		mu := MIGUUID(uuid, m.GPUInstanceID)
		md := &mock.Device{}
		md.GetUUIDFunc = func() (string, gonvml.Return) { return mu, gonvml.SUCCESS }
		md.GetGpuInstanceIdFunc = func() (int, gonvml.Return) { return m.GPUInstanceID, gonvml.SUCCESS }
		md.GetComputeInstanceIdFunc = func() (int, gonvml.Return) { return m.ComputeInstanceID, gonvml.SUCCESS }
		md.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
			return gonvml.Memory_v2{Total: uint64(m.TotalMiB) * mib, Reserved: uint64(m.ReservedMiB) * mib,
				Used: uint64(m.UsedMiB) * mib, Free: uint64(m.FreeMiB) * mib}, gonvml.SUCCESS
		}
		md.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
			return gonvml.Memory{Total: uint64(m.TotalMiB) * mib, Used: uint64(m.UsedMiB) * mib, Free: uint64(m.FreeMiB) * mib}, gonvml.SUCCESS
		}
		md.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) { return gonvml.GpmSupport{}, gonvml.SUCCESS }
		gi := &mock.GpuInstance{}
		giInfo := gonvml.GpuInstanceInfo{Device: d, Id: uint32(m.GPUInstanceID), ProfileId: info.Id}
		gi.GetInfoFunc = func() (gonvml.GpuInstanceInfo, gonvml.Return) { return giInfo, gonvml.SUCCESS }
		devs = append(devs, migDev{md, gi, info})
		uuids = append(uuids, mu)
	}
	d.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) {
		if len(devs) == 0 {
			return 0, notSupported
		}
		return 7, gonvml.SUCCESS
	}
	d.GetMigDeviceHandleByIndexFunc = func(n int) (gonvml.Device, gonvml.Return) {
		if n < 0 || n >= len(devs) {
			return nil, gonvml.ERROR_NOT_FOUND
		}
		return devs[n].dev, gonvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (gonvml.GpuInstance, gonvml.Return) {
		for _, m := range devs {
			if info, _ := m.gi.GetInfo(); int(info.Id) == id {
				return m.gi, gonvml.SUCCESS
			}
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	// The profile queries take NVML's profile index, which for the
	// profiles above is the profile ID.
	d.GetGpuInstanceProfileInfoFunc = func(idx int) (gonvml.GpuInstanceProfileInfo, gonvml.Return) {
		for _, m := range devs {
			if int(m.info.Id) == idx {
				return m.info, gonvml.SUCCESS
			}
		}
		return gonvml.GpuInstanceProfileInfo{}, notSupported
	}
	return uuids, nil
}

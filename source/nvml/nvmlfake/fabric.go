package nvmlfake

import gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

// HealthyFabricMask is the health mask of a GPU on a working HGX fabric
// (nvml.h, NVML_GPU_FABRIC_HEALTH_MASK_*): bandwidth not degraded, no
// route recovery, no unhealthy route, no access-timeout recovery, a
// correct configuration; partitions and a global fabric manager are not
// supported, as on a baseboard outside an NVL72 rack.
const HealthyFabricMask = gonvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE<<gonvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW |
	gonvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE<<gonvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY |
	gonvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE<<gonvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY |
	gonvml.GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE<<gonvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY |
	gonvml.GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE<<gonvml.GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION

// GpuFabricInfoV answers nvmlDeviceGetGpuFabricInfoV for the GPU of the
// handle (the nvml source's FabricInfoReader): a struct version newer than
// the GPU's FabricVersion is refused, and v2 carries no health summary.
func (f *Fake) GpuFabricInfoV(d gonvml.Device, version uint32) (gonvml.GpuFabricInfoV, gonvml.Return) {
	for _, g := range f.GPUs {
		if gonvml.Device(g.Device) != d {
			continue
		}
		i, ret := read(g, "GetGpuFabricInfoV", func(r *Readings) Readings { return Readings{Fabric: r.Fabric, FabricVersion: r.FabricVersion} })
		if ret != gonvml.SUCCESS {
			return gonvml.GpuFabricInfoV{}, ret
		}
		if max := i.FabricVersion; max != 0 && version > max || version > 3 {
			return gonvml.GpuFabricInfoV{}, gonvml.ERROR_ARGUMENT_VERSION_MISMATCH
		}
		i.Fabric.Version = version
		if version < 3 {
			i.Fabric.HealthSummary = 0
		}
		return i.Fabric, gonvml.SUCCESS
	}
	return gonvml.GpuFabricInfoV{}, gonvml.ERROR_INVALID_ARGUMENT
}

package nvmlfake

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Instance is one MIG GPU instance of a fake GPU and its compute
// instances. NVML's MIG devices are compute instances: a GPU instance with
// three compute instances has three MIG device handles, each with its own
// UUID, all with the GPU instance's memory.
type Instance struct {
	GI *server.GpuInstance
	// Device and UUID are the first compute instance's, which EnableMIG
	// creates with the GPU instance.
	Device *mock.Device
	UUID   string
	Memory gonvml.Memory_v2
	GPM    map[gonvml.GpmMetricId]float64
	CIs    []*ComputeInstance
	// Processes are listed by each of the instance's MIG device handles.
	Processes []gonvml.ProcessInfo
	// gone is set when the GPU instance is destroyed: its MIG device
	// handles answer INVALID_ARGUMENT from then on.
	gone    bool
	profile gonvml.GpuInstanceProfileInfo
}

// ComputeInstance is one MIG device (compute instance) of an Instance.
type ComputeInstance struct {
	ID     int
	UUID   string
	Device *mock.Device
}

// SetNonRoot makes the fake answer as NVML answers a caller without
// privileges: on a GPU in MIG mode nvmlDeviceGetGpuInstanceById ("Requires
// privileged user") and the whole GPU's memory and compute processes
// ("only if the caller has appropriate privileges", nvml.h of go-nvml
// v0.13.4-1) answer NO_PERMISSION; the MIG device handles still answer.
func (f *Fake) SetNonRoot(nonRoot bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nonRoot = nonRoot
}

func (g *GPU) migOn() bool {
	g.Device.RLock()
	defer g.Device.RUnlock()
	return g.MigMode == gonvml.DEVICE_MIG_ENABLE
}

// privileged answers NO_PERMISSION for a call that needs privileges in MIG
// mode when the caller has none.
func (g *GPU) privileged() gonvml.Return {
	g.f.mu.Lock()
	nonRoot := g.f.nonRoot
	g.f.mu.Unlock()
	if nonRoot && g.migOn() {
		return gonvml.ERROR_NO_PERMISSION
	}
	return gonvml.SUCCESS
}

func (g *GPU) installMIG() {
	d := g.Device
	d.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 7, g.call("GetMaxMigDeviceCount") }
	d.GetMigDeviceHandleByIndexFunc = func(n int) (gonvml.Device, gonvml.Return) {
		if ret := g.call("GetMigDeviceHandleByIndex"); ret != gonvml.SUCCESS {
			return nil, ret
		}
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		for _, in := range g.Instances {
			if n < len(in.CIs) {
				return in.CIs[n].Device, gonvml.SUCCESS
			}
			n -= len(in.CIs)
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	d.GetGpuInstanceByIdFunc = func(id int) (gonvml.GpuInstance, gonvml.Return) {
		if ret := g.privileged(); ret != gonvml.SUCCESS {
			return nil, ret
		}
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		for _, in := range g.Instances {
			if int(in.GI.Info.Id) == id {
				return in.GI, gonvml.SUCCESS
			}
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
}

// EnableMIG turns MIG on for a GPU and creates one GPU instance per
// profile index (gonvml.GPU_INSTANCE_PROFILE_*), each with one compute
// instance that spans it. It may be called again while a source runs: the
// new instances are added to the layout.
func (f *Fake) EnableMIG(gpu int, profiles ...int) []*Instance {
	g := f.GPUs[gpu]
	g.SetMigMode(gonvml.DEVICE_MIG_ENABLE)
	var out []*Instance
	for _, idx := range profiles {
		info := g.Config.MIGProfiles.GpuInstanceProfiles[idx]
		gi, _ := g.CreateGpuInstance(&info)
		sgi := gi.(*server.GpuInstance)
		in := &Instance{GI: sgi, profile: info,
			Memory: gonvml.Memory_v2{Total: info.MemorySizeMB << 20, Used: 1 << 30, Free: info.MemorySizeMB<<20 - 1<<30},
			GPM:    map[gonvml.GpmMetricId]float64{gonvml.GPM_METRIC_SM_UTIL: 25, gonvml.GPM_METRIC_DRAM_BW_UTIL: 15}}
		ci := g.newComputeInstance(in, 0, info)
		in.CIs, in.Device, in.UUID = []*ComputeInstance{ci}, ci.Device, ci.UUID
		out = append(out, in)
	}
	f.mu.Lock()
	g.Instances = append(g.Instances, out...)
	f.mu.Unlock()
	return out
}

// AddComputeInstance creates one more compute instance in a GPU instance,
// as `nvidia-smi mig -cci` does; its ID follows the instance's last one.
func (f *Fake) AddComputeInstance(gpu int, in *Instance) *ComputeInstance {
	g := f.GPUs[gpu]
	f.mu.Lock()
	defer f.mu.Unlock()
	ci := g.newComputeInstance(in, in.CIs[len(in.CIs)-1].ID+1, in.profile)
	in.CIs = append(in.CIs, ci)
	return ci
}

// DestroyInstance destroys a GPU instance and its compute instances, as
// `nvidia-smi mig -dci -dgi` does while a source runs.
func (f *Fake) DestroyInstance(gpu int, in *Instance) {
	g := f.GPUs[gpu]
	f.mu.Lock()
	defer f.mu.Unlock()
	in.gone = true
	for i, o := range g.Instances {
		if o == in {
			g.Instances = append(g.Instances[:i:i], g.Instances[i+1:]...)
			break
		}
	}
}

// newComputeInstance builds the MIG device of compute instance ciID. A MIG
// UUID has the form of a GPU's (MIG-<8-4-4-4-12 hex>); the fake's ends in
// the compute and GPU instance IDs, so the first compute instance's ends
// in the GPU instance ID alone.
func (g *GPU) newComputeInstance(in *Instance, ciID int, info gonvml.GpuInstanceProfileInfo) *ComputeInstance {
	giID := int(in.GI.Info.Id)
	body := g.UUID[len("GPU-"):]
	ci := &ComputeInstance{ID: ciID, UUID: fmt.Sprintf("MIG-%s%04x", body[:len(body)-4], ciID<<8|giID)}
	md := &mock.Device{}
	// alive answers a MIG device call: the parent's script first, then
	// INVALID_ARGUMENT once the instance is gone, as for a stale handle.
	alive := func(name string) gonvml.Return {
		if ret := g.call(name); ret != gonvml.SUCCESS {
			return ret
		}
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		if in.gone {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		return gonvml.SUCCESS
	}
	md.GetUUIDFunc = func() (string, gonvml.Return) { return ci.UUID, alive("GetUUID") }
	md.GetGpuInstanceIdFunc = func() (int, gonvml.Return) { return giID, alive("MIG.GetGpuInstanceId") }
	md.GetComputeInstanceIdFunc = func() (int, gonvml.Return) { return ciID, alive("MIG.GetComputeInstanceId") }
	md.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		if ret := alive("MIG.GetMemoryInfo_v2"); ret != gonvml.SUCCESS {
			return gonvml.Memory_v2{}, ret
		}
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		return in.Memory, gonvml.SUCCESS
	}
	// nvmlDeviceGetAttributes_v2 "only supports MIG device handles" and
	// needs no privileges: the GPU instance's slices and memory.
	md.GetAttributesFunc = func() (gonvml.DeviceAttributes, gonvml.Return) {
		return gonvml.DeviceAttributes{GpuInstanceSliceCount: info.SliceCount, ComputeInstanceSliceCount: 1,
			MemorySizeMB: info.MemorySizeMB, MultiprocessorCount: info.MultiprocessorCount}, alive("MIG.GetAttributes")
	}
	md.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		if ret := alive("MIG.GetComputeRunningProcesses"); ret != gonvml.SUCCESS {
			return nil, ret
		}
		g.f.mu.Lock()
		defer g.f.mu.Unlock()
		return append([]gonvml.ProcessInfo(nil), in.Processes...), gonvml.SUCCESS
	}
	// nvml.h: per-process utilisation is not given in MIG mode.
	md.GetProcessUtilizationFunc = func(uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		return nil, gonvml.ERROR_NOT_SUPPORTED
	}
	ci.Device = md
	return ci
}

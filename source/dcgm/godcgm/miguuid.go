package godcgm

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/source/dcgm"
)

// migUUIDClient is a dcgm.Client whose MIG hierarchy carries each
// instance's MIG UUID, read through NVML.
type migUUIDClient struct {
	dcgm.Client
	lib gonvml.Interface
	log logrus.FieldLogger
}

// WithMIGUUIDs wraps c so that MIGHierarchy fills in the MIG UUID of every
// GPU and compute instance from NVML (lib). go-dcgm's MIG entity info has
// none (MigEntityInfo, pkg/dcgm/mig.go), yet the device plugin names MIG
// devices MIG-<uuid>, and pods are attributed by that name; dcgm-exporter
// maps them through NVML as well (internal/pkg/nvmlprovider/provider.go,
// GetMIGDeviceInfoByID). When NVML cannot tell, the instances keep no
// UUID and the reason is logged: the instances are still sampled.
func WithMIGUUIDs(c dcgm.Client, lib gonvml.Interface, log logrus.FieldLogger) dcgm.Client {
	if log == nil {
		log = logrus.StandardLogger()
	}
	return &migUUIDClient{Client: c, lib: lib, log: log}
}

// migDevice is one MIG device as NVML lists it: a compute instance.
type migDevice struct {
	dev  gonvml.Device
	uuid string
}

// MIGHierarchy implements dcgm.Client.
func (m *migUUIDClient) MIGHierarchy() ([]dcgm.MIGInfo, error) {
	migs, err := m.Client.MIGHierarchy()
	if err != nil || len(migs) == 0 {
		return migs, err
	}
	gpus, err := m.Client.GPUs()
	if err != nil {
		return nil, err
	}
	if err := m.fill(migs, gpus); err != nil {
		m.log.WithError(err).Warn("cannot read MIG UUIDs through NVML; pods on MIG instances are not attributed")
	}
	return migs, nil
}

// fill sets the MIG UUIDs of migs, matching NVML's MIG devices by GPU
// instance ID and, where a GPU instance holds several, compute instance ID.
func (m *migUUIDClient) fill(migs []dcgm.MIGInfo, gpus []dcgm.GPUInfo) error {
	if ret := m.lib.Init(); ret != gonvml.SUCCESS {
		return fmt.Errorf("initialising NVML: %s", ret.Error())
	}
	defer m.lib.Shutdown()
	uuidOf := map[uint]string{}
	for _, g := range gpus {
		uuidOf[g.ID] = g.UUID
	}
	// byGI[gpu][GPU instance ID] lists the MIG devices of that instance.
	byGI := map[uint]map[int][]migDevice{}
	var firstErr error
	for _, mi := range migs {
		if _, done := byGI[mi.GPU]; done || mi.Entity.Group != dcgm.EntityGPUInstance {
			continue
		}
		devs, err := m.migDevices(uuidOf[mi.GPU])
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("GPU %s: %w", uuidOf[mi.GPU], err)
		}
		byGI[mi.GPU] = devs
	}
	giOf := map[dcgm.EntityRef]uint{}
	for _, mi := range migs {
		if mi.Entity.Group == dcgm.EntityGPUInstance {
			giOf[mi.Entity] = mi.InstanceID
		}
	}
	for i := range migs {
		mi := &migs[i]
		switch mi.Entity.Group {
		case dcgm.EntityGPUInstance:
			// The device plugin hands out a GPU instance with one compute
			// instance as one MIG device; one with several has no single
			// UUID.
			if devs := byGI[mi.GPU][int(mi.InstanceID)]; len(devs) == 1 {
				mi.MIGUUID = devs[0].uuid
			}
		case dcgm.EntityComputeInstance:
			gi, ok := giOf[mi.Parent]
			if !ok {
				gi = mi.InstanceID
			}
			mi.MIGUUID = m.computeInstanceUUID(byGI[mi.GPU][int(gi)], mi.ComputeInstanceID)
		}
	}
	return firstErr
}

// computeInstanceUUID picks the MIG device of compute instance ci among
// those of its GPU instance.
func (m *migUUIDClient) computeInstanceUUID(devs []migDevice, ci uint) string {
	if len(devs) == 1 {
		return devs[0].uuid
	}
	for _, d := range devs {
		if id, ret := d.dev.GetComputeInstanceId(); ret == gonvml.SUCCESS && id == int(ci) {
			return d.uuid
		}
	}
	return ""
}

// migDevices lists the MIG devices of the GPU with uuid, by GPU instance
// ID, as dcgm-exporter walks them (GetAllMIGDevicesProcessMemory): every
// index up to the maximum, skipping the empty ones.
func (m *migUUIDClient) migDevices(uuid string) (map[int][]migDevice, error) {
	gpu, ret := m.lib.DeviceGetHandleByUUID(uuid)
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("finding the GPU: %s", ret.Error())
	}
	n, ret := gpu.GetMaxMigDeviceCount()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("counting MIG devices: %s", ret.Error())
	}
	out := map[int][]migDevice{}
	for i := range n {
		d, ret := gpu.GetMigDeviceHandleByIndex(i)
		if ret == gonvml.ERROR_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != gonvml.SUCCESS {
			return out, fmt.Errorf("MIG device %d: %s", i, ret.Error())
		}
		gi, ret := d.GetGpuInstanceId()
		if ret != gonvml.SUCCESS {
			return out, fmt.Errorf("GPU instance of MIG device %d: %s", i, ret.Error())
		}
		id, ret := d.GetUUID()
		if ret != gonvml.SUCCESS {
			return out, fmt.Errorf("UUID of MIG device %d: %s", i, ret.Error())
		}
		out[gi] = append(out[gi], migDevice{dev: d, uuid: id})
	}
	return out, nil
}

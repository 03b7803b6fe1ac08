package dcgmfake

import (
	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source/dcgm"
)

// Fabric is what the host engine answers for a GPU's NVLink fabric fields
// (DCGM_FI_DEV_FABRIC_*, IDs 170-175), as DCGM fills them from
// nvmlDeviceGetGpuFabricInfoV (DCGM v4.6.0, dcgmlib/src/DcgmCacheManager.cpp,
// ReadFabricManagerStatusField).
type Fabric struct {
	// Status is dcgmFabricManagerStatus_t: 3 success, 4 failure, ...
	Status int64
	// Error is the DCGM return code of a completed training; nil before
	// training completed, where DCGM writes its blank.
	Error       *int64
	ClusterUUID string
	CliqueID    int64
	// HealthMask holds NVML's NVML_GPU_FABRIC_HEALTH_MASK_* conditions.
	HealthMask    int64
	HealthSummary int64
	// Unsupported is a GPU without a fabric (PCIe cards): NVML answers
	// NOT_SUPPORTED and DCGM writes its NOT_SUPPORTED sentinel in each
	// field.
	Unsupported bool
}

// HealthyFabricMask is the health mask of a GPU on a working HGX fabric:
// bandwidth not degraded (2 at bit 0), no route recovery (2 at bit 2), no
// unhealthy route (2 at bit 4), no access-timeout recovery (2 at bit 6), a
// correct configuration (1 at bit 8), partitions and a global fabric
// manager not supported (0) (nvml.h, NVML_GPU_FABRIC_HEALTH_MASK_*).
const HealthyFabricMask = 2 | 2<<2 | 2<<4 | 2<<6 | 1<<8

// HealthyFabric is a GPU that finished fabric training and is healthy.
var HealthyFabric = Fabric{Status: 3, Error: new(int64), ClusterUUID: "5e1f0a42-9c3d-4e8b-a107-2f6cd01388e4",
	CliqueID: 1, HealthMask: HealthyFabricMask, HealthSummary: 1}

// NoFabric is a GPU outside any NVLink fabric.
var NoFabric = Fabric{Unsupported: true}

// SetFabric sets what the fabric fields of a GPU answer from now on.
func (f *Fake) SetFabric(gpu uint, fb Fabric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fabric[gpu] = fb
}

// DCGM's NOT_SUPPORTED sentinels (dcgm_structs.h).
const (
	int64Blank        = 0x7ffffffffffffff0
	int64NotSupported = int64Blank + 2
	strNotSupported   = "<<<NOT_SUPPORTED>>>"
)

// value is the seq-th sample of a field on an entity: the fabric fields of
// a GPU answer from its Fabric, every other field from the generator.
func (f *Fake) value(e dcgm.EntityRef, field uint16, seq int64) (dcgm.Value, bool) {
	if e.Group != dcgm.EntityGPU || field < fieldid.FabricManagerStatus || field > fieldid.FabricHealthSummary {
		return f.gen(e, field, seq)
	}
	fb, ok := f.fabric[e.ID]
	switch {
	case !ok && f.genSet:
		return f.gen(e, field, seq)
	case !ok:
		fb = HealthyFabric
	}
	if field == fieldid.FabricClusterUUID {
		if fb.Unsupported {
			return dcgm.Value{Kind: dcgm.KindString, Str: strNotSupported}, true
		}
		return dcgm.Value{Kind: dcgm.KindString, Str: fb.ClusterUUID}, true
	}
	v := int64(int64NotSupported)
	switch {
	case fb.Unsupported:
	case field == fieldid.FabricManagerStatus:
		v = fb.Status
	case field == fieldid.FabricManagerError:
		v = int64Blank
		if fb.Error != nil {
			v = *fb.Error
		}
	case field == fieldid.FabricCliqueID:
		v = fb.CliqueID
	case field == fieldid.FabricHealthMask:
		v = fb.HealthMask
	case field == fieldid.FabricHealthSummary:
		v = fb.HealthSummary
	}
	return dcgm.Value{Kind: dcgm.KindInt64, Int: v}, true
}

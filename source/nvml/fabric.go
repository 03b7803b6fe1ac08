package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The fabric fields (DCGM_FI_DEV_FABRIC_*, IDs 170-175) come from one call,
// nvmlDeviceGetGpuFabricInfoV, read and mapped as DCGM's host engine does
// (DCGM, dcgmlib/src/DcgmCacheManager.cpp, ReadFabricManagerStatusField and
// GetFMStatusFromStruct): the v3 struct first, the v2 struct where the
// driver refuses v3, the health summary only from v3.

// DCGM's dcgmFabricManagerStatus_t (dcgm_structs.h).
const (
	dcgmFMStatusSuccess      = 3
	dcgmFMStatusFailure      = 4
	dcgmFMStatusUnrecognized = 5
	dcgmFMStatusNvmlTooOld   = 6
)

// FabricInfoReader is implemented by a scripted NVML library to answer
// nvmlDeviceGetGpuFabricInfoV: go-nvml's GpuFabricInfoHandler calls the
// real library whatever device it holds, so a fake cannot stand behind it.
// version is the struct version asked for, 2 or 3.
type FabricInfoReader interface {
	GpuFabricInfoV(d gonvml.Device, version uint32) (gonvml.GpuFabricInfoV, gonvml.Return)
}

// fabricInfo is the answer and the struct version that gave it: 1 (the
// unversioned call, without a health mask), 2 (no summary) or 3.
type fabricInfo struct {
	gonvml.GpuFabricInfoV
	version uint32
}

// callFabricInfo asks the library for a struct version.
func (s *Source) callFabricInfo(h gonvml.Device, version uint32) (gonvml.GpuFabricInfoV, gonvml.Return) {
	if fr, ok := s.lib.(FabricInfoReader); ok {
		return fr.GpuFabricInfoV(h, version)
	}
	if version == 3 {
		i, ret := h.GetGpuFabricInfoV().V3()
		return gonvml.GpuFabricInfoV{ClusterUuid: i.ClusterUuid, Status: i.Status, CliqueId: i.CliqueId,
			State: i.State, HealthMask: i.HealthMask, HealthSummary: i.HealthSummary}, ret
	}
	i, ret := h.GetGpuFabricInfoV().V2()
	return gonvml.GpuFabricInfoV{ClusterUuid: i.ClusterUuid, Status: i.Status, CliqueId: i.CliqueId,
		State: i.State, HealthMask: i.HealthMask}, ret
}

// versionedFabricInfo says whether the library is asked
// nvmlDeviceGetGpuFabricInfoV, not only the unversioned call.
func (s *Source) versionedFabricInfo() bool {
	_, ok := s.lib.(FabricInfoReader)
	return ok || s.realLib
}

// readFabricInfo reads the newest struct the driver answers. A library
// that is neither the real one nor a FabricInfoReader (go-nvml's mocks)
// is asked the unversioned call only, which every mock can script.
func (s *Source) readFabricInfo(h gonvml.Device) (fabricInfo, gonvml.Return) {
	if !s.versionedFabricInfo() {
		i, ret := h.GetGpuFabricInfo()
		return fabricInfo{GpuFabricInfoV: gonvml.GpuFabricInfoV{ClusterUuid: i.ClusterUuid, Status: i.Status,
			CliqueId: i.CliqueId, State: i.State}, version: 1}, ret
	}
	if !s.fabricV2.Load() {
		i, ret := s.callFabricInfo(h, 3)
		if ret != gonvml.ERROR_ARGUMENT_VERSION_MISMATCH && ret != gonvml.ERROR_FUNCTION_NOT_FOUND {
			return fabricInfo{GpuFabricInfoV: i, version: 3}, ret
		}
		s.fabricV2.Store(true)
	}
	i, ret := s.callFabricInfo(h, 2)
	i.HealthSummary = 0
	return fabricInfo{GpuFabricInfoV: i, version: 2}, ret
}

// fabric reads the fabric info once per GPU and collection. A GPU
// without an NVLink fabric (PCIe cards) answers NOT_SUPPORTED, or a
// NOT_SUPPORTED state: its fabric fields are absent, not zeros.
func (r *reading) fabric() (fabricInfo, error) {
	if r.fab == nil && r.fabErr == nil {
		i, ret := r.src.readFabricInfo(r.h)
		if ret == gonvml.SUCCESS && i.State == gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
			ret = gonvml.ERROR_NOT_SUPPORTED
		}
		r.fab, r.fabErr = &i, nvmlErr("GetGpuFabricInfoV", ret)
	}
	if r.fabErr != nil {
		return fabricInfo{}, r.fabErr
	}
	return *r.fab, nil
}

// readFabricStatus is DCGM_FI_DEV_FABRIC_MANAGER_STATUS: NVML's states
// 1..3 (not started, in progress, completed) are DCGM's, a completed state
// whose status is an error is DCGM's failure (4), a state NVML added later
// DCGM's unrecognized (5), and a driver without the call DCGM's "NVML too
// old" (6).
func readFabricStatus(r *reading) (float64, error) {
	info, err := r.fabric()
	if ret, ok := returnOf(err); ok && ret == gonvml.ERROR_FUNCTION_NOT_FOUND && r.src.versionedFabricInfo() {
		return dcgmFMStatusNvmlTooOld, nil
	}
	if err != nil {
		return 0, err
	}
	switch {
	case info.State > gonvml.GPU_FABRIC_STATE_COMPLETED:
		return dcgmFMStatusUnrecognized, nil
	case info.State == gonvml.GPU_FABRIC_STATE_COMPLETED && gonvml.Return(info.Status) != gonvml.SUCCESS:
		return dcgmFMStatusFailure, nil
	}
	return float64(info.State), nil
}

// readFabricError is DCGM_FI_DEV_FABRIC_MANAGER_ERROR: DCGM's return code
// for the status NVML gives once training completed (0 for success), and
// nothing before that.
func readFabricError(r *reading) (float64, error) {
	info, err := r.fabric()
	if err != nil {
		return 0, err
	}
	if info.State != gonvml.GPU_FABRIC_STATE_COMPLETED {
		return 0, notSupported("GetGpuFabricInfoV(training not completed)")
	}
	return float64(dcgmReturnOf(gonvml.Return(info.Status))), nil
}

// dcgmReturnOf maps an NVML return to DCGM's dcgmReturn_t (DCGM,
// common/DcgmUtilities.h, NvmlReturnToDcgmReturn).
func dcgmReturnOf(ret gonvml.Return) int {
	switch ret {
	case gonvml.SUCCESS:
		return 0 // DCGM_ST_OK
	case gonvml.ERROR_NOT_SUPPORTED:
		return -6 // DCGM_ST_NOT_SUPPORTED
	case gonvml.ERROR_NO_PERMISSION:
		return -17 // DCGM_ST_NO_PERMISSION
	case gonvml.ERROR_NOT_FOUND:
		return -14 // DCGM_ST_NO_DATA
	case gonvml.ERROR_TIMEOUT:
		return -11 // DCGM_ST_TIMEOUT
	case gonvml.ERROR_GPU_IS_LOST:
		return -18 // DCGM_ST_GPU_IS_LOST
	case gonvml.ERROR_RESET_REQUIRED:
		return -19 // DCGM_ST_RESET_REQUIRED
	case gonvml.ERROR_INVALID_ARGUMENT:
		return -1 // DCGM_ST_BADPARAM
	case gonvml.ERROR_INSUFFICIENT_RESOURCES:
		return -49 // DCGM_ST_INSUFFICIENT_RESOURCES
	case gonvml.ERROR_UNINITIALIZED:
		return -56 // DCGM_ST_NVML_NOT_LOADED
	}
	return -8 // DCGM_ST_NVML_ERROR
}

// readFabricClusterUUID is DCGM_FI_DEV_FABRIC_CLUSTER_UUID, written as
// DCGM's getGuidString writes it.
func readFabricClusterUUID(r *reading) (string, error) {
	info, err := r.fabric()
	if err != nil {
		return "", err
	}
	u := info.ClusterUuid
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

func readFabricCliqueID(r *reading) (float64, error) {
	info, err := r.fabric()
	return float64(info.CliqueId), err
}

// readFabricHealthMask is DCGM_FI_DEV_FABRIC_HEALTH_MASK, NVML's
// NVML_GPU_FABRIC_HEALTH_MASK_* bits as they are; the unversioned call
// has none.
func readFabricHealthMask(r *reading) (float64, error) {
	info, err := r.fabric()
	if err == nil && info.version < 2 {
		err = notSupported("GetGpuFabricInfo(no health mask)")
	}
	return float64(info.HealthMask), err
}

// readFabricHealthSummary is DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY, which
// only the v3 struct carries (DCGM reports NOT_SUPPORTED from v2).
func readFabricHealthSummary(r *reading) (float64, error) {
	info, err := r.fabric()
	if err == nil && info.version < 3 {
		err = notSupported("GetGpuFabricInfoV(v2: no health summary)")
	}
	return float64(info.HealthSummary), err
}

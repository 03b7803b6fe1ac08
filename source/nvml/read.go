package nvml

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlErr wraps a non-success return with the call that produced it, so
// that logs say which NVML function failed; errors.As still finds the
// gonvml.Return for classification.
func nvmlErr(call string, ret gonvml.Return) error {
	if ret == gonvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %w", call, ret)
}

func notSupported(call string) error {
	return nvmlErr(call, gonvml.ERROR_NOT_SUPPORTED)
}

// returnOf extracts the NVML return code from an error chain.
func returnOf(err error) (gonvml.Return, bool) {
	var ret gonvml.Return
	if errors.As(err, &ret) {
		return ret, true
	}
	return 0, false
}

// isNotSupported reports errors that mean "this GPU cannot give this
// field": they make the field absent, not a failure.
func isNotSupported(err error) bool {
	ret, ok := returnOf(err)
	return ok && (ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_FUNCTION_NOT_FOUND)
}

// isNoPermission reports a query the caller is not privileged for, such as
// a MIG-enabled GPU's whole memory for a non-root user.
func isNoPermission(err error) bool {
	ret, ok := returnOf(err)
	return ok && ret == gonvml.ERROR_NO_PERMISSION
}

// The reasons a field refused for lack of privileges is left out.
const (
	noPermissionHint    = "NVML gives this field to root only; run gpuscope as root (securityContext.runAsUser: 0) to export it"
	noPermissionMIGHint = "in MIG mode NVML gives the whole GPU's memory and processes to root only; the MIG instances' own series " +
		"are exported, and running gpuscope as root (securityContext.runAsUser: 0) exports the whole GPU's too"
)

// isLost reports errors after which a GPU's handle cannot be trusted: the
// GPU fell off the bus, needs a reset, or is gone. ERROR_UNKNOWN is not
// one: nvml.h gives it as the answer of nearly every query "on any
// unexpected error", and one quirky query must not take every other field
// of the GPU with it (allFailuresLost covers a GPU that fails throughout).
func isLost(err error) bool {
	ret, ok := returnOf(err)
	if !ok {
		return false
	}
	switch ret {
	case gonvml.ERROR_GPU_IS_LOST, gonvml.ERROR_RESET_REQUIRED, gonvml.ERROR_GPU_NOT_FOUND:
		return true
	}
	return false
}

func call(name string, f func() (string, gonvml.Return)) (string, error) {
	s, ret := f()
	return s, nvmlErr(name, ret)
}

func callU32(name string, f func() (uint32, gonvml.Return), scale float64) (float64, error) {
	v, ret := f()
	return float64(v) * scale, nvmlErr(name, ret)
}

// memInfo is GetMemoryInfo_v2's answer, or GetMemoryInfo's where the
// driver has no v2 (then the reserved size is unknown).
type memInfo struct {
	gonvml.Memory_v2
	hasReserved bool
}

type remapInfo struct {
	corr, unc       int
	pending, failed bool
}

// reading is one pass over one device (or MIG instance) handle. It caches
// the answers of NVML calls that serve several fields, so that each call
// happens at most once per pass.
type reading struct {
	src *Source
	dev *device
	h   gonvml.Device
	// now is when the GPU is read, for fields that are rates of counters.
	now time.Time

	util    *gonvml.Utilization
	utilErr error
	mem     *memInfo
	memErr  error
	remap   *remapInfo
	remapEr error
	fab     *fabricInfo
	fabErr  error

	nvlinkKiBs *float64
	nvlinkErr  error
}

func (r *reading) utilization() (gonvml.Utilization, error) {
	if r.util == nil && r.utilErr == nil {
		u, ret := r.h.GetUtilizationRates()
		r.util, r.utilErr = &u, nvmlErr("GetUtilizationRates", ret)
	}
	if r.utilErr != nil {
		return gonvml.Utilization{}, r.utilErr
	}
	return *r.util, nil
}

func (r *reading) memory() (memInfo, error) {
	if r.mem == nil && r.memErr == nil {
		m, ret := r.h.GetMemoryInfo_v2()
		if ret == gonvml.SUCCESS {
			r.mem = &memInfo{Memory_v2: m, hasReserved: true}
		} else if ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_FUNCTION_NOT_FOUND {
			m1, ret1 := r.h.GetMemoryInfo()
			r.mem = &memInfo{Memory_v2: gonvml.Memory_v2{Total: m1.Total, Free: m1.Free, Used: m1.Used}}
			r.memErr = nvmlErr("GetMemoryInfo", ret1)
		} else {
			r.memErr = nvmlErr("GetMemoryInfo_v2", ret)
		}
	}
	if r.memErr != nil {
		return memInfo{}, r.memErr
	}
	return *r.mem, nil
}

func (r *reading) remappedRows() (remapInfo, error) {
	if r.remap == nil && r.remapEr == nil {
		corr, unc, pending, failed, ret := r.h.GetRemappedRows()
		r.remap, r.remapEr = &remapInfo{corr: corr, unc: unc, pending: pending, failed: failed}, nvmlErr("GetRemappedRows", ret)
	}
	if r.remapEr != nil {
		return remapInfo{}, r.remapEr
	}
	return *r.remap, nil
}

// linkCount is read once per device: the number of NVLinks does not change
// while the driver is loaded.
func (r *reading) linkCount() (int, error) {
	if r.dev.links >= 0 {
		return r.dev.links, nil
	}
	v, err := r.fieldValue(gonvml.FI_DEV_NVLINK_LINK_COUNT, 0)
	if err != nil {
		return 0, err
	}
	r.dev.links = int(v)
	return r.dev.links, nil
}

// fieldValue reads one NVML field-value ID.
func (r *reading) fieldValue(id, scope uint32) (float64, error) {
	vals := []gonvml.FieldValue{{FieldId: id, ScopeId: scope}}
	if err := nvmlErr(fmt.Sprintf("GetFieldValues(%d)", id), r.h.GetFieldValues(vals)); err != nil {
		return 0, err
	}
	return decodeFieldValue(&vals[0])
}

// decodeFieldValue turns NVML's tagged union into a float64.
func decodeFieldValue(v *gonvml.FieldValue) (float64, error) {
	if err := nvmlErr(fmt.Sprintf("field value %d (scope %d)", v.FieldId, v.ScopeId), gonvml.Return(v.NvmlReturn)); err != nil {
		return 0, err
	}
	b := v.Value[:]
	switch gonvml.ValueType(v.ValueType) {
	case gonvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case gonvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(b)), nil
	case gonvml.VALUE_TYPE_UNSIGNED_LONG, gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(b)), nil
	case gonvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(b))), nil
	case gonvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(b))), nil
	case gonvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(b)), nil
	}
	return 0, fmt.Errorf("field value %d: unknown value type %d", v.FieldId, v.ValueType)
}

// allFailuresLost is how many reads in a row in which every field of a GPU
// failed take the GPU out as lost, as an unexplained error on one field
// does not.
const allFailuresLost = 3

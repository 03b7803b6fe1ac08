package nvml

import (
	"strconv"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// This file reads the states, limits and versions that nvidia-smi reports
// beside the counters: P-state, modes, power limit
// constraints, the CUDA versions. Each is given in DCGM's encoding and unit.

// readPstate is the performance state 0..15; NVML's "unknown" is no value.
func readPstate(r *reading) (float64, error) {
	p, ret := r.h.GetPerformanceState()
	if ret == gonvml.SUCCESS && p == gonvml.PSTATE_UNKNOWN {
		ret = gonvml.ERROR_NOT_SUPPORTED
	}
	return float64(p), nvmlErr("GetPerformanceState", ret)
}

// readComputeMode is the compute mode in DCGM's numbering, which drops
// NVML's removed exclusive-thread mode: NVML's prohibited (2) is DCGM's 1
// and its exclusive-process (3) DCGM's 2 (DCGM,
// dcgmlib/src/DcgmCacheManager.cpp, case DCGM_FI_DEV_GPU_COMPUTE_MODE).
func readComputeMode(r *reading) (float64, error) {
	m, ret := r.h.GetComputeMode()
	switch m {
	case gonvml.COMPUTEMODE_PROHIBITED:
		m = 1
	case gonvml.COMPUTEMODE_EXCLUSIVE_PROCESS:
		m = 2
	}
	return float64(m), nvmlErr("GetComputeMode", ret)
}

func readPersistenceMode(r *reading) (float64, error) {
	m, ret := r.h.GetPersistenceMode()
	return boolf(m == gonvml.FEATURE_ENABLED), nvmlErr("GetPersistenceMode", ret)
}

// readMIGMode is the current MIG mode, 1 enabled.
func readMIGMode(r *reading) (float64, error) {
	cur, _, ret := r.h.GetMigMode()
	return boolf(cur == gonvml.DEVICE_MIG_ENABLE), nvmlErr("GetMigMode", ret)
}

// readCUDADriverVersion is DCGM's integer, major*1000 + minor*10, which is
// NVML's too.
func readCUDADriverVersion(r *reading) (string, error) {
	v, ret := r.src.lib.SystemGetCudaDriverVersion()
	return strconv.Itoa(v), nvmlErr("SystemGetCudaDriverVersion", ret)
}

// readComputeCapability is DCGM's major<<16 | minor (dcgm_fields.h,
// DCGM_CUDA_COMPUTE_CAPABILITY_MAJOR).
func readComputeCapability(r *reading) (string, error) {
	major, minor, ret := r.h.GetCudaComputeCapability()
	return strconv.Itoa(major<<16 | minor), nvmlErr("GetCudaComputeCapability", ret)
}

// readPowerLimitConstraint is the lowest or highest power limit that can be
// set, in W.
func readPowerLimitConstraint(r *reading, highest bool) (float64, error) {
	lo, hi, ret := r.h.GetPowerManagementLimitConstraints()
	v := lo
	if highest {
		v = hi
	}
	return float64(v) / mWPerW, nvmlErr("GetPowerManagementLimitConstraints", ret)
}

package counters

// nvmlSupport says, per DCGM field ID, whether the NVML source can read the
// field. An empty string means it can; any other value is the reason it
// cannot, shown by `gpuscope counters list`. Fields absent from the map are
// not served by NVML. The nvml package's tests check this table against its
// field mapping, so the two cannot drift apart.
var nvmlSupport = map[uint16]string{
	// Identity and versions, for label fields.
	1:  "", // DCGM_FI_DRIVER_VERSION
	2:  "", // DCGM_FI_NVML_VERSION
	50: "", // DCGM_FI_DEV_NAME
	51: "", // DCGM_FI_DEV_BRAND
	53: "", // DCGM_FI_DEV_SERIAL
	54: "", // DCGM_FI_DEV_UUID
	57: "", // DCGM_FI_DEV_PCI_BUSID
	85: "", // DCGM_FI_DEV_VBIOS_VERSION

	// Clocks, clock events, temperatures, power.
	100: "", // DCGM_FI_DEV_SM_CLOCK
	101: "", // DCGM_FI_DEV_MEM_CLOCK
	102: "", // DCGM_FI_DEV_VIDEO_CLOCK
	110: "", // DCGM_FI_DEV_APP_SM_CLOCK
	112: "", // DCGM_FI_DEV_CLOCKS_EVENT_REASONS
	113: "", // DCGM_FI_DEV_MAX_SM_CLOCK
	140: "", // DCGM_FI_DEV_MEMORY_TEMP
	150: "", // DCGM_FI_DEV_GPU_TEMP
	155: "", // DCGM_FI_DEV_POWER_USAGE
	156: "", // DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
	158: "", // DCGM_FI_DEV_SLOWDOWN_TEMP
	159: "", // DCGM_FI_DEV_SHUTDOWN_TEMP
	160: "", // DCGM_FI_DEV_POWER_MGMT_LIMIT
	164: "", // DCGM_FI_DEV_ENFORCED_POWER_LIMIT

	// PCIe, utilisation, XID, violations.
	200: "", // DCGM_FI_DEV_PCIE_TX_THROUGHPUT
	201: "", // DCGM_FI_DEV_PCIE_RX_THROUGHPUT
	202: "", // DCGM_FI_DEV_PCIE_REPLAY_COUNTER
	203: "", // DCGM_FI_DEV_GPU_UTIL
	204: "", // DCGM_FI_DEV_MEM_COPY_UTIL
	206: "", // DCGM_FI_DEV_ENC_UTIL
	207: "", // DCGM_FI_DEV_DEC_UTIL
	230: "", // DCGM_FI_DEV_XID_ERRORS
	240: "", // DCGM_FI_DEV_POWER_VIOLATION
	241: "", // DCGM_FI_DEV_THERMAL_VIOLATION
	242: "", // DCGM_FI_DEV_SYNC_BOOST_VIOLATION
	243: "", // DCGM_FI_DEV_BOARD_LIMIT_VIOLATION
	244: "", // DCGM_FI_DEV_LOW_UTIL_VIOLATION
	245: "", // DCGM_FI_DEV_RELIABILITY_VIOLATION

	// Framebuffer, ECC, retired pages, remapped rows.
	250: "", // DCGM_FI_DEV_FB_TOTAL
	251: "", // DCGM_FI_DEV_FB_FREE
	252: "", // DCGM_FI_DEV_FB_USED
	253: "", // DCGM_FI_DEV_FB_RESERVED
	254: "not derived by the NVML source: DCGM computes it from its own cache",
	310: "", // DCGM_FI_DEV_ECC_SBE_VOL_TOTAL
	311: "", // DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
	312: "", // DCGM_FI_DEV_ECC_SBE_AGG_TOTAL
	313: "", // DCGM_FI_DEV_ECC_DBE_AGG_TOTAL
	390: "", // DCGM_FI_DEV_RETIRED_SBE
	391: "", // DCGM_FI_DEV_RETIRED_DBE
	392: "", // DCGM_FI_DEV_RETIRED_PENDING
	393: "", // DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS
	394: "", // DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
	395: "", // DCGM_FI_DEV_ROW_REMAP_FAILURE
	396: "", // DCGM_FI_DEV_ROW_REMAP_PENDING

	// NVLink, through NVML's field-values API.
	409: "", // DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
	419: "", // DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
	429: "", // DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
	439: "", // DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
	449: "", // DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL

	526: "", // DCGM_FI_DEV_VGPU_LICENSE_STATUS

	// Profiling, through GPM on Hopper and later.
	1001: "", // DCGM_FI_PROF_GR_ENGINE_ACTIVE
	1002: "", // DCGM_FI_PROF_SM_ACTIVE
	1003: "", // DCGM_FI_PROF_SM_OCCUPANCY
	1004: "", // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
	1005: "", // DCGM_FI_PROF_DRAM_ACTIVE
	1006: "", // DCGM_FI_PROF_PIPE_FP64_ACTIVE
	1007: "", // DCGM_FI_PROF_PIPE_FP32_ACTIVE
	1008: "", // DCGM_FI_PROF_PIPE_FP16_ACTIVE
	1009: "", // DCGM_FI_PROF_PCIE_TX_BYTES
	1010: "", // DCGM_FI_PROF_PCIE_RX_BYTES
	1011: "", // DCGM_FI_PROF_NVLINK_TX_BYTES
	1012: "", // DCGM_FI_PROF_NVLINK_RX_BYTES
	1013: "needs DCGM: no GPM metric matches the IMMA tensor pipe",
	1014: "needs DCGM: no GPM metric matches the HMMA tensor pipe alone",
	1015: "needs DCGM: no GPM metric matches the DFMA tensor pipe alone",
	1016: "needs DCGM: no GPM metric matches the integer pipe",

	// Exporter-side fields the engine derives from fields above.
	FieldExpXIDErrorsCount:   "", // from the XID events of field 230
	FieldExpClockEventsCount: "", // from the bitmask of field 112
	FieldExpGPUHealthStatus:  "DCGM-only health aggregate",
	FieldExpP2PStatus:        "needs DCGM: the NVLink P2P status comes from DCGM's topology checks",
}

// NVMLSupport returns a copy of the NVML support table: per DCGM field ID,
// "" when the NVML source serves the field, else why it does not.
func NVMLSupport() map[uint16]string {
	out := make(map[uint16]string, len(nvmlSupport))
	for id, reason := range nvmlSupport {
		out[id] = reason
	}
	return out
}

package counters

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// meta is what the catalog knows about a described field. Units and help
// follow DCGM's documentation of the field and dcgm-exporter's help texts.
type meta struct {
	kind ValueKind
	typ  MetricType
	unit string
	help string
	def  bool
}

func gpuGauge(kind ValueKind, unit, help string) meta {
	return meta{kind: kind, typ: Gauge, unit: unit, help: help}
}

func gpuCounter(unit, help string) meta {
	return meta{kind: KindInt, typ: Counter, unit: unit, help: help}
}

func label(help string) meta {
	return meta{kind: KindString, typ: Label, help: help}
}

func everyday(m meta) meta {
	m.def = true
	return m
}

// curated holds the fields an operator picks from, by current DCGM name.
// Families with one field per link, lane or memory location are described
// by the patterns below instead.
var curated = map[string]meta{
	// Identity and configuration, exported as labels.
	"DCGM_FI_DRIVER_VERSION":        everyday(label("Driver Version")),
	"DCGM_FI_NVML_VERSION":          label("NVML Version"),
	"DCGM_FI_DEV_NAME":              label("Device name"),
	"DCGM_FI_DEV_BRAND":             label("Device Brand"),
	"DCGM_FI_DEV_SERIAL":            label("Device Serial Number"),
	"DCGM_FI_DEV_UUID":              label("Device UUID"),
	"DCGM_FI_DEV_PCI_BUSID":         label("PCI bus ID of the device"),
	"DCGM_FI_DEV_OEM_INFOROM_VER":   label("OEM inforom version"),
	"DCGM_FI_DEV_ECC_INFOROM_VER":   label("ECC inforom version"),
	"DCGM_FI_DEV_POWER_INFOROM_VER": label("Power management object inforom version"),
	"DCGM_FI_DEV_INFOROM_IMAGE_VER": label("Inforom image version"),
	"DCGM_FI_DEV_VBIOS_VERSION":     label("VBIOS version of the device"),
	"DCGM_FI_CUDA_DRIVER_VERSION":   {kind: KindInt, typ: Label, help: "CUDA driver version (major*1000 + minor*10)"},

	// Modes and states.
	// DCGM's numbering, without NVML's removed exclusive-thread mode.
	"DCGM_FI_DEV_COMPUTE_MODE":        gpuGauge(KindInt, "", "Compute mode (0 default, 1 prohibited, 2 exclusive process)."),
	"DCGM_FI_DEV_PERSISTENCE_MODE":    gpuGauge(KindInt, "", "Persistence mode (1 enabled, 0 disabled)."),
	"DCGM_FI_DEV_MIG_MODE":            gpuGauge(KindInt, "", "MIG mode (1 enabled, 0 disabled)."),
	"DCGM_FI_DEV_MIG_MAX_SLICES":      gpuGauge(KindInt, "count", "Maximum number of MIG slices of the device."),
	"DCGM_FI_DEV_CC_MODE":             gpuGauge(KindInt, "", "Confidential computing mode (1 enabled, 0 disabled)."),
	"DCGM_FI_DEV_P2P_NVLINK_STATUS":   gpuGauge(KindInt, "", "Bitmap of the NVLink P2P status from this GPU to the others of the host."),
	"DCGM_FI_DEV_PSTATE":              gpuGauge(KindInt, "", "Performance state (P-State) 0-15, 0 is the highest."),
	"DCGM_FI_DEV_VGPU_LICENSE_STATUS": everyday(gpuGauge(KindInt, "", "vGPU License status")),
	"DCGM_FI_DEV_ECC_CURRENT":         gpuGauge(KindInt, "", "Current ECC mode (1 enabled, 0 disabled)."),
	"DCGM_FI_DEV_ECC_PENDING":         gpuGauge(KindInt, "", "ECC mode after the next reboot (1 enabled, 0 disabled)."),

	// NVLink fabric (NVSwitch systems), from nvmlDeviceGetGpuFabricInfoV
	// as DCGM maps it; dcgm-exporter collects these only when asked.
	"DCGM_FI_DEV_FABRIC_MANAGER_STATUS": gpuGauge(KindInt, "", "Fabric manager status of the GPU (0 not supported, 1 not started, 2 in progress, 3 success, 4 failure, 5 unrecognized, 6 NVML too old)."),
	"DCGM_FI_DEV_FABRIC_MANAGER_ERROR":  gpuGauge(KindInt, "", "DCGM return code of the fabric training once it completed (0 success, a negative DCGM_ST_* code on failure)."),
	"DCGM_FI_DEV_FABRIC_CLUSTER_UUID":   label("UUID of the NVLink fabric cluster the GPU belongs to"),
	"DCGM_FI_DEV_FABRIC_CLIQUE_ID":      gpuGauge(KindInt, "", "ID of the fabric clique the GPU belongs to."),
	"DCGM_FI_DEV_FABRIC_HEALTH_MASK":    gpuGauge(KindInt, "", "Fabric health mask (NVML_GPU_FABRIC_HEALTH_MASK_*: 2 bits per condition, 1 true, 2 false; degraded bandwidth at bit 0, route recovery 2, route unhealthy 4, access-timeout recovery 6, configuration 8 (4 bits, 1 correct), partition assigned 12, global fabric manager 14 (1 connected, 2 disconnected))."),
	"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": gpuGauge(KindInt, "", "Fabric health summary (0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity)."),

	// Clocks.
	"DCGM_FI_DEV_SM_CLOCK":             everyday(gpuGauge(KindInt, "MHz", "SM clock frequency (in MHz).")),
	"DCGM_FI_DEV_MEM_CLOCK":            everyday(gpuGauge(KindInt, "MHz", "Memory clock frequency (in MHz).")),
	"DCGM_FI_DEV_VIDEO_CLOCK":          gpuGauge(KindInt, "MHz", "Video encoder/decoder clock frequency (in MHz)."),
	"DCGM_FI_DEV_APP_SM_CLOCK":         gpuGauge(KindInt, "MHz", "SM application clock (in MHz)."),
	"DCGM_FI_DEV_APP_MEM_CLOCK":        gpuGauge(KindInt, "MHz", "Memory application clock (in MHz)."),
	"DCGM_FI_DEV_MAX_SM_CLOCK":         gpuGauge(KindInt, "MHz", "Maximum supported SM clock (in MHz)."),
	"DCGM_FI_DEV_MAX_MEM_CLOCK":        gpuGauge(KindInt, "MHz", "Maximum supported memory clock (in MHz)."),
	"DCGM_FI_DEV_MAX_VIDEO_CLOCK":      gpuGauge(KindInt, "MHz", "Maximum supported video encoder/decoder clock (in MHz)."),
	"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": everyday(gpuGauge(KindInt, "", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*).")),

	// Temperatures.
	"DCGM_FI_DEV_MEMORY_TEMP":     everyday(gpuGauge(KindInt, "C", "Memory temperature (in C).")),
	"DCGM_FI_DEV_GPU_TEMP":        everyday(gpuGauge(KindInt, "C", "GPU temperature (in C).")),
	"DCGM_FI_DEV_MEM_MAX_OP_TEMP": gpuGauge(KindInt, "C", "Maximum operating temperature of the memory (in C)."),
	"DCGM_FI_DEV_GPU_MAX_OP_TEMP": gpuGauge(KindInt, "C", "Maximum operating temperature of the GPU (in C)."),
	"DCGM_FI_DEV_GPU_TEMP_LIMIT":  gpuGauge(KindInt, "C", "Thermal margin: distance to the nearest slowdown threshold (in C)."),
	"DCGM_FI_DEV_SLOWDOWN_TEMP":   gpuGauge(KindInt, "C", "Slowdown temperature (in C)."),
	"DCGM_FI_DEV_SHUTDOWN_TEMP":   gpuGauge(KindInt, "C", "Shutdown temperature (in C)."),
	"DCGM_FI_DEV_FAN_SPEED":       everyday(gpuGauge(KindInt, "%", "Fan speed (in %).")),

	// Power and energy.
	"DCGM_FI_DEV_POWER_USAGE":              everyday(gpuGauge(KindFloat, "W", "Power draw (in W).")),
	"DCGM_FI_DEV_POWER_USAGE_INSTANT":      gpuGauge(KindFloat, "W", "Instantaneous power draw (in W)."),
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": everyday(gpuCounter("mJ", "Total energy consumption since boot (in mJ).")),
	"DCGM_FI_DEV_POWER_MGMT_LIMIT":         everyday(gpuGauge(KindFloat, "W", "Current power limit (in W).")),
	"DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN":     gpuGauge(KindFloat, "W", "Minimum power limit that can be set (in W)."),
	"DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX":     gpuGauge(KindFloat, "W", "Maximum power limit that can be set (in W)."),
	"DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF":     gpuGauge(KindFloat, "W", "Default power limit (in W)."),
	"DCGM_FI_DEV_ENFORCED_POWER_LIMIT":     everyday(gpuGauge(KindFloat, "W", "Power limit the driver enforces after all limiters (in W).")),

	// PCIe.
	"DCGM_FI_DEV_PCIE_TX_THROUGHPUT":            gpuGauge(KindInt, "KB/s", "PCIe TX throughput (in KB/s); deprecated, use DCGM_FI_PROF_PCIE_TX_BYTES."),
	"DCGM_FI_DEV_PCIE_RX_THROUGHPUT":            gpuGauge(KindInt, "KB/s", "PCIe RX throughput (in KB/s); deprecated, use DCGM_FI_PROF_PCIE_RX_BYTES."),
	"DCGM_FI_DEV_PCIE_REPLAY_COUNTER":           everyday(gpuCounter("count", "Total number of PCIe retries.")),
	"DCGM_FI_DEV_PCIE_MAX_LINK_GEN":             everyday(gpuGauge(KindInt, "", "PCIe maximum link generation.")),
	"DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH":           everyday(gpuGauge(KindInt, "lanes", "PCIe maximum link width (in lanes).")),
	"DCGM_FI_DEV_PCIE_LINK_GEN":                 everyday(gpuGauge(KindInt, "", "PCIe current link generation.")),
	"DCGM_FI_DEV_PCIE_LINK_WIDTH":               everyday(gpuGauge(KindInt, "lanes", "PCIe current link width (in lanes).")),
	"DCGM_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS": gpuCounter("count", "Total number of PCIe correctable errors."),

	// Utilization.
	"DCGM_FI_DEV_GPU_UTIL":      everyday(gpuGauge(KindInt, "%", "GPU utilization (in %).")),
	"DCGM_FI_DEV_MEM_COPY_UTIL": everyday(gpuGauge(KindInt, "%", "Memory utilization (in %).")),
	"DCGM_FI_DEV_ENC_UTIL":      everyday(gpuGauge(KindInt, "%", "Encoder utilization (in %).")),
	"DCGM_FI_DEV_DEC_UTIL":      everyday(gpuGauge(KindInt, "%", "Decoder utilization (in %).")),

	// Errors and violations.
	"DCGM_FI_DEV_XID_ERRORS":                  everyday(gpuGauge(KindInt, "", "Value of the last XID error encountered.")),
	"DCGM_FI_DEV_POWER_VIOLATION":             everyday(gpuCounter("ns", "Throttling duration due to power constraints (in ns).")),
	"DCGM_FI_DEV_THERMAL_VIOLATION":           everyday(gpuCounter("ns", "Throttling duration due to thermal constraints (in ns).")),
	"DCGM_FI_DEV_SYNC_BOOST_VIOLATION":        everyday(gpuCounter("ns", "Throttling duration due to sync-boost constraints (in ns).")),
	"DCGM_FI_DEV_BOARD_LIMIT_VIOLATION":       everyday(gpuCounter("ns", "Throttling duration due to board limit constraints (in ns).")),
	"DCGM_FI_DEV_LOW_UTIL_VIOLATION":          everyday(gpuCounter("ns", "Throttling duration due to low utilization (in ns).")),
	"DCGM_FI_DEV_RELIABILITY_VIOLATION":       everyday(gpuCounter("ns", "Throttling duration due to reliability constraints (in ns).")),
	"DCGM_FI_DEV_TOTAL_APP_CLOCKS_VIOLATION":  gpuCounter("ns", "Throttling duration below the application clocks (in ns)."),
	"DCGM_FI_DEV_TOTAL_BASE_CLOCKS_VIOLATION": gpuCounter("ns", "Throttling duration below the base clocks (in ns)."),

	"DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP_NS":            gpuCounter("ns", "Time the clocks were held down to stay within the power limit (in ns)."),
	"DCGM_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST_NS":              gpuCounter("ns", "Time the clocks were held down by sync boost (in ns)."),
	"DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN_NS":       gpuCounter("ns", "Time the clocks were held down by software thermal slowdown (in ns)."),
	"DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS":       gpuCounter("ns", "Time the clocks were held down by hardware thermal slowdown (in ns)."),
	"DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN_NS": gpuCounter("ns", "Time the clocks were held down by the hardware power brake (in ns)."),

	// Memory.
	"DCGM_FI_DEV_FB_TOTAL":        everyday(gpuGauge(KindInt, "MiB", "Framebuffer memory total (in MiB).")),
	"DCGM_FI_DEV_FB_FREE":         everyday(gpuGauge(KindInt, "MiB", "Framebuffer memory free (in MiB).")),
	"DCGM_FI_DEV_FB_USED":         everyday(gpuGauge(KindInt, "MiB", "Framebuffer memory used (in MiB).")),
	"DCGM_FI_DEV_FB_RESERVED":     everyday(gpuGauge(KindInt, "MiB", "Framebuffer memory reserved (in MiB).")),
	"DCGM_FI_DEV_FB_USED_PERCENT": gpuGauge(KindFloat, "ratio", "Framebuffer memory used as a ratio of total minus reserved (0..1)."),
	"DCGM_FI_DEV_BAR1_TOTAL":      gpuGauge(KindInt, "MiB", "BAR1 memory total (in MiB)."),
	"DCGM_FI_DEV_BAR1_USED":       gpuGauge(KindInt, "MiB", "BAR1 memory used (in MiB)."),
	"DCGM_FI_DEV_BAR1_FREE":       gpuGauge(KindInt, "MiB", "BAR1 memory free (in MiB)."),

	// ECC, retired pages, remapped rows.
	"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL":              everyday(gpuCounter("count", "Total number of single-bit volatile ECC errors.")),
	"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":              everyday(gpuCounter("count", "Total number of double-bit volatile ECC errors.")),
	"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL":              everyday(gpuCounter("count", "Total number of single-bit persistent ECC errors.")),
	"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL":              everyday(gpuCounter("count", "Total number of double-bit persistent ECC errors.")),
	"DCGM_FI_DEV_RETIRED_SBE":                    everyday(gpuCounter("count", "Total number of retired pages due to single-bit errors.")),
	"DCGM_FI_DEV_RETIRED_DBE":                    everyday(gpuCounter("count", "Total number of retired pages due to double-bit errors.")),
	"DCGM_FI_DEV_RETIRED_PENDING":                everyday(gpuGauge(KindInt, "count", "Number of pages pending retirement.")),
	"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS":    everyday(gpuCounter("count", "Number of remapped rows for uncorrectable errors")),
	"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":      everyday(gpuCounter("count", "Number of remapped rows for correctable errors")),
	"DCGM_FI_DEV_ROW_REMAP_FAILURE":              everyday(gpuGauge(KindInt, "", "Whether remapping of rows has failed")),
	"DCGM_FI_DEV_ROW_REMAP_PENDING":              everyday(gpuGauge(KindInt, "", "Whether remapping of rows is pending (a GPU reset is needed).")),
	"DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_MAX":     gpuGauge(KindInt, "count", "Memory banks with all spare rows available."),
	"DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_HIGH":    gpuGauge(KindInt, "count", "Memory banks with most spare rows available."),
	"DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_PARTIAL": gpuGauge(KindInt, "count", "Memory banks with some spare rows available."),
	"DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_LOW":     gpuGauge(KindInt, "count", "Memory banks with few spare rows available."),
	"DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE":    gpuGauge(KindInt, "count", "Memory banks with no spare row available."),

	// NVLink totals (per-link fields come from the patterns).
	"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": everyday(gpuCounter("count", "Total number of NVLink flow-control CRC errors.")),
	"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": everyday(gpuCounter("count", "Total number of NVLink data CRC errors.")),
	"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL":   everyday(gpuCounter("count", "Total number of NVLink retries.")),
	"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": everyday(gpuCounter("count", "Total number of NVLink recovery errors.")),
	"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL":            everyday(gpuGauge(KindInt, "MB/s", "NVLink bandwidth of all lanes in both directions (in MB/s).")),
	"DCGM_FI_DEV_NVLINK_TX_BANDWIDTH_TOTAL":         gpuCounter("bytes", "NVLink TX bandwidth counter, all links."),
	"DCGM_FI_DEV_NVLINK_RX_BANDWIDTH_TOTAL":         gpuCounter("bytes", "NVLink RX bandwidth counter, all links."),
	"DCGM_FI_DEV_NVLINK_ERROR_DL_CRC":               {kind: KindInt, typ: Counter, unit: "count", help: "NVLink data-link CRC errors on the link."},
	"DCGM_FI_DEV_NVLINK_ERROR_DL_RECOVERY":          {kind: KindInt, typ: Counter, unit: "count", help: "NVLink data-link recoveries on the link."},
	"DCGM_FI_DEV_NVLINK_ERROR_DL_REPLAY":            {kind: KindInt, typ: Counter, unit: "count", help: "NVLink data-link replays on the link."},

	// Profiling (DCP) fields: ratios of elapsed cycles, and byte rates.
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE":        everyday(gpuGauge(KindFloat, "ratio", "Ratio of time the graphics engine is active.")),
	"DCGM_FI_PROF_SM_ACTIVE":               gpuGauge(KindFloat, "ratio", "The ratio of cycles an SM has at least 1 warp assigned."),
	"DCGM_FI_PROF_SM_OCCUPANCY":            gpuGauge(KindFloat, "ratio", "The ratio of number of warps resident on an SM."),
	"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":      everyday(gpuGauge(KindFloat, "ratio", "Ratio of cycles the tensor (HMMA) pipe is active.")),
	"DCGM_FI_PROF_DRAM_ACTIVE":             everyday(gpuGauge(KindFloat, "ratio", "Ratio of cycles the device memory interface is active sending or receiving data.")),
	"DCGM_FI_PROF_PIPE_FP64_ACTIVE":        gpuGauge(KindFloat, "ratio", "Ratio of cycles the fp64 pipes are active."),
	"DCGM_FI_PROF_PIPE_FP32_ACTIVE":        gpuGauge(KindFloat, "ratio", "Ratio of cycles the fp32 pipes are active."),
	"DCGM_FI_PROF_PIPE_FP16_ACTIVE":        gpuGauge(KindFloat, "ratio", "Ratio of cycles the fp16 pipes are active."),
	"DCGM_FI_PROF_PCIE_TX_BYTES":           everyday(gpuGauge(KindInt, "bytes/s", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.")),
	"DCGM_FI_PROF_PCIE_RX_BYTES":           everyday(gpuGauge(KindInt, "bytes/s", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.")),
	"DCGM_FI_PROF_NVLINK_TX_BYTES":         gpuGauge(KindInt, "bytes/s", "The rate of data transmitted over NVLink - including both protocol headers and data payloads - in bytes per second."),
	"DCGM_FI_PROF_NVLINK_RX_BYTES":         gpuGauge(KindInt, "bytes/s", "The rate of data received over NVLink - including both protocol headers and data payloads - in bytes per second."),
	"DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE": gpuGauge(KindFloat, "ratio", "Ratio of cycles the tensor (IMMA) pipe is active."),
	"DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE": gpuGauge(KindFloat, "ratio", "Ratio of cycles the tensor (HMMA) pipe is active."),
	"DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE": gpuGauge(KindFloat, "ratio", "Ratio of cycles the tensor (DFMA) pipe is active."),
	"DCGM_FI_PROF_PIPE_INT_ACTIVE":         gpuGauge(KindFloat, "ratio", "Ratio of cycles the integer pipe is active."),
	"DCGM_FI_PROF_C2C_TX_ALL_BYTES":        gpuGauge(KindInt, "bytes/s", "The rate of data transmitted over C2C, headers included, in bytes per second."),
	"DCGM_FI_PROF_C2C_TX_DATA_BYTES":       gpuGauge(KindInt, "bytes/s", "The rate of data payload transmitted over C2C, in bytes per second."),
	"DCGM_FI_PROF_C2C_RX_ALL_BYTES":        gpuGauge(KindInt, "bytes/s", "The rate of data received over C2C, headers included, in bytes per second."),
	"DCGM_FI_PROF_C2C_RX_DATA_BYTES":       gpuGauge(KindInt, "bytes/s", "The rate of data payload received over C2C, in bytes per second."),

	// NvSwitch basics.
	"DCGM_FI_DEV_NVSWITCH_VOLTAGE_MVOLT":              {kind: KindInt, typ: Gauge, unit: "mV", help: "NvSwitch voltage (in mV)."},
	"DCGM_FI_DEV_NVSWITCH_POWER_VDD":                  {kind: KindFloat, typ: Gauge, unit: "W", help: "NvSwitch VDD power (in W)."},
	"DCGM_FI_DEV_NVSWITCH_POWER_DVDD":                 {kind: KindFloat, typ: Gauge, unit: "W", help: "NvSwitch DVDD power (in W)."},
	"DCGM_FI_DEV_NVSWITCH_POWER_HVDD":                 {kind: KindFloat, typ: Gauge, unit: "W", help: "NvSwitch HVDD power (in W)."},
	"DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT":        {kind: KindInt, typ: Gauge, unit: "C", help: "NvSwitch temperature (in C)."},
	"DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SLOWDOWN": {kind: KindInt, typ: Gauge, unit: "C", help: "NvSwitch slowdown temperature (in C)."},
	"DCGM_FI_DEV_NVSWITCH_TEMPERATURE_LIMIT_SHUTDOWN": {kind: KindInt, typ: Gauge, unit: "C", help: "NvSwitch shutdown temperature (in C)."},
	"DCGM_FI_DEV_NVSWITCH_FATAL_ERRORS":               {kind: KindInt, typ: Gauge, help: "Last NvSwitch fatal error code."},
	"DCGM_FI_DEV_NVSWITCH_NON_FATAL_ERRORS":           {kind: KindInt, typ: Gauge, help: "Last NvSwitch non-fatal error code."},
	"DCGM_FI_DEV_NVSWITCH_LINK_THROUGHPUT_TX":         {kind: KindInt, typ: Counter, help: "NvSwitch port TX throughput counter."},
	"DCGM_FI_DEV_NVSWITCH_LINK_THROUGHPUT_RX":         {kind: KindInt, typ: Counter, help: "NvSwitch port RX throughput counter."},
	"DCGM_FI_DEV_NVSWITCH_LINK_FATAL_ERRORS":          {kind: KindInt, typ: Counter, unit: "count", help: "NvSwitch port fatal errors."},
	"DCGM_FI_DEV_NVSWITCH_LINK_NON_FATAL_ERRORS":      {kind: KindInt, typ: Counter, unit: "count", help: "NvSwitch port non-fatal errors."},
	"DCGM_FI_DEV_NVSWITCH_LINK_REPLAY_ERRORS":         {kind: KindInt, typ: Counter, unit: "count", help: "NvSwitch port replay errors."},
	"DCGM_FI_DEV_NVSWITCH_LINK_RECOVERY_ERRORS":       {kind: KindInt, typ: Counter, unit: "count", help: "NvSwitch port recovery errors."},
	"DCGM_FI_DEV_NVSWITCH_LINK_FLIT_ERRORS":           {kind: KindInt, typ: Counter, unit: "count", help: "NvSwitch port flit errors."},
	"DCGM_FI_DEV_NVSWITCH_LINK_CRC_ERRORS":            {kind: KindInt, typ: Counter, unit: "count", help: "NvSwitch port CRC errors."},
	"DCGM_FI_DEV_NVSWITCH_LINK_ECC_ERRORS":            {kind: KindInt, typ: Counter, unit: "count", help: "NvSwitch port ECC errors."},

	// The fields gpuscope derives, as dcgm-exporter names them.
	"DCGM_EXP_XID_ERRORS_COUNT":   everyday(gpuGauge(KindInt, "count", "Number of each XID seen within the XID count window.")),
	"DCGM_EXP_CLOCK_EVENTS_COUNT": everyday(gpuGauge(KindInt, "count", "Number of each clock event seen within the clock events window.")),
	"DCGM_EXP_GPU_HEALTH_STATUS":  gpuGauge(KindInt, "", "DCGM reported health status (0 pass, 10 warn, 20 fail)."),
	"DCGM_EXP_P2P_STATUS":         gpuGauge(KindInt, "", "P2P NVLink status."),
}

// pattern describes a family of fields, one per link, lane or location.
type pattern struct {
	re *regexp.Regexp
	// build gets the submatches of re.
	build func(m []string) meta
}

var nvlinkErrorHelp = map[string]string{
	"CRC_FLIT": "flow-control CRC errors",
	"CRC_DATA": "data CRC errors",
	"REPLAY":   "retries",
	"RECOVERY": "recovery errors",
}

var eccLocation = map[string]string{
	"L1": "L1 cache", "L2": "L2 cache", "DEV": "device memory", "REG": "register file",
	"TEX": "texture memory", "SHM": "shared memory", "CBU": "CBU", "SRM": "SRAM",
}

var patterns = []pattern{
	{regexp.MustCompile(`^DCGM_FI_DEV_NVLINK_(CRC_FLIT|CRC_DATA|REPLAY|RECOVERY)_ERROR_COUNT_L(\d+)$`), func(m []string) meta {
		return gpuCounter("count", fmt.Sprintf("Number of NVLink %s on link %s.", nvlinkErrorHelp[m[1]], m[2]))
	}},
	{regexp.MustCompile(`^DCGM_FI_DEV_NVLINK_(TX_|RX_)?BANDWIDTH_L(\d+)$`), func(m []string) meta {
		dir := "rx or tx"
		if m[1] != "" {
			dir = m[1][:2]
		}
		return gpuCounter("bytes", fmt.Sprintf("The number of bytes of active NVLink %s data on link %s, including both header and payload.", strings.ToLower(dir), m[2]))
	}},
	{regexp.MustCompile(`^DCGM_FI_PROF_NVLINK_L(\d+)_(TX|RX)_BYTES$`), func(m []string) meta {
		return gpuGauge(KindInt, "bytes/s", fmt.Sprintf("The rate of data %s over NVLink link %s, headers included, in bytes per second.", map[string]string{"TX": "transmitted", "RX": "received"}[m[2]], m[1]))
	}},
	{regexp.MustCompile(`^DCGM_FI_DEV_ECC_(SBE|DBE)_(VOL|AGG)_(L1|L2|DEV|REG|TEX|SHM|CBU|SRM)$`), func(m []string) meta {
		bits := map[string]string{"SBE": "single-bit", "DBE": "double-bit"}[m[1]]
		scope := map[string]string{"VOL": "volatile", "AGG": "persistent"}[m[2]]
		return gpuCounter("count", fmt.Sprintf("Number of %s %s ECC errors in %s.", bits, scope, eccLocation[m[3]]))
	}},
	{regexp.MustCompile(`^DCGM_FI_PROF_(NVDEC|NVJPG|NVOFA)(\d+)_ACTIVE$`), func(m []string) meta {
		return gpuGauge(KindFloat, "ratio", fmt.Sprintf("Ratio of cycles the %s engine %s is active.", m[1], m[2]))
	}},
	{regexp.MustCompile(`^DCGM_FI_DEV_NVSWITCH_LINK_(CRC|ECC)_ERRORS_LANE(\d+)$`), func(m []string) meta {
		return meta{kind: KindInt, typ: Counter, unit: "count", help: fmt.Sprintf("NvSwitch port %s errors on lane %s.", m[1], m[2])}
	}},
}

func lookupMeta(name string) (meta, bool) {
	if m, ok := curated[name]; ok {
		return m, true
	}
	for _, p := range patterns {
		if sub := p.re.FindStringSubmatch(name); sub != nil {
			return p.build(sub), true
		}
	}
	return meta{}, false
}

func describe(f *FieldInfo) {
	m, ok := lookupMeta(f.Name)
	if !ok {
		return
	}
	f.Kind, f.Type, f.Unit, f.Help, f.Default = m.kind, m.typ, m.unit, m.help, m.def
}

// describeAny describes a current field by its own name, else by the
// deprecated names of its ID (the curated table predates DCGM 4.6's
// renaming), else, for a base-unit field, by the legacy field it
// supersedes in the new unit.
func describeAny(f *FieldInfo, deprecated []fieldid.Alias) {
	if m, ok := metaOfID(f.Name, f.ID, deprecated); ok {
		f.Kind, f.Type, f.Unit, f.Help, f.Default = m.kind, m.typ, m.unit, m.help, m.def
		return
	}
	u, ok := fieldid.BaseUnitOf(f.ID)
	if !ok {
		return
	}
	m, ok := metaOfID(u.LegacyName, u.Legacy, deprecated)
	if !ok {
		return
	}
	f.Kind, f.Type, f.Unit = KindFloat, m.typ, u.Unit
	// The legacy help names its unit, as "(in MHz)": the new field's
	// names its own.
	in := "(in " + unitWords[u.Unit] + ")"
	if helpUnit.MatchString(m.help) {
		f.Help = helpUnit.ReplaceAllLiteralString(m.help, in)
	} else {
		f.Help = strings.TrimSuffix(m.help, ".") + " " + in + "."
	}
}

// unitWords name the base units in help texts.
var unitWords = map[string]string{"Hz": "Hz", "B": "bytes", "J": "J", "ratio": "0-1 ratio", "B/s": "bytes/s", "s": "s"}

var helpUnit = regexp.MustCompile(`\(in [^)]*\)`)

func metaOfID(name string, id uint16, deprecated []fieldid.Alias) (meta, bool) {
	if m, ok := lookupMeta(name); ok {
		return m, true
	}
	for _, d := range deprecated {
		if d.ID == id {
			if m, ok := lookupMeta(d.Name); ok {
				return m, true
			}
		}
	}
	return meta{}, false
}

// currentDescribed finds the description of the current field with this ID,
// for a legacy or deprecated name that aliases it.
func currentDescribed(current []fieldid.Entry, deprecated []fieldid.Alias, id uint16) (meta, bool) {
	for _, g := range current {
		if g.ID != id {
			continue
		}
		if m, ok := metaOfID(g.Name, id, deprecated); ok {
			return m, true
		}
	}
	return meta{}, false
}

package counters

import (
	"strconv"
	"strings"
)

// Layout is the label layout of a counters file's series.
type Layout uint8

const (
	// LayoutDCGMExporter is dcgm-exporter's: gpu, UUID, pci_bus_id, device,
	// modelName, Hostname, the label-type fields on every series.
	LayoutDCGMExporter Layout = iota
	// LayoutNvidiaGPUExporter is nvidia_gpu_exporter's: per-GPU series carry only
	// uuid (lower case, without "GPU-"), MIG series uuid and
	// gpu_instance_id, and the identity and label-type fields are labels of
	// nvidia_smi_gpu_info alone.
	LayoutNvidiaGPUExporter
)

func (l Layout) String() string {
	if l == LayoutNvidiaGPUExporter {
		return "nvidia_gpu_exporter"
	}
	return "dcgm-exporter"
}

// Role says what a compatibility name exports beyond a field's value.
type Role uint8

const (
	// RoleValue exports the field's value, scaled or as one bit.
	RoleValue Role = iota
	// RoleInfo is nvidia_smi_gpu_info: 1 per GPU, labelled by its identity
	// and the label-type fields.
	RoleInfo
	// RoleIndex is the GPU's index as a value.
	RoleIndex
	// RoleMIGInfo is 1 per MIG GPU instance, labelled by its identity.
	RoleMIGInfo
	// RoleXIDTotal and RoleXIDLast are the XID events seen since start and
	// when each XID was seen last, by xid.
	RoleXIDTotal
	RoleXIDLast
	// The collection roles describe gpuscope's own sampling, as that
	// exporter describes its nvidia-smi runs: whether every field group's
	// latest collection worked, when all last worked, how long the slowest
	// took, and how many failed.
	RoleCollectSuccess
	RoleCollectTimestamp
	RoleCollectDuration
	RoleCollectFailures
	// The per-process roles are that exporter's --collect.compute-apps
	// families, written while gpuscope's per-process series are on
	// (--processes): 1 per process labelled uuid, pid and process_name;
	// the process's memory under the same labels; the processes of each
	// GPU; and whether the last listing worked.
	RoleComputeAppInfo
	RoleComputeAppMemory
	RoleComputeApps
	RoleComputeAppsSuccess
)

// PerProcess says whether the role is one of the per-process families.
func (r Role) PerProcess() bool { return r >= RoleComputeAppInfo && r <= RoleComputeAppsSuccess }

// LabelFormat turns a label-type field's text into the form that exporter
// writes.
type LabelFormat uint8

const (
	FormatAsIs LabelFormat = iota
	// FormatCUDAVersion writes DCGM's major*1000+minor*10 as "12.4".
	FormatCUDAVersion
	// FormatComputeCap writes DCGM's major<<16|minor as "9.0" (dcgm_fields.h,
	// DCGM_CUDA_COMPUTE_CAPABILITY_MAJOR and _MINOR).
	FormatComputeCap
)

// Format applies the format to a label value; text that is not the integer
// the format expects is kept as it is.
func (f LabelFormat) Format(s string) string {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || f == FormatAsIs {
		return s
	}
	switch f {
	case FormatCUDAVersion:
		return strconv.FormatUint(v/1000, 10) + "." + strconv.FormatUint(v%1000/10, 10)
	case FormatComputeCap:
		return strconv.FormatUint(v>>16&0xffff, 10) + "." + strconv.FormatUint(v&0xffff, 10)
	}
	return s
}

// Export is how a compatibility name exports its field. The zero value
// exports the value as read.
type Export struct {
	Role Role
	// Scale multiplies the value (0 means 1): DCGM's MiB, MHz, percent and
	// millijoules become bytes, Hz, ratios and joules.
	Scale float64
	// Bit, when set, exports 1 while the bit is set in the value, else 0.
	Bit uint64
	// MIG names series of MIG GPU instances; the others are per GPU.
	MIG bool
	// Format applies to label-type fields.
	Format LabelFormat
	// Enum renumbers a DCGM enumeration as that exporter numbers it.
	Enum Enum
}

// Enum names a renumbering of DCGM's values into nvidia_gpu_exporter's,
// which are NVML's (utkuozdemir/nvidia_gpu_exporter commit e656cd8,
// internal/nvidiasmi/transform.go).
type Enum uint8

const (
	// EnumNone leaves the value as it is.
	EnumNone Enum = iota
	// EnumComputeMode turns DCGM's compute modes (0 default, 1 prohibited,
	// 2 exclusive process) into NVML's, which keep the removed
	// exclusive-thread mode at 1: prohibited 2, exclusive process 3
	// (TransformRawValue).
	EnumComputeMode
	// EnumFabricState turns DCGM's fabric manager status into NVML's
	// fabric state 0-3 (fieldValueMappers, fabricStateQField): DCGM's
	// failure (4) is training completed with an error status, which
	// nvidia-smi shows as state Completed (3).
	EnumFabricState
)

// enumValue renumbers v; values outside the enumeration pass as they are.
func (e Enum) enumValue(v float64) float64 {
	switch {
	case e == EnumComputeMode && (v == 1 || v == 2):
		return v + 1
	case e == EnumFabricState && v == 4:
		return 3
	}
	return v
}

// Value turns a sample of the field into the exported value.
func (x Export) Value(v float64) float64 {
	if x.Bit != 0 {
		if v >= 0 && uint64(v)&x.Bit != 0 {
			return 1
		}
		return 0
	}
	if x.Enum != EnumNone {
		return x.Enum.enumValue(v)
	}
	if x.Scale != 0 {
		return v * x.Scale
	}
	return v
}

// Scales of the unit conversions nvidia_gpu_exporter applies
// (internal/exporter/exporter.go, knownUnitSuffixes).
const (
	mib     = 1 << 20
	mhz     = 1e6
	percent = 0.01
	kib     = 1 << 10
	milli   = 1e-3
)

// compatName is one nvidia_gpu_exporter name: the DCGM field it reads ("" for
// roles that read none), its Prometheus type there, and its help there (the
// nvidia-smi query field).
type compatName struct {
	name  string
	field string
	typ   MetricType
	x     Export
	help  string
}

func value(name, field string, scale float64, help string) compatName {
	return compatName{name: name, field: field, typ: Gauge, x: Export{Scale: scale}, help: help}
}

func migValue(name, field string, scale float64, help string) compatName {
	return compatName{name: name, field: field, typ: Gauge, x: Export{Scale: scale, MIG: true}, help: help}
}

func role(name, field string, typ MetricType, r Role, help string) compatName {
	return compatName{name: name, field: field, typ: typ, x: Export{Role: r}, help: help}
}

func infoLabel(name, field string, f LabelFormat) compatName {
	return compatName{name: name, field: field, typ: Label, x: Export{Format: f}, help: name}
}

// clockReasons are the reasons nvidia-smi reports one field each for, with
// their bit of the clock-event reasons mask (DCGM_CLOCKS_EVENT_REASON_*).
var clockReasons = []struct {
	name string
	bit  uint64
}{
	{"gpu_idle", 0x1}, {"applications_clocks_setting", 0x2}, {"sw_power_cap", 0x4},
	{"hw_slowdown", 0x8}, {"sync_boost", 0x10}, {"sw_thermal_slowdown", 0x20},
	{"hw_thermal_slowdown", 0x40}, {"hw_power_brake_slowdown", 0x80},
}

// nvidiaGPUExporterNames is the one table of nvidia_gpu_exporter's names that gpuscope
// serves: names, units and label layout as that exporter derives them from
// nvidia-smi --query-gpu fields and NVML (its docs/METRICS.md).
var nvidiaGPUExporterNames = func() []compatName {
	t := []compatName{
		role("nvidia_smi_gpu_info", "", Gauge, RoleInfo, "A metric with a constant '1' value labeled by gpu uuid, name, vbios_version, driver_version, pci_bus_id, serial, compute_cap, index, cuda_version."),
		role("nvidia_smi_index", "", Gauge, RoleIndex, "index"),
		infoLabel("name", "DCGM_FI_DEV_NAME", FormatAsIs),
		infoLabel("driver_version", "DCGM_FI_DRIVER_VERSION", FormatAsIs),
		infoLabel("vbios_version", "DCGM_FI_DEV_VBIOS_VERSION", FormatAsIs),
		infoLabel("serial", "DCGM_FI_DEV_SERIAL", FormatAsIs),
		infoLabel("compute_cap", "DCGM_FI_DEV_CUDA_COMPUTE_CAPABILITY", FormatComputeCap),
		infoLabel("cuda_version", "DCGM_FI_CUDA_DRIVER_VERSION", FormatCUDAVersion),

		value("nvidia_smi_utilization_gpu_ratio", "DCGM_FI_DEV_GPU_UTIL", percent, "utilization.gpu [%]"),
		value("nvidia_smi_utilization_memory_ratio", "DCGM_FI_DEV_MEM_COPY_UTIL", percent, "utilization.memory [%]"),
		value("nvidia_smi_utilization_encoder_ratio", "DCGM_FI_DEV_ENC_UTIL", percent, "utilization.encoder [%]"),
		value("nvidia_smi_utilization_decoder_ratio", "DCGM_FI_DEV_DEC_UTIL", percent, "utilization.decoder [%]"),
		value("nvidia_smi_memory_total_bytes", "DCGM_FI_DEV_FB_TOTAL", mib, "memory.total [MiB]"),
		value("nvidia_smi_memory_used_bytes", "DCGM_FI_DEV_FB_USED", mib, "memory.used [MiB]"),
		value("nvidia_smi_memory_free_bytes", "DCGM_FI_DEV_FB_FREE", mib, "memory.free [MiB]"),
		value("nvidia_smi_memory_reserved_bytes", "DCGM_FI_DEV_FB_RESERVED", mib, "memory.reserved [MiB]"),
		value("nvidia_smi_temperature_gpu", "DCGM_FI_DEV_GPU_TEMP", 0, "temperature.gpu"),
		value("nvidia_smi_temperature_memory", "DCGM_FI_DEV_MEMORY_TEMP", 0, "temperature.memory"),
		value("nvidia_smi_fan_speed_ratio", "DCGM_FI_DEV_FAN_SPEED", percent, "fan.speed [%]"),
		value("nvidia_smi_pstate", "DCGM_FI_DEV_PSTATE", 0, "pstate"),
		{name: "nvidia_smi_compute_mode", field: "DCGM_FI_DEV_COMPUTE_MODE", typ: Gauge, x: Export{Enum: EnumComputeMode}, help: "compute_mode"},
		value("nvidia_smi_persistence_mode", "DCGM_FI_DEV_PERSISTENCE_MODE", 0, "persistence_mode"),
		value("nvidia_smi_mig_mode_current", "DCGM_FI_DEV_MIG_MODE", 0, "mig.mode.current"),
		value("nvidia_smi_gpu_recovery_action", "DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION", 0, "gpu_recovery_action"),
		{name: "nvidia_smi_fabric_state", field: "DCGM_FI_DEV_FABRIC_MANAGER_STATUS", typ: Gauge, x: Export{Enum: EnumFabricState}, help: "fabric.state"},

		value("nvidia_smi_power_draw_watts", "DCGM_FI_DEV_POWER_USAGE", 0, "power.draw [W]"),
		value("nvidia_smi_power_draw_instant_watts", "DCGM_FI_DEV_POWER_USAGE_INSTANT", 0, "power.draw.instant [W]"),
		value("nvidia_smi_power_limit_watts", "DCGM_FI_DEV_POWER_MGMT_LIMIT", 0, "power.limit [W]"),
		value("nvidia_smi_enforced_power_limit_watts", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 0, "enforced.power.limit [W]"),
		value("nvidia_smi_power_default_limit_watts", "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF", 0, "power.default_limit [W]"),
		value("nvidia_smi_power_min_limit_watts", "DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN", 0, "power.min_limit [W]"),
		value("nvidia_smi_power_max_limit_watts", "DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX", 0, "power.max_limit [W]"),
		{name: "nvidia_smi_energy_joules_total", field: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", typ: Counter, x: Export{Scale: milli},
			help: "Total energy consumed by the GPU in joules since the driver was last loaded. Resets on a driver reload; absent on GPUs that cannot report it."},
		value("nvidia_smi_pcie_throughput_tx_bytes_per_second", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", kib, "PCIe traffic transmitted by the GPU, sampled by the driver over a dedicated 20ms window."),
		value("nvidia_smi_pcie_throughput_rx_bytes_per_second", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", kib, "PCIe traffic received by the GPU, sampled by the driver over a dedicated 20ms window."),

		// nvidia-smi's graphics clock is NVML's CLOCK_GRAPHICS, which DCGM
		// does not read; it equals the SM clock in every capture of that
		// exporter's tests (Turing to Hopper).
		value("nvidia_smi_clocks_current_graphics_clock_hz", "DCGM_FI_DEV_SM_CLOCK", mhz, "clocks.current.graphics [MHz]"),
		value("nvidia_smi_clocks_current_sm_clock_hz", "DCGM_FI_DEV_SM_CLOCK", mhz, "clocks.current.sm [MHz]"),
		value("nvidia_smi_clocks_current_memory_clock_hz", "DCGM_FI_DEV_MEM_CLOCK", mhz, "clocks.current.memory [MHz]"),
		value("nvidia_smi_clocks_current_video_clock_hz", "DCGM_FI_DEV_VIDEO_CLOCK", mhz, "clocks.current.video [MHz]"),
		value("nvidia_smi_clocks_max_graphics_clock_hz", "DCGM_FI_DEV_MAX_SM_CLOCK", mhz, "clocks.max.graphics [MHz]"),
		value("nvidia_smi_clocks_max_sm_clock_hz", "DCGM_FI_DEV_MAX_SM_CLOCK", mhz, "clocks.max.sm [MHz]"),
		value("nvidia_smi_clocks_max_memory_clock_hz", "DCGM_FI_DEV_MAX_MEM_CLOCK", mhz, "clocks.max.memory [MHz]"),
		value("nvidia_smi_clocks_event_reasons_active", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 0, "clocks_event_reasons.active"),

		value("nvidia_smi_ecc_errors_corrected_volatile_total", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 0, "ecc.errors.corrected.volatile.total"),
		value("nvidia_smi_ecc_errors_uncorrected_volatile_total", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, "ecc.errors.uncorrected.volatile.total"),
		value("nvidia_smi_ecc_errors_corrected_aggregate_total", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 0, "ecc.errors.corrected.aggregate.total"),
		value("nvidia_smi_ecc_errors_uncorrected_aggregate_total", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", 0, "ecc.errors.uncorrected.aggregate.total"),
		value("nvidia_smi_retired_pages_single_bit_ecc_count", "DCGM_FI_DEV_RETIRED_SBE", 0, "retired_pages.single_bit_ecc.count"),
		value("nvidia_smi_retired_pages_double_bit_count", "DCGM_FI_DEV_RETIRED_DBE", 0, "retired_pages.double_bit.count"),
		value("nvidia_smi_retired_pages_pending", "DCGM_FI_DEV_RETIRED_PENDING", 0, "retired_pages.pending"),
		value("nvidia_smi_remapped_rows_correctable", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 0, "remapped_rows.correctable"),
		value("nvidia_smi_remapped_rows_uncorrectable", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 0, "remapped_rows.uncorrectable"),
		value("nvidia_smi_remapped_rows_pending", "DCGM_FI_DEV_ROW_REMAP_PENDING", 0, "remapped_rows.pending"),
		value("nvidia_smi_remapped_rows_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE", 0, "remapped_rows.failure"),

		role("nvidia_smi_xid_errors_total", "", Counter, RoleXIDTotal, "Number of XID errors observed on the GPU since the exporter started. A series appears when its first event arrives; earlier history cannot be replayed."),
		role("nvidia_smi_xid_last_timestamp_seconds", "", Gauge, RoleXIDLast, "Unix timestamp of the most recently observed XID error, as received by the exporter (the driver events carry no timestamp of their own)."),

		role("nvidia_smi_mig_info", "", Gauge, RoleMIGInfo, "A metric with a constant '1' value labeled by the identity of a MIG device: the parent GPU's uuid, the MIG device's own uuid, its GPU instance and compute instance ids, and its profile."),
		migValue("nvidia_smi_mig_memory_total_bytes", "DCGM_FI_DEV_FB_TOTAL", mib, "Memory of the GPU instance (total)."),
		migValue("nvidia_smi_mig_memory_used_bytes", "DCGM_FI_DEV_FB_USED", mib, "Memory of the GPU instance (used)."),
		migValue("nvidia_smi_mig_memory_free_bytes", "DCGM_FI_DEV_FB_FREE", mib, "Memory of the GPU instance (free)."),
		migValue("nvidia_smi_mig_memory_reserved_bytes", "DCGM_FI_DEV_FB_RESERVED", mib, "Memory of the GPU instance (reserved)."),
		migValue("nvidia_smi_mig_graphics_activity_ratio", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, "Fraction of time the GPU instance's graphics/compute engines were active."),
		migValue("nvidia_smi_mig_sm_activity_ratio", "DCGM_FI_PROF_SM_ACTIVE", 0, "Fraction of time the GPU instance's SMs were active."),
		migValue("nvidia_smi_mig_sm_occupancy_ratio", "DCGM_FI_PROF_SM_OCCUPANCY", 0, "Fraction of the GPU instance's resident warp slots that were occupied."),
		migValue("nvidia_smi_mig_tensor_activity_ratio", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, "Fraction of time the GPU instance's tensor pipes were active."),
		migValue("nvidia_smi_mig_pcie_throughput_tx_bytes_per_second", "DCGM_FI_PROF_PCIE_TX_BYTES", 0, "PCIe traffic transmitted by the GPU instance."),
		migValue("nvidia_smi_mig_pcie_throughput_rx_bytes_per_second", "DCGM_FI_PROF_PCIE_RX_BYTES", 0, "PCIe traffic received by the GPU instance."),

		role("nvidia_smi_last_collect_success", "", Gauge, RoleCollectSuccess, "Whether the most recent collection succeeded (1) or not (0)"),
		role("nvidia_smi_last_collect_success_timestamp_seconds", "", Gauge, RoleCollectTimestamp, "Unix timestamp of the most recent successful collection"),
		role("nvidia_smi_last_collect_duration_seconds", "", Gauge, RoleCollectDuration, "Duration of the most recent collection"),
		role("nvidia_smi_failed_scrapes_total", "", Counter, RoleCollectFailures, "Number of failed collections"),

		// Its --collect.compute-apps families (internal/exporter/exporter.go,
		// newComputeAppDescs), written with --processes.
		role("nvidia_smi_compute_app_info", "", Gauge, RoleComputeAppInfo, "A metric with a constant '1' value labeled by the identity of a process with a compute context on a GPU."),
		role("nvidia_smi_compute_app_used_memory_bytes", "", Gauge, RoleComputeAppMemory, "GPU memory used by the process. Absent when the driver cannot report it (e.g. Windows WDDM)."),
		role("nvidia_smi_compute_apps", "", Gauge, RoleComputeApps, "Number of processes with a compute context on the GPU."),
		role("nvidia_smi_compute_apps_last_collect_success", "", Gauge, RoleComputeAppsSuccess, "Whether the most recent per-process collection succeeded (1) or not (0)"),
	}
	// Drivers before R535 name the reasons clocks_throttle_reasons.*, and
	// dashboards and rules read both names.
	for _, prefix := range []string{"clocks_event_reasons", "clocks_throttle_reasons"} {
		for _, r := range clockReasons {
			t = append(t, compatName{name: "nvidia_smi_" + prefix + "_" + r.name, field: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
				typ: Gauge, x: Export{Bit: r.bit}, help: prefix + "." + r.name})
		}
	}
	return t
}()

// compatByName indexes nvidiaGPUExporterNames.
var compatByName = func() map[string]*compatName {
	m := make(map[string]*compatName, len(nvidiaGPUExporterNames))
	for i := range nvidiaGPUExporterNames {
		m[nvidiaGPUExporterNames[i].name] = &nvidiaGPUExporterNames[i]
	}
	return m
}()

// CompatInfo describes one nvidia_gpu_exporter name gpuscope serves.
type CompatInfo struct {
	Name string
	// Field is the DCGM field read, empty for roles that read none.
	Field  string
	Type   MetricType
	Export Export
	Help   string
}

// NvidiaGPUExporterNames lists the nvidia_gpu_exporter names gpuscope serves, in
// table order.
func NvidiaGPUExporterNames() []CompatInfo {
	out := make([]CompatInfo, len(nvidiaGPUExporterNames))
	for i, c := range nvidiaGPUExporterNames {
		out[i] = CompatInfo{Name: c.name, Field: c.field, Type: c.typ, Export: c.x, Help: c.help}
	}
	return out
}

// lookupCompat resolves an nvidia_gpu_exporter name.
func lookupCompat(name string) (CompatInfo, bool) {
	c, ok := compatByName[name]
	if !ok {
		return CompatInfo{}, false
	}
	return CompatInfo{Name: c.name, Field: c.field, Type: c.typ, Export: c.x, Help: c.help}, true
}

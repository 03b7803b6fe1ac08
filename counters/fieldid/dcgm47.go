package fieldid

// DCGM 4.7's field names, kept by hand.
//
// Source: NVIDIA's DCGM 4.7.0 "Field Identifiers" reference
// (docs.nvidia.com/datacenter/dcgm/latest/dcgm-api/dcgm-api-field-ids.html,
// read 2026-09-19), and dcgm-exporter 4.9.0 and 4.10.0's release notes for
// the names those releases write. No go-dcgm release the module proxy
// serves has DCGM 4.7's dcgm_fields.h (v1.4712.2 is refused; DCGM's own
// repository stops at 4.6), so this table cannot be generated and tested
// against a header as the 4.6.1 one is.
//
// Why a table of names derived from legacy fields, and not of fields read:
// the IDs below are what the reference says DCGM 4.7 numbers them, and
// nothing here could check them. gpuscope keeps them as documentation
// (counters list shows them) and never asks any host engine for them:
// every source, DCGM of any release included, reads the legacy field and
// scales it (source.DeriveBaseUnits). A wrong ID here can then mislabel a
// line of `counters list`, but never make gpuscope read another field.
//
// Only names the reference spells out in full are listed: of the eight
// throttle-seconds fields (1617-1624) it names only the power one.
//
// Each entry: the DCGM 4.7 name and its documented ID, its unit, the
// legacy field it is derived from with its unit, and the factor into the
// new unit. Renames marks the names dcgm-exporter 4.9 writes in place of
// the legacy one (its counters files; test/compat/testdata): those are
// what `counters migrate --to new` writes, and what makes the legacy name
// deprecated in `counters list` and `counters check`.
var dcgm47 = []BaseUnit{
	{ID: 1613, Name: "DCGM_FI_DEV_GPU_UTIL_RATIO", Unit: "ratio", Legacy: GPUUtil, LegacyName: "DCGM_FI_DEV_GPU_UTIL", LegacyUnit: "%", Scale: 1e-2, Renames: true},
	{ID: 1614, Name: "DCGM_FI_DEV_MEMORY_UTIL_RATIO", Unit: "ratio", Legacy: MemCopyUtil, LegacyName: "DCGM_FI_DEV_MEM_COPY_UTIL", LegacyUnit: "%", Scale: 1e-2},
	{ID: 1615, Name: "DCGM_FI_DEV_ENC_UTIL_RATIO", Unit: "ratio", Legacy: EncUtil, LegacyName: "DCGM_FI_DEV_ENC_UTIL", LegacyUnit: "%", Scale: 1e-2},
	{ID: 1616, Name: "DCGM_FI_DEV_DEC_UTIL_RATIO", Unit: "ratio", Legacy: DecUtil, LegacyName: "DCGM_FI_DEV_DEC_UTIL", LegacyUnit: "%", Scale: 1e-2},
	{ID: 1617, Name: "DCGM_FI_DEV_GPU_POWER_THROTTLE_SECONDS_TOTAL", Unit: "s", Legacy: PowerViolation, LegacyName: "DCGM_FI_DEV_POWER_VIOLATION", LegacyUnit: "ns", Scale: 1e-9},
	{ID: 1625, Name: "DCGM_FI_DEV_FB_CAPACITY_BYTES", Unit: "B", Legacy: FBTotal, LegacyName: "DCGM_FI_DEV_FB_TOTAL", LegacyUnit: "MiB", Scale: 1 << 20},
	{ID: 1626, Name: "DCGM_FI_DEV_FB_FREE_BYTES", Unit: "B", Legacy: FBFree, LegacyName: "DCGM_FI_DEV_FB_FREE", LegacyUnit: "MiB", Scale: 1 << 20},
	{ID: 1627, Name: "DCGM_FI_DEV_FB_USED_BYTES", Unit: "B", Legacy: FBUsed, LegacyName: "DCGM_FI_DEV_FB_USED", LegacyUnit: "MiB", Scale: 1 << 20},
	{ID: 1628, Name: "DCGM_FI_DEV_FB_RESERVED_BYTES", Unit: "B", Legacy: FBReserved, LegacyName: "DCGM_FI_DEV_FB_RESERVED", LegacyUnit: "MiB", Scale: 1 << 20},
	{ID: 1629, Name: "DCGM_FI_DEV_C2C_MAX_BANDWIDTH_BYTES_PER_SECOND", Unit: "B/s", Legacy: C2CMaxBandwidth, LegacyName: "DCGM_FI_DEV_C2C_MAX_BANDWIDTH", LegacyUnit: "MB/s", Scale: 1e6},
	// The legacy NVLink throughput is the driver's KiB/s divided by 1000
	// and called MB/s: bytes per second are that times 1000 x 1024.
	{ID: 1630, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L0_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL0, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L0", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1631, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L1_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL1, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L1", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1632, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L2_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL2, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L2", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1633, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L3_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL3, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L3", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1634, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L4_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL4, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L4", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1635, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L5_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL5, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L5", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1636, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L6_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL6, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L6", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1637, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L7_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL7, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L7", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1638, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L8_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL8, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L8", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1639, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L9_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL9, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L9", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1640, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L10_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL10, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L10", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1641, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L11_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL11, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L11", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1642, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L12_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL12, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L12", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1643, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L13_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL13, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L13", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1644, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L14_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL14, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L14", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1645, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L15_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL15, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L15", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1646, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L16_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL16, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L16", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1647, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L17_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputL17, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_L17", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: NVLinkThroughputBytesPerSecond, Name: "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", Unit: "B/s", Legacy: NVLinkThroughputTotal, LegacyName: "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL", LegacyUnit: "MB/s", Scale: nvlinkScale},
	{ID: 1649, Name: "DCGM_FI_DEV_VGPU_FB_USED_BYTES", Unit: "B", Legacy: VGPUMemoryUsage, LegacyName: "DCGM_FI_DEV_VGPU_MEMORY_USAGE", LegacyUnit: "MiB", Scale: 1 << 20},
}

// NVLinkThroughputBytesPerSecond is DCGM 4.7's documented ID of
// DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND: the NVML source computes
// it from the driver's KiB/s (never asking a host engine for the ID).
const NVLinkThroughputBytesPerSecond uint16 = 1648

// nvlinkScale turns DCGM's legacy NVLink "MB/s" (KiB/s / 1000) into bytes
// per second.
const nvlinkScale = 1000 * 1024

// dcgm47Renames are the names dcgm-exporter 4.10 writes for profiling
// fields whose ID and unit (bytes per second) stay: the old name becomes a
// deprecated alias of the new one.
var dcgm47Renames = []Alias{
	{Name: "DCGM_FI_PROF_PCIE_TX_BYTES", ID: ProfPCIeTXBytes, Current: "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND"},
	{Name: "DCGM_FI_PROF_PCIE_RX_BYTES", ID: ProfPCIeRXBytes, Current: "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND"},
	{Name: "DCGM_FI_PROF_NVLINK_TX_BYTES", ID: ProfNVLinkTXBytes, Current: "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND"},
	{Name: "DCGM_FI_PROF_NVLINK_RX_BYTES", ID: ProfNVLinkRXBytes, Current: "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND"},
}

// DCGM47MaxFields is DCGM_FI_MAX_FIELDS in DCGM 4.7's reference: one more
// than its highest field ID.
const DCGM47MaxFields = 1651

// Package gpuevents names the GPU events gpuscope counts: XID error codes and
// the clock-event (throttle) reasons of DCGM_FI_DEV_CLOCKS_EVENT_REASONS.
package gpuevents

import "strconv"

// xidDescriptions are the XIDs NVIDIA documents in its XID catalog that
// operators meet in practice. Unknown codes are still counted, with the
// description "unknown".
var xidDescriptions = map[uint64]string{
	8:   "GPU stopped processing (timeout)",
	13:  "Graphics engine exception",
	31:  "GPU memory page fault",
	32:  "Invalid or corrupted push buffer stream",
	38:  "Driver firmware error",
	43:  "GPU stopped processing",
	45:  "Preemptive cleanup, due to previous errors",
	48:  "Double-bit ECC error",
	56:  "Display engine error",
	57:  "Error programming video memory interface",
	61:  "Internal micro-controller breakpoint or warning",
	62:  "Internal micro-controller halt",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapping recording failure",
	68:  "Video decoder exception",
	69:  "Graphics engine class error",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "High single-bit ECC error rate",
	94:  "Contained ECC error",
	95:  "Uncontained ECC error",
	109: "Context switch timeout",
	110: "Security fault error",
	119: "GSP RPC timeout",
	120: "GSP error",
	121: "C2C link corrected error",
	122: "SPI PMU RPC read failure",
	123: "SPI PMU RPC write failure",
	140: "Unrecovered ECC error",
	143: "GPU initialization failure",
	154: "GPU recovery action changed",
}

// XIDDescription returns the meaning of an XID code.
func XIDDescription(xid uint64) string {
	if d, ok := xidDescriptions[xid]; ok {
		return d
	}
	return "unknown"
}

// XIDLabel is the decimal form of an XID code, as exported in the xid label.
func XIDLabel(xid uint64) string { return strconv.FormatUint(xid, 10) }

// ClockEvent is one bit of the clock-event reasons bitmask.
type ClockEvent struct {
	Bit  uint64
	Name string
}

// ClockEvents are the reasons in the order they are exported. Bit values are
// NVML's nvmlClocksEventReason* constants, which DCGM reports unchanged.
var ClockEvents = []ClockEvent{
	{0x1, "gpu_idle"},
	{0x2, "clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"},
	{0x40, "hw_thermal_slowdown"},
	{0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"},
}

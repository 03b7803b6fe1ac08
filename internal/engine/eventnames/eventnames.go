// Package eventnames names the GPU events gpuscope counts: XID error codes and
// the clock-event (throttle) reasons of DCGM_FI_DEV_CLOCKS_EVENT_REASONS.
package eventnames

import "strconv"

// XIDDescription returns the meaning of an XID code, worded as dcgm-exporter
// words its err_msg label ("Unknown Error" past the end of its table;
// internal/pkg/collector/gpu_collector.go, toMetric).
func XIDDescription(xid uint64) string {
	if xid < uint64(len(xidText)) {
		return xidText[xid]
	}
	return "Unknown Error"
}

// XIDLabel is the decimal form of an XID code, as exported in the xid and
// err_code labels.
func XIDLabel(xid uint64) string { return strconv.FormatUint(xid, 10) }

// ClockEvent is one bit of the clock-event reasons bitmask.
type ClockEvent struct {
	Bit  uint64
	Name string
}

// ClockEvents are the reasons in the order they are exported. Bit values are
// DCGM's DCGM_CLOCKS_EVENT_REASON_* (NVML's nvmlClocksEventReason*); the names
// are the clock_event label values of dcgm-exporter
// (internal/pkg/collector/clock_events_collector.go, clockEventToString), which
// follow dcgmi's. Every family with a clock_event label uses them, so one
// query language serves dcgm-exporter's family and gpuscope's own.
var ClockEvents = []ClockEvent{
	{0x1, "gpu_idle"},
	{0x2, "clocks_setting"},
	{0x4, "power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal"},
	{0x40, "hw_thermal"},
	{0x80, "hw_power_brake"},
	{0x100, "display_clocks"},
}

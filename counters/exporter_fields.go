package counters

// DCGM field IDs the engine itself relies on.
const (
	// FieldClockEventReasons is DCGM_FI_DEV_CLOCKS_EVENT_REASONS, the bitmask
	// the clock-event metrics are decoded from.
	FieldClockEventReasons uint16 = 112
	// FieldXIDErrors is DCGM_FI_DEV_XID_ERRORS, the last XID; sources also
	// report each XID event to the sink while it is watched.
	FieldXIDErrors uint16 = 230
)

// Exporter-side fields have no DCGM field ID: the engine derives them. They
// get IDs from a range DCGM does not use, so that one uint16 names any field.
const (
	// FieldExpXIDErrorsCount is dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT:
	// the number of each XID seen within the XID count window.
	FieldExpXIDErrorsCount uint16 = 0xF001 + iota
	// FieldExpClockEventsCount is DCGM_EXP_CLOCK_EVENTS_COUNT: the number of
	// each clock event seen within the clock-events window.
	FieldExpClockEventsCount
	// FieldExpGPUHealthStatus is DCGM_EXP_GPU_HEALTH_STATUS, from DCGM health
	// watches (0 pass, 10 warn, 20 fail as DCGM reports it).
	FieldExpGPUHealthStatus
	// FieldExpP2PStatus is DCGM_EXP_P2P_STATUS, the NVLink P2P status.
	FieldExpP2PStatus
)

// FirstExporterFieldID is the lowest ID of the exporter-side range.
const FirstExporterFieldID uint16 = 0xF000

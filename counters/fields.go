package counters

import "github.com/gpuscope/gpuscope/counters/fieldid"

// The exporter-side fields by the names code written against the catalog
// uses; their IDs are fieldid's.
const (
	FieldExpXIDErrorsCount   = fieldid.ExpXIDErrorsCount
	FieldExpClockEventsCount = fieldid.ExpClockEventsCount
	FieldExpGPUHealthStatus  = fieldid.ExpGPUHealthStatus
	FieldExpP2PStatus        = fieldid.ExpP2PStatus
)

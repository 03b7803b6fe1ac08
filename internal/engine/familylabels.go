package engine

// familyLabelNames holds every label name a family writes after an entity's
// label set. It is filled by familyLabel as the families declare their
// labels, so the names a copied pod label may not take are the families'
// own declarations and cannot fall behind a new family.
var familyLabelNames = map[string]bool{}

// familyLabel declares a label a family writes after the entity's labels
// and returns its name; a family names its labels only through it.
func familyLabel(name string) string {
	familyLabelNames[name] = true
	return name
}

// The labels families add: the window statistics, the XID, clock-event,
// health and P2P families, dcgm-exporter's XID labels on
// DCGM_FI_DEV_XID_ERRORS, insight's bound class, and the per-process
// families' process.
var (
	labelStat            = familyLabel("stat")
	labelXID             = familyLabel("xid")
	labelXIDDescription  = familyLabel("xid_description")
	labelErrCode         = familyLabel("err_code")
	labelErrMsg          = familyLabel("err_msg")
	labelClockEvent      = familyLabel("clock_event")
	labelWindowSize      = familyLabel("window_size_in_ms")
	labelHealthWatch     = familyLabel("health_watch")
	labelHealthErrorCode = familyLabel("health_error_code")
	labelPeerGPU         = familyLabel("peer_gpu")
	labelLinkStatus      = familyLabel("link_status")
	labelBound           = familyLabel("bound")
	labelPID             = familyLabel("pid")
	labelProcessName     = familyLabel("process_name")
)

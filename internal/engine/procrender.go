package engine

import (
	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/source"
)

// The per-process families in gpuscope's names (dcgm-exporter's layout).
const (
	procInfoName    = "gpuscope_process_info"
	procMemName     = "gpuscope_process_memory_used_bytes"
	procSMName      = "gpuscope_process_sm_utilization_ratio"
	procCountName   = "gpuscope_processes"
	procDroppedName = "gpuscope_processes_dropped_total"
)

// renderProcesses writes gpuscope's per-process families once the process
// list has been read: the dropped count in every layout, and, in
// dcgm-exporter's, each process's info, memory and SM share and each
// device's count, while the source can list processes.
func (e *Engine) renderProcesses(w *snapshotWriter) {
	if !e.opts.Processes.Enabled || !e.proc.seen {
		return
	}
	w.family(procDroppedName, "Processes left out of the per-process families because their GPU ran more than the cap (--processes-max-per-gpu); each counts once for every stretch it stays left out.", "counter")
	for _, es := range e.order {
		if es.ent.Kind == source.GPU && es.proc.droppedLabels != "" {
			w.sample(procDroppedName, es.proc.droppedLabels, "} ", float64(es.proc.dropped))
		}
	}
	if e.plan.layout == counters.LayoutNvidiaGPUExporter || !e.proc.listed {
		return
	}
	w.family(procInfoName, "1 for each compute process on the GPU or MIG instance, labelled with its PID, its name and, when known, its pod.", "gauge")
	e.eachProcess(func(ps *procSeries) { w.sample(procInfoName, ps.labels, ps.infoTail, 1) })
	w.family(procMemName, "GPU memory the process holds on the GPU or MIG instance, in bytes. Absent when the driver cannot measure it.", "gauge")
	e.eachProcess(func(ps *procSeries) {
		if ps.hasMem {
			w.sample(procMemName, ps.labels, "} ", ps.mem)
		}
	})
	w.family(procSMName, "Share (0..1) of the GPU's SM time the process used over the driver's last sampling period. Absent inside a MIG instance and where the driver sampled none.", "gauge")
	e.eachProcess(func(ps *procSeries) {
		if ps.hasSM {
			w.sample(procSMName, ps.labels, "} ", ps.sm)
		}
	})
	appendFamily(w, e.order, procCountName, "Compute processes the driver lists on the GPU or MIG instance, those past the cap included.", "gauge",
		func(w *snapshotWriter, es *entityState, labels string) {
			if (es.ent.Kind == source.GPU && !es.migParent) || es.ent.Kind == source.GPUInstance {
				w.sample(procCountName, labels, "} ", float64(es.proc.listed))
			}
		})
}

// eachProcess calls f for every exported process, in entity order.
func (e *Engine) eachProcess(f func(*procSeries)) {
	for _, es := range e.order {
		for i := range es.proc.series {
			f(&es.proc.series[i])
		}
	}
}

// renderComputeApps writes one of nvidia_gpu_exporter's per-process
// families as its renderApps does (internal/exporter/exporter.go): while
// the list cannot be read, the success family alone, at 0, so that a
// failure never looks like an idle GPU; else every process's info and
// memory, labelled uuid (the GPU's, MIG or not), pid and process_name, and
// each GPU's count, 0 included.
func (e *Engine) renderComputeApps(w *snapshotWriter, f *counters.Field) {
	if !e.opts.Processes.Enabled || !e.proc.seen {
		return
	}
	typ := f.Type.String()
	role := f.Export.Role
	if role == counters.RoleComputeAppsSuccess {
		v := 0.0
		if e.proc.listed {
			v = 1
		}
		w.family(f.Name, f.Help, typ)
		w.sample(f.Name, "", " ", v)
		return
	}
	if !e.proc.listed {
		return
	}
	switch role {
	case counters.RoleComputeAppInfo, counters.RoleComputeAppMemory:
		w.family(f.Name, f.Help, typ)
		e.eachProcess(func(ps *procSeries) {
			switch {
			case ps.nvgpuExporterDup:
			case role == counters.RoleComputeAppInfo:
				w.sample(f.Name, ps.nvgpuExporter, "} ", 1)
			case ps.nvgpuExporterHasMem:
				w.sample(f.Name, ps.nvgpuExporter, "} ", ps.nvgpuExporterMem)
			}
		})
	case counters.RoleComputeApps:
		appendFamily(w, e.order, f.Name, f.Help, typ, func(w *snapshotWriter, es *entityState, labels string) {
			if es.ent.Kind == source.GPU {
				w.sample(f.Name, labels, "} ", float64(es.proc.total))
			}
		})
	}
}

package nvml

import (
	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/source"
)

// reasonCIGPM is why a compute instance has no profiling fields on NVML.
const reasonCIGPM = "NVML's GPM samples a whole MIG GPU instance (nvmlGpmMigSampleGet), not one of its compute instances; " +
	"the profiling fields are on the GPU instance"

// readInstances reads the per-instance fields of each MIG GPU instance
// and its compute instances: memory through the MIG device handles, GPM
// per GPU instance. Device-level fields stay on the parent GPU only.
func (dr *deviceRead) readInstances(fields []counters.Field, gpmFields []uint16) {
	d := dr.d
	for _, in := range d.instances {
		dr.readMemory(in.ent, in.entity, in.h, fields)
		if dr.lost {
			return
		}
		// Without GPM on the parent, the parent already reported the
		// profiling fields as unsupported.
		if len(gpmFields) > 0 && d.gpmSupported {
			h, giID := d.handle(), in.giID
			dr.gpm(in.ent, in.entity, in.gpm.of(dr.group), func(smp gonvml.GpmSample) gonvml.Return { return h.GpmMigSampleGet(giID, smp) }, gpmFields)
			if dr.lost {
				return
			}
		}
		for _, ci := range in.cis {
			dr.readMemory(ci.ent, ci.entity, ci.h, fields)
			if dr.lost {
				return
			}
			if d.gpmSupported {
				for _, id := range gpmFields {
					dr.unsupported(ci.ent, ci.entity, id, reasonCIGPM)
				}
			}
		}
	}
}

// readMemory reads the instance-level value fields of one MIG entity
// through a MIG device handle. A handle that answers as a destroyed
// instance's does has the layout listed again at the next read.
func (dr *deviceRead) readMemory(ent int, e *source.Entity, h gonvml.Device, fields []counters.Field) {
	r := &reading{src: dr.s, dev: dr.d, h: h}
	for _, f := range fields {
		spec, ok := fieldMap[f.ID]
		if !ok || !spec.instance || spec.value == nil || dr.skip(ent, f.ID) {
			continue
		}
		v, err := spec.value(r)
		if err != nil && isStaleHandle(err) {
			dr.d.migStale = true
		}
		if dr.check(ent, e, f.ID, err) {
			dr.res.ops = append(dr.res.ops, op{kind: opValue, e: e, field: f.ID, v: v})
		}
		if dr.lost {
			return
		}
	}
}

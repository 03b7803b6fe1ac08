package capturecheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake/smifake"
)

// checkMIG compares the GPU instances the source found with the capture's
// MIG devices: one each, with its GPU instance ID, profile and memory.
func checkMIG(gpu string, g *smicapture.GPU, instances []*source.Entity, s *sink) []Row {
	rows := []Row{eq(gpu, "MIG instances", strconv.Itoa(len(g.MIG)), strconv.Itoa(len(instances)))}
	model := g.Field("name").Text()
	for _, m := range g.MIG {
		name := fmt.Sprintf("%s/gi%d", gpu, m.GPUInstanceID)
		var e *source.Entity
		for _, in := range instances {
			if in.GPUInstanceID == m.GPUInstanceID {
				e = in
			}
		}
		if e == nil {
			rows = append(rows, eq(name, "GPU_I_ID", strconv.Itoa(m.GPUInstanceID), "absent"))
			continue
		}
		p, ok := smifake.ProfileOf(model, m)
		profile := p.Name
		if !ok {
			profile = fmt.Sprintf("(unknown: %d SMs on %s)", m.SMs, model)
		}
		rows = append(rows, eq(name, "GPU_I_PROFILE", profile, e.GPUInstanceProfile))
		for _, f := range []struct {
			id  uint16
			mib float64
		}{{fieldid.FBTotal, m.TotalMiB}, {fieldid.FBUsed, m.UsedMiB}, {fieldid.FBFree, m.FreeMiB}, {fieldid.FBReserved, m.ReservedMiB}} {
			rows = append(rows, compare(name, source.FieldFor(nil, f.id).Name, want{shown: true, supported: true, num: f.mib,
				raw: strconv.FormatFloat(f.mib, 'f', -1, 64) + " MiB"}, s.get(e, f.id)))
		}
	}
	return rows
}

// checkProcesses compares the process list with the compute processes -q
// lists: PID, name, memory and GPU instance.
func checkProcesses(gpu string, g *smicapture.GPU, procs []source.Process) []Row {
	var want, have []string
	for _, p := range smifake.ComputeProcesses(g) {
		want = append(want, fmt.Sprintf("%d %s %gMiB gi%d", p.PID, p.Name, p.UsedMiB, p.GPUInstanceID))
	}
	for _, p := range procs {
		if p.UUID == g.Field("uuid").Text() {
			have = append(have, fmt.Sprintf("%d %s %gMiB gi%d", p.PID, p.Name, float64(p.UsedMemoryBytes)/(1<<20), p.GPUInstanceID))
		}
	}
	sort.Strings(want)
	sort.Strings(have)
	return []Row{eq(gpu, "processes", strings.Join(want, "; "), strings.Join(have, "; "))}
}

func eq(entity, field, want, have string) Row {
	r := Row{Entity: entity, Field: field, Capture: want, Gpuscope: have, Status: Differ}
	if want == have {
		r.Status = Agree
	}
	if want == "" {
		r.Capture = "(none)"
	}
	if have == "" {
		r.Gpuscope = "(none)"
	}
	return r
}

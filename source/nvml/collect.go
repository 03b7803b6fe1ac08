package nvml

import (
	"errors"
	"fmt"
	"math"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/source"
)

type opKind uint8

const (
	opValue opKind = iota
	opText
	opUnsupported
	opFail
	opP2P
)

// op is one call to the sink, recorded by a device goroutine and replayed
// by Collect: the sink is only called from Collect's goroutine.
type op struct {
	kind  opKind
	e     *source.Entity
	field uint16
	v     float64
	s     string
	err   error
	links []source.P2PLink
}

// result is what one device read produced. Its size is bounded by the
// group's fields times the device's entities.
type result struct {
	dev int
	ts  int64
	ops []op
}

func (r *result) apply(sink source.Sink) {
	for i := range r.ops {
		o := &r.ops[i]
		switch o.kind {
		case opValue:
			sink.Value(o.e, o.field, r.ts, o.v)
		case opText:
			sink.Text(o.e, o.field, o.s)
		case opUnsupported:
			sink.Unsupported(o.e, o.field, o.s)
		case opFail:
			sink.Fail(o.e, o.field, o.err)
		case opP2P:
			sink.P2P(o.e, r.ts, o.links)
		}
	}
}

// deviceRead is the state of one read of one device.
type deviceRead struct {
	s   *Source
	d   *device
	res *result
	now time.Time
	// group is the field group being read; GPM keeps a sample state per
	// group.
	group int
	// lost is set when an error took the GPU out; the read stops there.
	lost bool
	// answered and failed count the fields read and the reads that failed
	// otherwise than NOT_SUPPORTED; lastErr is the last failure.
	answered, failed int
	lastErr          error
}

// unsupported reports a field once per (entity, field) per Watch; after
// that the field is not read again on that entity.
func (dr *deviceRead) unsupported(ent int, e *source.Entity, field uint16, reason string) {
	k := fieldKey{entity: ent, field: field}
	if dr.d.reported[k] {
		return
	}
	dr.d.reported[k] = true
	dr.res.ops = append(dr.res.ops, op{kind: opUnsupported, e: e, field: field, s: reason})
	dr.s.log.WithFields(logrus.Fields{"gpu": dr.d.index, "entity": e.Key(), "field": field, "reason": reason}).
		Debug("field not supported")
}

// check sorts a read error: nil is a sample, NOT_SUPPORTED makes the
// field absent, a lost GPU stops the read, anything else is a failure.
func (dr *deviceRead) check(ent int, e *source.Entity, field uint16, err error) bool {
	switch {
	case err == nil:
		dr.answered++
		return true
	case errors.Is(err, errBaseline), errors.Is(err, errBlank):
		// The first reading of a rate only sets its baseline; a reading
		// DCGM would blank has no value.
		dr.answered++
	case isNotSupported(err):
		dr.unsupported(ent, e, field, err.Error())
	case isNoPermission(err):
		dr.noPermission(ent, e, field, err)
	case isLost(err):
		dr.s.markLost(dr.d, err, dr.now)
		dr.lost = true
	default:
		dr.failed++
		dr.lastErr = err
		dr.res.ops = append(dr.res.ops, op{kind: opFail, e: e, field: field, err: err})
	}
	return false
}

// settle takes the GPU out when every field it was asked for failed in
// allFailuresLost reads in a row: a GPU that answers nothing is lost even
// when the driver does not say so.
func (dr *deviceRead) settle() {
	d := dr.d
	if dr.lost || dr.failed == 0 || dr.answered > 0 {
		d.allFailed = 0
		return
	}
	d.allFailed++
	if d.allFailed >= allFailuresLost {
		d.allFailed = 0
		dr.s.markLost(d, fmt.Errorf("every field failed in %d reads in a row, the last with: %w", allFailuresLost, dr.lastErr), dr.now)
		dr.lost = true
	}
}

// noPermission makes a field the caller may not read absent, as an
// unsupported one, with a reason that says what to do; the GPU says so
// once in the log at warning level.
func (dr *deviceRead) noPermission(ent int, e *source.Entity, field uint16, err error) {
	reason := err.Error() + ": " + noPermissionHint
	if dr.d.migEnabled.Load() {
		reason = err.Error() + ": " + noPermissionMIGHint
	}
	if !dr.d.permissionWarned {
		dr.d.permissionWarned = true
		dr.s.log.WithFields(logrus.Fields{"gpu": dr.d.index, "uuid": dr.d.uuid, "field": field, "reason": reason}).
			Warn("NVML refuses some of this GPU's fields to this user; they are left out (gpuscope_field_supported 0)")
	}
	dr.unsupported(ent, e, field, reason)
}

func (dr *deviceRead) skip(ent int, field uint16) bool {
	return dr.d.reported[fieldKey{entity: ent, field: field}]
}

// read samples one GPU and its MIG instances. It runs in the GPU's own
// goroutine, which holds d.busy.
func (s *Source) read(d *device, group int, fields []counters.Field, gen uint64, now time.Time) *result {
	res := &result{dev: d.index, ts: now.UnixNano()}
	if d.gen != gen {
		d.gen = gen
		clear(d.reported)
	}
	if d.isLost() {
		if !d.retryDue(now) || !s.recover(d, now) {
			return res
		}
	}
	dr := &deviceRead{s: s, d: d, res: res, now: now, group: group}
	h := d.handle()
	r := &reading{src: s, dev: d, h: h, now: now}
	var gpmFields []uint16
	for _, f := range fields {
		spec, ok := fieldMap[f.ID]
		switch {
		case !ok:
			dr.unsupported(0, d.gpu, f.ID, unsupportedReason(f.ID))
			continue
		case spec.xid:
			continue
		case spec.p2p:
			if !dr.skip(0, f.ID) {
				dr.p2p(h, f.ID)
			}
			if dr.lost {
				return res
			}
			continue
		case spec.gpm != 0:
			gpmFields = append(gpmFields, f.ID)
			continue
		case dr.skip(0, f.ID):
			continue
		}
		if spec.text != nil {
			txt, err := spec.text(r)
			if dr.check(0, d.gpu, f.ID, err) {
				res.ops = append(res.ops, op{kind: opText, e: d.gpu, field: f.ID, s: txt})
			}
		} else {
			v, err := spec.value(r)
			if dr.check(0, d.gpu, f.ID, err) {
				res.ops = append(res.ops, op{kind: opValue, e: d.gpu, field: f.ID, v: v})
			}
		}
		if dr.lost {
			return res
		}
	}
	if len(gpmFields) > 0 {
		if !d.gpmSupported {
			for _, id := range gpmFields {
				dr.unsupported(0, d.gpu, id, reasonPreHopper)
			}
		} else {
			dr.gpm(0, d.gpu, d.gpm.of(dr.group), func(smp gonvml.GpmSample) gonvml.Return { return h.GpmSampleGet(smp) }, gpmFields)
			if dr.lost {
				return res
			}
		}
	}
	s.relistMIG(d, h, now)
	dr.readInstances(fields, gpmFields)
	dr.settle()
	return res
}

// p2p reads the GPU's NVLink P2P status towards every other GPU
// (nvmlDeviceGetP2PStatus with the NVLink capability), the matrix DCGM
// hands dcgm-exporter (internal/pkg/collector/p2p_status_collector.go).
// A lost peer is left out; an error on this GPU ends the read.
func (dr *deviceRead) p2p(h gonvml.Device, field uint16) {
	peers := dr.s.devs()
	links := make([]source.P2PLink, 0, len(peers))
	for _, p := range peers {
		if p == dr.d || p.isLost() {
			continue
		}
		st, ret := h.GetP2PStatus(p.handle(), gonvml.P2P_CAPS_INDEX_NVLINK)
		if !dr.check(0, dr.d.gpu, field, nvmlErr("GetP2PStatus", ret)) {
			return
		}
		links = append(links, source.P2PLink{Peer: p.gpu.GPU, Status: int(st)})
	}
	dr.res.ops = append(dr.res.ops, op{kind: opP2P, e: dr.d.gpu, field: field, links: links})
}

// gpm reads the profiling fields of one entity through GPM.
func (dr *deviceRead) gpm(ent int, e *source.Entity, st *gpmState, take func(gonvml.GpmSample) gonvml.Return, ids []uint16) {
	var wanted []uint16
	var metrics []gonvml.GpmMetricId
	for _, id := range ids {
		if !dr.skip(ent, id) {
			wanted = append(wanted, id)
			metrics = append(metrics, fieldMap[id].gpm)
		}
	}
	if len(metrics) == 0 {
		return
	}
	vals, ok, err := dr.s.gpmRead(st, take, metrics, dr.now)
	if err != nil {
		// One error for the whole sample: report it on each field, but
		// stop at the first if it took the GPU out.
		for _, id := range wanted {
			dr.check(ent, e, id, err)
			if dr.lost {
				return
			}
		}
		return
	}
	if !ok {
		return // the first sample only sets the baseline; one too early is skipped
	}
	for i, id := range wanted {
		m := vals[i]
		if m.NvmlReturn == uint32(gonvml.SUCCESS) && math.IsNaN(m.Value) {
			// DCGM blanks a GPM metric without a value (no activity
			// between the samples to divide by); so is it left out here.
			continue
		}
		if dr.check(ent, e, id, nvmlErr(fmt.Sprintf("GpmMetricsGet(metric %d)", m.MetricId), gonvml.Return(m.NvmlReturn))) {
			dr.res.ops = append(dr.res.ops, op{kind: opValue, e: e, field: id, v: m.Value * fieldMap[id].gpmScale})
		}
	}
}

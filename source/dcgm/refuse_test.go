package dcgm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/dcgm"
	"github.com/gpuscope/gpuscope/source/dcgm/dcgmfake"
)

// statusNotSupported is DCGM_ST_NOT_SUPPORTED (dcgm_structs.h), what DCGM
// answers for NVLink bandwidth on a GPU without NVLink.
const statusNotSupported = -6

const (
	gpu0Key = "gpu/GPU-00000000-0000-0000-0000-000000000000"
	gpu1Key = "gpu/GPU-11111111-1111-1111-1111-111111111111"
)

var gpu0 = dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 0}

func countLogs(l interface{ AllEntries() []*logrus.Entry }, msg string) int {
	n := 0
	for _, e := range l.AllEntries() {
		if e.Message == msg {
			n++
		}
	}
	return n
}

// TestRefusedFieldBlanksOnlyItself: DCGM's dcgmGetValuesSince_v2 fails a
// whole read when one (entity, field) pair has a status other than OK or
// NO_DATA (dcgmlib/src/DcgmApi.cpp, helperGetValuesSince), so one field of
// the default counters file that a GPU refuses, NVLink bandwidth on a GPU
// without NVLink, blanked every field of the group. Now only that pair is
// dropped: reported unsupported with DCGM's status, logged once, and
// watched no more; every other pair keeps its samples.
func TestRefusedFieldBlanksOnlyItself(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field uint16
	}{
		{"a gauge", fieldid.NVLinkBandwidthTotal},
		{"an event field, read since the last read", fieldid.ClocksEventReasons},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, clk := newFake()
			f.RefuseField(gpu0, tc.field, statusNotSupported)
			l, hook := quietLog()
			s, err := dcgm.New(f, testConfig(l, clk))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			fields := []uint16{fieldid.GPUTemp, fieldid.PowerUsage, tc.field}
			require.NoError(t, s.Watch([]source.Group{group(10*time.Millisecond, fields...)}))
			rec := &dcgmfake.Recorder{}
			for range 5 {
				_ = s.Collect(context.Background(), 0, rec)
				clk.Add(10 * time.Millisecond)
			}
			require.NoError(t, s.Collect(context.Background(), 0, rec), "reads go on without the refused pair")

			got := map[string]int{}
			for _, v := range rec.All() {
				got[fmt.Sprintf("%s/%d", v.Key, v.Field)]++
			}
			for _, key := range []string{gpu0Key, gpu1Key} {
				for _, id := range fields {
					k := fmt.Sprintf("%s/%d", key, id)
					if key == gpu0Key && id == tc.field {
						assert.Zero(t, got[k], "%s: the refused pair has no value", k)
						continue
					}
					assert.GreaterOrEqual(t, got[k], 4, "%s: samples go on beside the refused pair", k)
				}
			}
			reason := rec.UnsupportedReasons()[gpu0Key+"/"+idStr(tc.field)]
			assert.Contains(t, reason, "-6", "the reason carries DCGM's status")
			assert.NotContains(t, rec.UnsupportedReasons(), gpu1Key+"/"+idStr(tc.field))
			assert.Equal(t, 1, countLogs(hook, "DCGM refuses fields on some entities; reading on without them"), "logged once")

			// A new watch (a reloaded counters file) tells the sink again
			// without asking DCGM: the engine may have refreshed its entities.
			require.NoError(t, s.Watch([]source.Group{group(10*time.Millisecond, fields...)}))
			again := &dcgmfake.Recorder{}
			require.NoError(t, s.Collect(context.Background(), 0, again))
			assert.Equal(t, reason, again.UnsupportedReasons()[gpu0Key+"/"+idStr(tc.field)])
			assert.Equal(t, 1, countLogs(hook, "DCGM refuses fields on some entities; reading on without them"), "still logged once")

			// The pair is no longer watched: the last watch of the field
			// leaves GPU 0 out and keeps GPU 1.
			var last *dcgmfake.WatchCall
			for _, w := range f.WatchCalls() {
				if containsField(w.Fields, tc.field) {
					last = &w
				}
			}
			require.NotNil(t, last)
			assert.NotContains(t, last.Entities, gpu0)
			assert.Contains(t, last.Entities, dcgm.EntityRef{Group: dcgm.EntityGPU, ID: 1})
		})
	}
}

func containsField(ids []uint16, id uint16) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestEventFieldsLoseNoSampleBetweenReads: each sample of the XID and
// clock-event fields is one event, counted by DCGM_EXP_XID_ERRORS_COUNT and
// DCGM_EXP_CLOCK_EVENTS_COUNT, so they are read since the last read
// however late a read comes; other fields give their latest sample, once.
func TestEventFieldsLoseNoSampleBetweenReads(t *testing.T) {
	f, clk := newFake()
	s := newSource(t, f, group(10*time.Millisecond, fieldid.ClocksEventReasons, fieldid.GPUTemp))
	rec := &dcgmfake.Recorder{}
	pauses := []time.Duration{0, 3 * time.Millisecond, 35 * time.Millisecond, 1 * time.Millisecond, 60 * time.Millisecond}
	var elapsed time.Duration
	for i := range 2 * len(pauses) {
		require.NoError(t, s.Collect(context.Background(), 0, rec))
		clk.Add(pauses[i%len(pauses)])
		elapsed += pauses[i%len(pauses)]
	}
	require.NoError(t, s.Collect(context.Background(), 0, rec))
	var events, latest []dcgmfake.Sample
	for _, v := range rec.All() {
		if v.Field == fieldid.ClocksEventReasons {
			events = append(events, v)
		} else {
			latest = append(latest, v)
		}
	}
	n := checkContiguous(t, events)
	require.Len(t, n, 2, "one event series per GPU")
	for k, got := range n {
		assert.Equal(t, 1+int(elapsed/(10*time.Millisecond)), got, "series %s: every event sample", k)
	}
	seen := map[string]int64{}
	for _, v := range latest {
		k := v.Key + "/" + fmt.Sprint(v.Field)
		assert.Greater(t, v.TS, seen[k], "series %s: no sample handed over twice", k)
		seen[k] = v.TS
	}
	assert.Len(t, seen, 2)
}

// TestWideMIGReadIsBatched: eight GPUs with seven GPU and seven compute
// instances each, 120 entities, with 40 fields are 4800 pairs: one read of
// all would hold about 19 MiB of go-dcgm's 4 KiB values, and a backlog many
// times that. The source reads at most dcgm.MaxLatestValues pairs a call
// and still hands over every pair.
func TestWideMIGReadIsBatched(t *testing.T) {
	var gpus []dcgm.GPUInfo
	var migs []dcgm.MIGInfo
	for g := range uint(8) {
		gpus = append(gpus, dcgm.GPUInfo{ID: g, UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", g)})
		for k := range uint(7) {
			gi := dcgm.EntityRef{Group: dcgm.EntityGPUInstance, ID: 100*g + k}
			migs = append(migs,
				dcgm.MIGInfo{Entity: gi, Parent: dcgm.EntityRef{Group: dcgm.EntityGPU, ID: g}, GPU: g, InstanceID: k + 1, Profile: "1g.10gb"},
				dcgm.MIGInfo{Entity: dcgm.EntityRef{Group: dcgm.EntityComputeInstance, ID: 100*g + k}, Parent: gi, GPU: g, InstanceID: k + 1})
		}
	}
	var fields []uint16
	for _, en := range fieldid.Current() {
		id := en.ID
		if len(fields) == 39 {
			break
		}
		if fieldid.IsExporter(id) || fieldid.IsProfiling(id) || fieldid.Of(id).Level != fieldid.LevelGPU ||
			id == fieldid.XIDErrors || id == fieldid.ClocksEventReasons {
			continue
		}
		fields = append(fields, id)
	}
	fields = append(fields, fieldid.ClocksEventReasons)
	f, clk := newFake(dcgmfake.WithGPUs(gpus...), dcgmfake.WithMIG(migs...))
	s := newSource(t, f, group(100*time.Millisecond, fields...))
	rec := &dcgmfake.Recorder{Limit: 1 << 20}
	clk.Add(time.Second)
	require.NoError(t, s.Collect(context.Background(), 0, rec))

	got := map[string]bool{}
	for _, v := range rec.All() {
		got[fmt.Sprintf("%s/%d", v.Key, v.Field)] = true
	}
	assert.Len(t, got, 120*40, "every entity's every field")
	pairs, since := f.WidestReads()
	assert.LessOrEqual(t, pairs, dcgm.MaxLatestValues, "pairs in one latest-values call")
	assert.Positive(t, pairs)
	assert.LessOrEqual(t, since, dcgm.MaxSinceValues, "values in one since-read")
}

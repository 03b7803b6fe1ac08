package report

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// IdleBelow is gpuscope's one definition of an idle GPU, the threshold of
// the gpuscope.activity recording rules (gpu:gpuscope_idle:bool in
// deploy/prometheus/gpuscope-recording.yml, which GPUIdleButAllocated and
// the idle GPU-hours read): a GPU or MIG instance is idle while its
// activity (activityFields) stays below this share of the time. A test
// holds the rules and this package to the same fields, order and value.
const IdleBelow = 0.05

// activityRecord is the rules' recorded activity: the largest sample of
// activityWindow, per GPU and MIG instance.
const (
	activityRecord = "gpu:gpuscope_engine_active:max2m"
	activityWindow = 2 * time.Minute
)

// activityFields are the fields of a device's activity in the order the
// rules prefer them, each with what turns it into a share of the time:
// the first the device has decides.
var activityFields = []struct {
	metric string
	div    int
}{{grActive, 1}, {gpuUtil, 100}, {smActive, 1}}

// activityExpr is the rules' activity over rng for the label matchers sel:
// the largest sample of each field in the range, the first field a series
// has (PromQL's or keeps a series of the left side over the same labels of
// the right), each field under either DCGM vocabulary (overTime).
func activityExpr(sel, rng string) string {
	parts := make([]string, 0, len(activityFields))
	for _, f := range activityFields {
		parts = append(parts, overTime("max_over_time", f.metric, sel, rng, f.div))
	}
	return strings.Join(parts, "\nor ")
}

// The sources idle reads the activity from, as the table names them.
const (
	idleFromRules = "the recorded " + activityRecord
	idleFromRaw   = "the raw fields, as the rules compute it"
)

// idle counts the devices whose activity never reached IdleBelow in the
// range. Where Prometheus records activityRecord (the shipped rules are
// loaded) and the range is longer than its window, it reads the recorded
// samples from the end of the range's first window on, which together
// cover the range; for any other device it computes the same expression
// from the raw fields over the whole range.
func (b *builder) idle(ctx context.Context, s *Summary, devs map[string]*device) error {
	sel := b.sel + `,GPU_CI_ID=""`
	activity := map[string]float64{}
	fromRules := 0
	if rng := b.o.End.Sub(b.o.Start) - activityWindow; rng > 0 {
		res, err := b.q(ctx, fmt.Sprintf(`max by (%s) (max_over_time(%s{%s}[%s]))`, b.by(), activityRecord, sel, promDuration(rng)))
		if err != nil {
			return err
		}
		for _, r := range res {
			if key := deviceKey(r.labels); devs[key] != nil && len(r.samples) == 1 {
				activity[key] = r.samples[0].v
				fromRules++
			}
		}
	}
	if fromRules < len(devs) {
		res, err := b.q(ctx, fmt.Sprintf("max by (%s) (\n%s\n)", b.by(), activityExpr(sel, b.rng)))
		if err != nil {
			return err
		}
		for _, r := range res {
			key := deviceKey(r.labels)
			if _, ok := activity[key]; !ok && devs[key] != nil && len(r.samples) == 1 {
				activity[key] = r.samples[0].v
			}
		}
	}
	for key, d := range devs {
		v, ok := activity[key]
		switch {
		case !ok:
			s.IdleUnknown++
		case v < IdleBelow:
			d.idle = true
			s.Idle++
			s.IdleDevices = append(s.IdleDevices, d.name)
		}
	}
	sort.Strings(s.IdleDevices)
	s.IdleFrom = idleFrom(fromRules, len(activity)-fromRules)
	return nil
}

// idleFrom says what the activity of the devices was read from.
func idleFrom(rules, raw int) string {
	switch {
	case rules > 0 && raw > 0:
		return fmt.Sprintf("%d from %s, %d from %s", rules, idleFromRules, raw, idleFromRaw)
	case rules > 0:
		return idleFromRules
	case raw > 0:
		return idleFromRaw
	}
	return ""
}

package report

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/counters"
)

// The report is written with dcgm-exporter's names before 4.9; an exporter
// on DCGM 4.6 or later may write the other vocabulary (the renamed fields,
// and the base-unit fields under new IDs). Which names stand in for which,
// and the factor between their units, is the catalog's (counters.OtherNames),
// never a list of its own.

// factorText writes a factor as PromQL multiplies by it: "" for 1.
func factorText(f float64) string {
	switch {
	case f == 1:
		return ""
	case f < 1:
		return " / " + strconv.FormatFloat(1/f, 'f', -1, 64)
	}
	return " * " + strconv.FormatFloat(f, 'f', -1, 64)
}

// overTime is fn over rng of metric, or of each of its other names in the
// old name's unit where a device has no series of metric: "fn(OLD{sel}[rng])
// or fn(NEW{sel}[rng]) * k". div turns the old name's unit into the
// answer's (100 for a percentage read as a ratio).
func overTime(fn, metric, sel, rng string, div int) string {
	term := func(name string, factor float64) string {
		return fmt.Sprintf("%s(%s{%s}[%s])", fn, name, sel, rng) + factorText(factor/float64(div))
	}
	parts := []string{term(metric, 1)}
	for _, alt := range counters.OtherNames(metric) {
		parts = append(parts, term(alt.Name, alt.Factor))
	}
	return strings.Join(parts, "\nor ")
}

// identity is a series' labels without its name: the same device's series
// under either vocabulary.
func identity(l map[string]string) string {
	rest := make(map[string]string, len(l))
	for k, v := range l {
		if k != "__name__" {
			rest[k] = v
		}
	}
	return seriesKey(rest)
}

// span is the first and last sample time of a series, in milliseconds.
type span struct{ first, last int64 }

// streamEither streams metric's samples, then those of its other names in
// metric's unit, except where a series of the same labels already gave
// metric's samples at that time: both vocabularies at once (an exporter
// that writes both) count once, and a series that changed vocabulary in
// the range (an upgrade) counts on both sides of the change.
func (b *builder) streamEither(ctx context.Context, metric string, each func(labels map[string]string, key string, smp sample)) error {
	covered := map[string]span{}
	err := b.stream(ctx, metric, func(l map[string]string, key string, smp sample) {
		id := identity(l)
		s, ok := covered[id]
		if !ok {
			s = span{first: smp.ts, last: smp.ts}
		}
		s.first, s.last = min(s.first, smp.ts), max(s.last, smp.ts)
		covered[id] = s
		each(l, key, smp)
	})
	if err != nil {
		return err
	}
	for _, alt := range counters.OtherNames(metric) {
		err := b.stream(ctx, alt.Name, func(l map[string]string, key string, smp sample) {
			if s, ok := covered[identity(l)]; ok && smp.ts >= s.first && smp.ts <= s.last {
				return
			}
			smp.v *= alt.Factor
			each(l, key, smp)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

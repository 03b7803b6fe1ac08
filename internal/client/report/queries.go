package report

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// The fields the report reads, under their dcgm-exporter names.
const (
	fbUsed      = "DCGM_FI_DEV_FB_USED"
	gpuUtil     = "DCGM_FI_DEV_GPU_UTIL"
	grActive    = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
	smActive    = "DCGM_FI_PROF_SM_ACTIVE"
	tensorAct   = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
	energyTotal = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
	boundRatio  = "gpuscope_gpu_bound_ratio"
	stallRatio  = "gpuscope_gpu_stall_ratio"
)

// builder runs one report's queries, all at the end of the range.
type builder struct {
	c   *Client
	o   Options
	sel string // label matchers of the selection
	rng string // the range, as a PromQL duration
}

func (b *builder) q(ctx context.Context, expr string) ([]series, error) {
	return b.c.query(ctx, expr, b.o.End)
}

func (b *builder) by() string { return strings.Join(deviceLabels, ",") }

// devices lists the GPUs and MIG instances the selection held in the
// range: those with a sample of DCGM_FI_DEV_FB_USED carrying the
// selection's labels.
func (b *builder) devices(ctx context.Context) (map[string]*device, error) {
	res, err := b.q(ctx, fmt.Sprintf(`count by (%s) (count_over_time(%s{%s}[%s]))`, b.by(), fbUsed, b.sel, b.rng))
	if err != nil {
		return nil, err
	}
	out := make(map[string]*device, len(res))
	for _, s := range res {
		out[deviceKey(s.labels)] = &device{name: deviceName(s.labels), mig: s.labels["GPU_I_ID"] != ""}
	}
	return out, nil
}

// heldTime counts the devices and their GPU-hours: the time each was held
// is the steps of the resolution at which any series of the device carries
// the selection's labels, times the step.
func (b *builder) heldTime(ctx context.Context, s *Summary, devs map[string]*device) error {
	step := b.o.Resolution
	expr := fmt.Sprintf(`count_over_time((count by (%s) (%s{%s}))[%s:%s])`, b.by(), fbUsed, b.sel, b.rng, promDuration(step))
	res, err := b.q(ctx, expr)
	if err != nil {
		return err
	}
	total := b.o.End.Sub(b.o.Start)
	for _, r := range res {
		if d := devs[deviceKey(r.labels)]; d != nil && len(r.samples) == 1 {
			// A count no step of the range can hold is the server's error.
			if v := r.samples[0].v; v >= 0 && v <= float64(total/step)+1 {
				d.held = min(time.Duration(v*float64(step)), total)
			}
		}
	}
	if len(res) == 0 {
		// Seen with a server that limits the samples of a query: it
		// answers a subquery with nothing rather than with its error.
		return fmt.Errorf("no answer from Prometheus to %s, although it holds samples of %d GPUs; the GPU-hours cannot be counted", expr, len(devs))
	}
	var held time.Duration
	for _, d := range devs {
		s.GPUs++
		if d.mig {
			s.MIG++
		}
		// A GPU held for less than a step between two of its points
		// counts as held for one step.
		held += max(d.held, step)
	}
	s.GPUHours = round(held.Hours(), 4)
	return nil
}

// activity reads SM and tensor activity from every raw sample.
func (b *builder) activity(ctx context.Context, s *Summary, _ map[string]*device) error {
	for _, f := range []struct {
		metric string
		dst    **Stat
	}{{smActive, &s.SM}, {tensorAct, &s.Tensor}} {
		var h ratioHist
		err := b.streamEither(ctx, f.metric, func(_ map[string]string, _ string, smp sample) { h.add(smp.v) })
		if err != nil {
			return err
		}
		if h.n > 0 {
			*f.dst = &Stat{Mean: round(h.sum/float64(h.n), 4), P99: round(h.quantile(0.99), 4)}
		}
	}
	return nil
}

// insight reads the bound classes and the stall ratio, averaged over every
// sample of the selection's series.
func (b *builder) insight(ctx context.Context, s *Summary, _ map[string]*device) error {
	res, err := b.q(ctx, fmt.Sprintf(`sum by (bound) (sum_over_time(%[1]s{%[2]s}[%[3]s])) / sum by (bound) (count_over_time(%[1]s{%[2]s}[%[3]s]))`,
		boundRatio, b.sel, b.rng))
	if err != nil {
		return err
	}
	for _, r := range res {
		// Only the classes gpuscope writes: any other value of the label
		// is not its, and 100,000 of them made a summary of 1.4 MB.
		class := r.labels["bound"]
		if len(r.samples) == 1 && finite(r.samples[0].v) && slices.Contains(boundOrder, class) {
			if s.Bound == nil {
				s.Bound = map[string]float64{}
			}
			s.Bound[class] = round(clamp01(r.samples[0].v), 4)
		}
	}
	res, err = b.q(ctx, fmt.Sprintf(`sum(sum_over_time(%[1]s{%[2]s}[%[3]s])) / sum(count_over_time(%[1]s{%[2]s}[%[3]s]))`,
		stallRatio, b.sel, b.rng))
	if err != nil {
		return err
	}
	if len(res) == 1 && len(res[0].samples) == 1 && finite(res[0].samples[0].v) {
		v := round(clamp01(res[0].samples[0].v), 4)
		s.Stall = &v
	}
	return nil
}

// maxFBMiB bounds a framebuffer in MiB (1 PiB): a series whose peak is
// above it, negative or NaN is the server's error and is left out, so that
// the others still give the peak.
const maxFBMiB = 1 << 30

// memoryPeak is the most framebuffer one device held (MiB in DCGM).
func (b *builder) memoryPeak(ctx context.Context, s *Summary, _ map[string]*device) error {
	res, err := b.q(ctx, fmt.Sprintf(`max(max_over_time(%s{%s}[%s]) <= %d >= 0)`, fbUsed, b.sel, b.rng, maxFBMiB))
	if err != nil {
		return err
	}
	if len(res) == 1 && len(res[0].samples) == 1 {
		if v := res[0].samples[0].v; v >= 0 && v <= maxFBMiB {
			s.MemPeakBytes = int64(v) << 20
		}
	}
	return nil
}

// energy sums the energy counter's increase over the range on the whole
// GPUs the selection held alone, from every raw sample: a drop is a reset
// of the counter, after which it counts from 0 again. A MIG instance's
// series and a shared GPU's per-pod copies (vgpu) carry the board's
// energy, which is not theirs alone: they are counted as left out.
func (b *builder) energy(ctx context.Context, s *Summary, _ map[string]*device) error {
	type counter struct {
		last, inc float64
		seen      bool
	}
	per := map[string]*counter{}
	perDevice := map[string]string{}
	excluded := map[string]bool{}
	err := b.streamEither(ctx, energyTotal, func(l map[string]string, key string, smp sample) {
		dev := deviceKey(l)
		if l["GPU_I_ID"] != "" || l["vgpu"] != "" {
			excluded[dev] = true
			return
		}
		if !finite(smp.v) || smp.v < 0 {
			return // no reading of a counter
		}
		c := per[key]
		if c == nil {
			c = &counter{}
			per[key], perDevice[key] = c, dev
		}
		switch {
		case !c.seen:
		case smp.v >= c.last:
			c.inc += smp.v - c.last
		default:
			c.inc += smp.v
		}
		c.last, c.seen = smp.v, true
	})
	if err != nil {
		return err
	}
	// Copies of one GPU's series (one per HPC job of the selection) count
	// the GPU once.
	byDevice := map[string]float64{}
	for key, c := range per {
		dev := perDevice[key]
		byDevice[dev] = math.Max(byDevice[dev], c.inc)
	}
	if len(byDevice) > 0 {
		total := 0.0
		for _, v := range byDevice {
			total += v
		}
		j := round(total/1000, 1)
		s.EnergyJoules = &j
	}
	s.EnergyExcluded = len(excluded)
	return nil
}

// stream hands every raw sample of metric for the selection in the range
// to each, series by series in time order, reading at most ChunkSamples
// samples per query: the range is split into equal chunks by the count of
// samples it holds. Each chunk is left-open, so that no sample is read
// twice whatever the server's range semantics.
func (b *builder) stream(ctx context.Context, metric string, each func(labels map[string]string, key string, smp sample)) error {
	res, err := b.q(ctx, fmt.Sprintf(`sum(count_over_time(%s{%s}[%s]))`, metric, b.sel, b.rng))
	if err != nil {
		return err
	}
	if len(res) == 0 || len(res[0].samples) == 0 || res[0].samples[0].v == 0 {
		return nil
	}
	// The count decides how many queries follow: one the report cannot
	// read in maxChunks of them is refused, not trusted (1e12 made
	// 3,600,000 queries of an hour).
	count := res[0].samples[0].v
	if !finite(count) || count < 0 || count > float64(maxChunks)*float64(b.o.ChunkSamples) {
		return fmt.Errorf("too many samples: Prometheus counts %g of %s for %s in the range, more than the report reads (%d queries of %d); give a shorter range",
			count, metric, b.o.Selection, maxChunks, b.o.ChunkSamples)
	}
	total := b.o.End.Sub(b.o.Start)
	chunks := int64(math.Ceil(count / float64(b.o.ChunkSamples)))
	chunks = min(max(chunks, 1), total.Milliseconds())
	width := total / time.Duration(chunks)
	for k := int64(0); k < chunks; k++ {
		lo := b.o.Start.Add(time.Duration(k) * width)
		hi := lo.Add(width)
		if k == chunks-1 {
			hi = b.o.End
		}
		part, err := b.c.query(ctx, fmt.Sprintf(`%s{%s}[%s]`, metric, b.sel, promDuration(hi.Sub(lo))), hi)
		if err != nil {
			return err
		}
		for _, s := range part {
			key := seriesKey(s.labels)
			for _, smp := range s.samples {
				if smp.ts > lo.UnixMilli() && smp.ts <= hi.UnixMilli() {
					each(s.labels, key, smp)
				}
			}
		}
	}
	return nil
}

// maxChunks bounds the raw-sample queries of one field.
const maxChunks = 500

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func clamp01(v float64) float64 { return min(max(v, 0), 1) }

// seriesKey identifies a series by its sorted labels.
func seriesKey(l map[string]string) string {
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
		b.WriteByte(0)
	}
	return b.String()
}

// ratioBins is the resolution of the percentiles of activity ratios:
// 1e-4, finer than anything a dashboard shows.
const ratioBins = 10_000

// ratioHist counts ratios (0..1) in bins of 1/ratioBins, and sums them
// exactly: the mean is exact, a percentile within half a bin, and the
// memory fixed whatever the number of samples.
type ratioHist struct {
	bins [ratioBins + 1]uint64
	n    uint64
	sum  float64
}

// add counts a ratio; NaN and ±Inf are no sample, and the rest count
// within 0..1, so that one impossible value cannot make the mean one.
func (h *ratioHist) add(v float64) {
	if !finite(v) {
		return
	}
	v = clamp01(v)
	h.bins[int(math.Round(v*ratioBins))]++
	h.n++
	h.sum += v
}

// quantile interpolates between the two closest ranks, as PromQL's
// quantile_over_time does.
func (h *ratioHist) quantile(q float64) float64 {
	rank := q * float64(h.n-1)
	lo := math.Floor(rank)
	vlo, vhi := h.atRank(uint64(lo)), h.atRank(uint64(math.Ceil(rank)))
	return vlo + (rank-lo)*(vhi-vlo)
}

// atRank is the value of the r-th sample in order (from 0).
func (h *ratioHist) atRank(r uint64) float64 {
	var seen uint64
	for i, c := range h.bins {
		seen += c
		if seen > r {
			return float64(i) / ratioBins
		}
	}
	return 1
}

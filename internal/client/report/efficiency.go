package report

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuscope/gpuscope/counters"
)

// The fields and series OFU and cost read, under their dcgm-exporter names.
const (
	smClock    = "DCGM_FI_DEV_SM_CLOCK"
	maxSMClock = "DCGM_FI_DEV_MAX_SM_CLOCK"
	// priceRecord is the price per GPU-hour of each GPU model, one series
	// per modelName, that the chart's prometheusRule.pricePerGPUHour
	// records (the gpuscope.prices group) and the gpuscope.cost rules read.
	priceRecord = "model:gpuscope_price_per_gpu_hour:value"
)

// gpuLabels identify a whole GPU: its clock is its MIG instances' too.
const gpuLabels = "cluster,Hostname,hostname,gpu,UUID"

// windowAvg is the mean of every 100 ms sample of each scrape window of
// metric, averaged over rng: "avg_over_time(M_window{sel,stat="avg"}[rng])"
// under each of its names. The window statistics follow the name the
// counters file gives the field, in its unit; a ratio keeps its unit.
func windowAvg(metric, sel, rng string) string {
	names := []string{metric}
	for _, alt := range counters.OtherNames(metric) {
		if alt.Factor == 1 {
			names = append(names, alt.Name)
		}
	}
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf(`avg_over_time(%s_window{%s,stat="avg"}[%s])`, n, sel, rng))
	}
	return strings.Join(parts, "\nor ")
}

// ofuExpr is each device's OFU over rng, as the gpuscope.efficiency rules
// define it: its mean tensor pipe activity (the window means where the
// counters file has them, else the plain gauge) times its GPU's mean SM
// clock over the GPU's maximum SM clock (DCGM_FI_DEV_MAX_SM_CLOCK, else
// the highest SM clock of the range).
func ofuExpr(by, sel, rng string) string {
	tensor := fmt.Sprintf("max by (%[1]s) (\n%[2]s\n)\nor max by (%[1]s) (\n%[3]s\n)",
		by, windowAvg(tensorAct, sel, rng), overTime("avg_over_time", tensorAct, sel, rng, 1))
	clock := fmt.Sprintf("max by (%s) (\n%s\n)", gpuLabels, overTime("avg_over_time", smClock, sel, rng, 1))
	top := fmt.Sprintf("max by (%[1]s) (\n%[2]s\n)\nor max by (%[1]s) (\n%[3]s\n)",
		gpuLabels, overTime("max_over_time", maxSMClock, sel, rng, 1), overTime("max_over_time", smClock, sel, rng, 1))
	return fmt.Sprintf("(\n%s\n)\n* on (%s) group_left\nclamp_max(\n%s\n/ on (%s)\n(%s), 1)", tensor, gpuLabels, clock, gpuLabels, top)
}

// ofu is the selection's OFU: each device's, weighted by the time it was
// held. Absent where no device has both tensor activity and SM clock.
func (b *builder) ofu(ctx context.Context, s *Summary, devs map[string]*device) error {
	res, err := b.q(ctx, ofuExpr(b.by(), b.sel+`,GPU_CI_ID=""`, b.rng))
	if err != nil {
		return err
	}
	var sum, weight float64
	for _, r := range res {
		d := devs[deviceKey(r.labels)]
		if d == nil || len(r.samples) != 1 || !finite(r.samples[0].v) {
			continue
		}
		w := max(d.held, b.o.Resolution).Hours()
		sum += w * clamp01(r.samples[0].v)
		weight += w
	}
	if weight > 0 {
		v := round(sum/weight, 4)
		s.OFU = &v
	}
	return nil
}

// cost prices the GPU-hours of the whole GPUs the selection held at the
// price per GPU-hour of their model, the last one Prometheus recorded in
// the range (priceRecord), and says how much of it was on GPUs idle the
// whole range. Absent without any price. A MIG instance is a share of its
// GPU that the report does not know, and a GPU of a model without a price
// has none: both are counted as left out.
func (b *builder) cost(ctx context.Context, s *Summary, devs map[string]*device) error {
	res, err := b.q(ctx, fmt.Sprintf(`max by (modelName) (last_over_time(%s[%s]))`, priceRecord, b.rng))
	if err != nil {
		return err
	}
	prices := map[string]float64{}
	for _, r := range res {
		if len(r.samples) == 1 && finite(r.samples[0].v) && r.samples[0].v >= 0 {
			prices[r.labels["modelName"]] = r.samples[0].v
		}
	}
	if len(prices) == 0 {
		return nil
	}
	res, err = b.q(ctx, fmt.Sprintf(`count by (%s,modelName) (count_over_time(%s{%s}[%s]))`, b.by(), fbUsed, b.sel, b.rng))
	if err != nil {
		return err
	}
	model := map[string]string{}
	for _, r := range res {
		model[deviceKey(r.labels)] = r.labels["modelName"]
	}
	var total, idle float64
	for key, d := range devs {
		price, ok := prices[model[key]]
		if d.mig || !ok {
			s.CostExcluded++
			continue
		}
		c := max(d.held, b.o.Resolution).Hours() * price
		total += c
		if d.idle {
			idle += c
		}
	}
	t, i := round(total, 4), round(idle, 4)
	s.Cost, s.CostIdle = &t, &i
	return nil
}

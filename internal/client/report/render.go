package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// WriteJSON writes the summary as one line of compact JSON, the form a
// scheduler stores (Slurm's AdminComment, a Kubernetes annotation).
func (s *Summary) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding the summary: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// boundOrder is the insight classes in the order docs/insight.md gives.
var boundOrder = []string{"compute", "memory", "communication", "input", "idle"}

// WriteTable writes the summary for people.
func (s *Summary) WriteTable(w io.Writer) error {
	from, to := time.Unix(s.From, 0).UTC(), time.Unix(s.To, 0).UTC()
	if _, err := fmt.Fprintf(w, "GPU report of %s, %s to %s (%s)\n\n", sampleapi.Printable(s.Selection.String()), from.Format(time.RFC3339),
		to.Format(time.RFC3339), to.Sub(from)); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value string) { fmt.Fprintf(tw, "%s\t%s\n", name, value) }
	gpus := fmt.Sprint(s.GPUs)
	if s.MIG > 0 {
		gpus += fmt.Sprintf(" (%d MIG instances)", s.MIG)
	}
	row("GPUs", gpus)
	row("GPU-hours", gpuHours(s.GPUHours))
	row("SM activity", stat(s.SM))
	row("Tensor activity", stat(s.Tensor))
	row("OFU", ofu(s.OFU))
	row("Bound by", bound(s.Bound))
	if s.Stall != nil {
		row("Stalled", pct(*s.Stall)+" of the busy time")
	} else {
		row("Stalled", "n/a (gpuscope runs without --insight)")
	}
	row("Memory peak", fmt.Sprintf("%.1f GiB on one GPU", float64(s.MemPeakBytes)/(1<<30)))
	row("Energy", energy(s))
	row("Idle GPUs", idle(s))
	row("Cost", cost(s))
	return tw.Flush()
}

func ofu(v *float64) string {
	if v == nil {
		return "n/a (no tensor activity or SM clock field in the counters file)"
	}
	return pct(*v) + " of peak tensor throughput (tensor activity x SM clock / max SM clock)"
}

func cost(s *Summary) string {
	if s.Cost == nil {
		return "n/a (no price per GPU-hour recorded: the chart value prometheusRule.pricePerGPUHour)"
	}
	out := fmt.Sprintf("%.2f (GPU-hours x price per GPU-hour of the model); %.2f of it on GPUs idle throughout", *s.Cost, *s.CostIdle)
	if s.CostExcluded > 0 {
		out += fmt.Sprintf("; %d MIG instances or GPUs without a price left out", s.CostExcluded)
	}
	return out
}

func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

func stat(st *Stat) string {
	if st == nil {
		return "n/a (no profiling field in the counters file)"
	}
	return "mean " + pct(st.Mean) + ", p99 " + pct(st.P99)
}

func bound(b map[string]float64) string {
	if len(b) == 0 {
		return "n/a (gpuscope runs without --insight)"
	}
	var extra []string
	for c := range b {
		if !slices.Contains(boundOrder, c) {
			extra = append(extra, c)
		}
	}
	sort.Strings(extra)
	var parts []string
	for _, c := range append(slices.Clone(boundOrder), extra...) {
		if v, ok := b[c]; ok {
			parts = append(parts, sampleapi.Printable(c)+" "+pct(v))
		}
	}
	return strings.Join(parts, ", ")
}

func gpuHours(h float64) string {
	if h >= 1 {
		return fmt.Sprintf("%.2f", h)
	}
	return fmt.Sprintf("%.3f (%.1f GPU-minutes)", h, 60*h)
}

func energy(s *Summary) string {
	out := "n/a"
	if s.EnergyJoules != nil {
		j := *s.EnergyJoules
		if j >= 1e6 {
			out = fmt.Sprintf("%.3f MJ (%.3f kWh)", j/1e6, j/3.6e6)
		} else {
			out = fmt.Sprintf("%.1f kJ (%.4f kWh)", j/1e3, j/3.6e6)
		}
	}
	if s.EnergyExcluded > 0 {
		out += fmt.Sprintf("; %d MIG instances or shared GPUs left out (their board's energy is not theirs alone)", s.EnergyExcluded)
	}
	return out
}

func idle(s *Summary) string {
	out := fmt.Sprintf("%d of %d", s.Idle, s.GPUs)
	if len(s.IdleDevices) > 0 {
		// Names are label values: a terminal must not act on them.
		out += ": " + sampleapi.Printable(strings.Join(s.IdleDevices, ", "))
	}
	if s.IdleUnknown > 0 {
		out += fmt.Sprintf(" (%d without an activity field)", s.IdleUnknown)
	}
	if s.IdleFrom != "" {
		out += fmt.Sprintf("; idle: activity under %g%% throughout, from %s", IdleBelow*100, s.IdleFrom)
	}
	return out
}

// Package report is `gpuscope report`: the GPU efficiency summary of a pod,
// a namespace or an HPC job over a time range (GPUs and GPU-hours, SM and
// tensor activity, OFU, bound classes, stalls, memory peak, energy, idle
// GPUs, cost), read from Prometheus' HTTP API alone, as a table for people
// and as compact JSON a scheduler stores (docs/report.md has its schema).
package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SchemaVersion is the "v" of the JSON summary; it changes only when a
// field changes meaning or goes away.
const SchemaVersion = 1

// ErrNotFound says the selection holds no GPU in the range: no such pod,
// namespace or job in this Prometheus, or not then.
var ErrNotFound = errors.New("no GPU series")

// Selection names what the summary is of: a pod (Namespace and Pod), a
// namespace, or an HPC job.
type Selection struct {
	Namespace, Pod, HPCJob string
}

// Validate reports a selection the report cannot use.
func (s Selection) Validate() error {
	switch {
	case s.HPCJob != "" && (s.Namespace != "" || s.Pod != ""):
		return errors.New("give an HPC job or a namespace (with a pod), not both")
	case s.Pod != "" && s.Namespace == "":
		return errors.New("a pod needs its namespace")
	case s.HPCJob == "" && s.Namespace == "":
		return errors.New("give a namespace (and a pod) or an HPC job")
	}
	return nil
}

// matchers is the selection as PromQL label matchers, without braces.
func (s Selection) matchers() string {
	if s.HPCJob != "" {
		return `hpc_job=` + strconv.Quote(s.HPCJob)
	}
	m := `namespace=` + strconv.Quote(s.Namespace)
	if s.Pod != "" {
		m += `,pod=` + strconv.Quote(s.Pod)
	}
	return m
}

// String names the selection for people.
func (s Selection) String() string {
	switch {
	case s.HPCJob != "":
		return "HPC job " + s.HPCJob
	case s.Pod != "":
		return "pod " + s.Namespace + "/" + s.Pod
	}
	return "namespace " + s.Namespace
}

// Options is one report's question.
type Options struct {
	Selection  Selection
	Start, End time.Time
	// Resolution is the step at which the time a GPU is held is counted;
	// DefaultResolution(End-Start) when 0.
	Resolution time.Duration
	// ChunkSamples bounds the raw samples one query reads; 200,000 when 0.
	ChunkSamples int
	// Deadline bounds the whole report, every query together;
	// DefaultDeadline when 0.
	Deadline time.Duration
}

// DefaultResolution is the step of GPU-hours for a range: a two-thousandth
// of it, whole seconds, between 1 s and 5 min.
func DefaultResolution(r time.Duration) time.Duration {
	step := (r / 2000).Round(time.Second)
	return min(max(step, time.Second), 5*time.Minute)
}

// Validate reports a time range or resolution the report cannot use.
func (o Options) Validate() error {
	if err := o.Selection.Validate(); err != nil {
		return err
	}
	switch {
	case !o.End.After(o.Start):
		return fmt.Errorf("the range %s to %s is empty: the start must be before the end", o.Start.Format(time.RFC3339), o.End.Format(time.RFC3339))
	case o.Resolution < 0 || o.Resolution > 0 && o.Resolution < time.Millisecond:
		return fmt.Errorf("resolution %s: at least 1ms", o.Resolution)
	case o.Resolution > o.End.Sub(o.Start):
		return fmt.Errorf("resolution %s is longer than the range %s", o.Resolution, o.End.Sub(o.Start))
	}
	return nil
}

// Stat is the mean and 99th percentile of an activity over every sample
// of the selection's GPUs in the range.
type Stat struct {
	Mean float64 `json:"mean"`
	P99  float64 `json:"p99"`
}

// Summary is the report. Its JSON form is what a scheduler stores: keep
// the names short and stable (SchemaVersion), leave out what is unknown.
type Summary struct {
	Version   int       `json:"v"`
	Selection Selection `json:"-"`
	Sel       jsonSel   `json:"sel"`
	From      int64     `json:"from"`
	To        int64     `json:"to"`
	// GPUs are the GPUs and MIG instances held in the range; MIG those of
	// them that are MIG instances.
	GPUs int `json:"gpus"`
	MIG  int `json:"mig,omitempty"`
	// GPUHours is the time each was held, summed.
	GPUHours float64 `json:"gpu_h"`
	SM       *Stat   `json:"sm,omitempty"`
	Tensor   *Stat   `json:"tensor,omitempty"`
	// Bound is the share of time in each insight class; Stall the mean
	// stall ratio. Both need --insight on the exporter.
	Bound map[string]float64 `json:"bound,omitempty"`
	Stall *float64           `json:"stall,omitempty"`
	// MemPeakBytes is the most framebuffer one GPU or instance held.
	MemPeakBytes int64 `json:"mem_peak_b"`
	// EnergyJoules is the energy of the whole GPUs held alone;
	// EnergyExcluded counts the GPUs and instances it leaves out (MIG
	// instances and shared GPUs, whose board energy is not theirs alone).
	EnergyJoules   *float64 `json:"energy_j,omitempty"`
	EnergyExcluded int      `json:"energy_excl,omitempty"`
	// Idle counts the GPUs and instances whose activity stayed below
	// IdleBelow the whole range; IdleUnknown those without an activity
	// field. IdleDevices names the idle ones, and IdleFrom says what the
	// activity was read from (table only).
	Idle        int      `json:"idle"`
	IdleUnknown int      `json:"idle_unknown,omitempty"`
	IdleDevices []string `json:"-"`
	IdleFrom    string   `json:"-"`
	// OFU is the Overall FLOP Utilization of the devices, weighted by the
	// time each was held: tensor pipe activity times SM clock over the
	// maximum SM clock.
	OFU *float64 `json:"ofu,omitempty"`
	// Cost is the GPU-hours of the whole GPUs held times the price per
	// GPU-hour of their model that the rules record (the chart value
	// prometheusRule.pricePerGPUHour); CostIdle the part on GPUs idle the
	// whole range; CostExcluded counts the MIG instances and the GPUs of
	// a model without a price, left out. Absent without any price.
	Cost         *float64 `json:"cost,omitempty"`
	CostIdle     *float64 `json:"cost_idle,omitempty"`
	CostExcluded int      `json:"cost_excl,omitempty"`
}

// jsonSel is the selection in the JSON form: only what was asked.
type jsonSel struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	HPCJob    string `json:"hpc_job,omitempty"`
}

// Build reads the summary from Prometheus. An error wraps ErrNotFound when
// the selection holds no GPU in the range, ErrUnreachable when Prometheus
// does not answer, and is a *QueryError when it refuses a query.
func Build(ctx context.Context, c *Client, o Options) (*Summary, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Resolution == 0 {
		o.Resolution = DefaultResolution(o.End.Sub(o.Start))
	}
	if o.ChunkSamples <= 0 {
		o.ChunkSamples = 200_000
	}
	if o.Deadline <= 0 {
		o.Deadline = DefaultDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, o.Deadline)
	defer cancel()
	s, err := build(ctx, c, o)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("the report took longer than %s, its deadline for every query together: %w", o.Deadline, err)
	}
	return s, err
}

// DefaultDeadline bounds a whole report: four queries at the default
// --timeout; a report of a long range from a healthy Prometheus takes
// seconds.
const DefaultDeadline = 8 * time.Minute

func build(ctx context.Context, c *Client, o Options) (*Summary, error) {
	b := &builder{c: c, o: o, sel: o.Selection.matchers(), rng: promDuration(o.End.Sub(o.Start))}
	s := &Summary{Version: SchemaVersion, Selection: o.Selection, From: o.Start.Unix(), To: o.End.Unix(),
		Sel: jsonSel{Namespace: o.Selection.Namespace, Pod: o.Selection.Pod, HPCJob: o.Selection.HPCJob}}
	devs, err := b.devices(ctx)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w for %s between %s and %s: no such %s in this Prometheus, or it held no GPU then (the report reads DCGM_FI_DEV_FB_USED{%s})",
			ErrNotFound, o.Selection, o.Start.Format(time.RFC3339), o.End.Format(time.RFC3339), kindOf(o.Selection), b.sel)
	}
	for _, step := range []func(context.Context, *Summary, map[string]*device) error{
		b.heldTime, b.activity, b.ofu, b.insight, b.memoryPeak, b.energy, b.idle, b.cost,
	} {
		if err := step(ctx, s, devs); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func kindOf(s Selection) string {
	switch {
	case s.HPCJob != "":
		return "job"
	case s.Pod != "":
		return "pod"
	}
	return "namespace"
}

// promDuration writes d as a PromQL duration in milliseconds.
func promDuration(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// deviceLabels identify a GPU or MIG instance across exporters and clusters.
var deviceLabels = []string{"cluster", "Hostname", "hostname", "gpu", "UUID", "GPU_I_ID"}

// device is one GPU or MIG instance the selection held.
type device struct {
	name string
	mig  bool
	held time.Duration
	idle bool // idle the whole range
}

// deviceKey identifies the device a series is of.
func deviceKey(l map[string]string) string {
	var b strings.Builder
	for _, k := range deviceLabels {
		b.WriteString(l[k])
		b.WriteByte('/')
	}
	return b.String()
}

// deviceName names a device for people: its host, GPU and instance.
func deviceName(l map[string]string) string {
	host := l["Hostname"]
	if host == "" {
		host = l["hostname"]
	}
	name := "GPU " + l["gpu"]
	if gi := l["GPU_I_ID"]; gi != "" {
		name += " instance " + gi
	}
	if host != "" {
		name = host + " " + name
	}
	if c := l["cluster"]; c != "" {
		name = c + "/" + name
	}
	return name
}

// round keeps d decimals: the summary is stored, and more digits are noise.
func round(v float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(v*p) / p
}

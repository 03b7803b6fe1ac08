// Package gpucheck judges a scrape of gpuscope taken on a real GPU machine:
// every field the counters file asks for is there on every GPU (or reported
// unsupported by the GPU), every value is plausible for its unit, related
// fields agree with each other and with nvidia-smi's answers of the same
// moment, and the log shows that the XID and MIG paths ran without failing.
// Soak judges repeated scrapes, CheckLoad a GPU under gpuscope-cudaload.
// scripts/gpu-check.sh runs them; the same rules run in the test suite over
// the simulated node and a fake NVML, so the rules and the script are tested
// where no GPU is.
package gpucheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuscope/gpuscope/counters"
)

// Input is what one run on a GPU machine produced, and what the machine is.
type Input struct {
	// Exposition is the body of a /metrics scrape taken after at least two
	// watch intervals, so rate-like fields have a value.
	Exposition []byte
	// Counters is the counters file the run used.
	Counters *counters.Set
	// Log is gpuscope's log of the run (text or JSON lines).
	Log string
	// GPUs is how many GPUs the driver lists (nvidia-smi -L); 0 when unknown.
	GPUs int
	// ExpectGPM is true on Hopper and later, where NVML's GPM serves the
	// profiling fields: a missing DCGM_FI_PROF_* field is then a failure.
	ExpectGPM bool
	// ExpectMIG is true when some GPU has MIG enabled: GPU-instance series
	// must appear. When false, none may.
	ExpectMIG bool
	// SMIBefore and SMIAfter are nvidia-smi's answers to SMIQuery taken
	// just before and just after the scrape; nil skips the cross-check.
	// SMIBefore also says which GPUs have MIG enabled.
	SMIBefore, SMIAfter SMI
}

// Finding is one thing the check noticed.
type Finding struct {
	// Fail is false for findings worth a look that do not fail the check,
	// such as a field the GPU itself does not support.
	Fail bool
	// Note marks what the hardware explains and nobody needs to act on,
	// such as the fan speed of a GPU without a fan; it never fails.
	Note   bool
	Check  string
	Series string
	Msg    string
}

func (f Finding) String() string {
	sev := "WARN"
	switch {
	case f.Fail:
		sev = "FAIL"
	case f.Note:
		sev = "NOTE"
	}
	if f.Series == "" {
		return fmt.Sprintf("%s %-12s %s", sev, f.Check, f.Msg)
	}
	return fmt.Sprintf("%s %-12s %s: %s", sev, f.Check, f.Series, f.Msg)
}

// Report is the outcome of a check.
type Report struct {
	Findings []Finding
	// Series is how many DCGM_* series were judged.
	Series int
	// Fields is how many counters-file fields were looked for on each GPU.
	Fields int
	GPUs   int
	// SMI is the cross-check against nvidia-smi, one row per field and GPU.
	SMI []SMIRow
}

// Failed reports whether any finding fails the check.
func (r Report) Failed() bool {
	for _, f := range r.Findings {
		if f.Fail {
			return true
		}
	}
	return false
}

// Failures counts the failing findings.
func (r Report) Failures() int {
	n := 0
	for _, f := range r.Findings {
		if f.Fail {
			n++
		}
	}
	return n
}

// Warnings counts the findings worth a look that do not fail the check.
func (r Report) Warnings() int {
	n := 0
	for _, f := range r.Findings {
		if !f.Fail && !f.Note {
			n++
		}
	}
	return n
}

// Notes counts the findings the hardware explains.
func (r Report) Notes() int {
	n := 0
	for _, f := range r.Findings {
		if f.Note {
			n++
		}
	}
	return n
}

// coreFields are served by every NVIDIA datacenter GPU through NVML; one that
// is missing is a bug of gpuscope, never a limit of the hardware.
var coreFields = map[string]bool{
	"DCGM_FI_DEV_GPU_TEMP":    true,
	"DCGM_FI_DEV_POWER_USAGE": true,
	"DCGM_FI_DEV_SM_CLOCK":    true,
	"DCGM_FI_DEV_MEM_CLOCK":   true,
	"DCGM_FI_DEV_GPU_UTIL":    true,
	"DCGM_FI_DEV_FB_TOTAL":    true,
	"DCGM_FI_DEV_FB_USED":     true,
	"DCGM_FI_DEV_FB_FREE":     true,
}

// absentByDesign are fields a whole class of GPU lacks in hardware, with why:
// the driver reports them unsupported there, which is the truth, not a fault
// of gpuscope nor anything to look at. Data-center GPUs (H100, A100, L40S)
// are passively cooled by the server's fans and have no fan of their own.
var absentByDesign = map[string]string{
	"DCGM_FI_DEV_FAN_SPEED": "a passively cooled GPU has no fan; GPUFanFailing cannot watch it",
}

// unitRange is the plausible span of a value in a unit, wide enough for every
// current GPU and narrow enough to catch a wrong scale (W for mW, bytes for
// MiB, percent for ratio).
type unitRange struct{ lo, hi float64 }

var unitRanges = map[string]unitRange{
	"ratio":   {0, 1},
	"%":       {0, 100},
	"C":       {0, 150},
	"W":       {0, 2000},
	"MHz":     {0, 10000},
	"MiB":     {0, 4 << 20},
	"bytes/s": {0, 1e13},
	"KB/s":    {0, 1e10},
	"mV":      {0, 2000},
	"lanes":   {0, 64},
}

// series is one parsed sample.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

func (s series) String() string {
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "UUID" || k == "pci_bus_id" || k == "modelName" || k == "Hostname" || k == "hostname" || strings.HasPrefix(k, "DCGM_FI_") {
			continue // identity noise: gpu= already names the GPU
		}
		parts = append(parts, fmt.Sprintf("%s=%q", k, s.labels[k]))
	}
	return s.name + "{" + strings.Join(parts, ",") + "}"
}

// Check judges one run.
func Check(in Input) (Report, error) {
	all, err := parse(in.Exposition)
	if err != nil {
		return Report{}, err
	}
	c := &checker{in: in, byName: map[string][]series{}}
	for _, s := range all {
		c.byName[s.name] = append(c.byName[s.name], s)
	}
	c.checkSource()
	c.checkFields()
	c.checkValues(all)
	c.checkConsistency()
	c.checkMIG(all)
	c.checkLog()
	c.checkSMI()
	c.report.GPUs = len(c.gpus)
	return c.report, nil
}

type checker struct {
	in     Input
	byName map[string][]series
	gpus   []string
	report Report
}

func (c *checker) add(fail bool, check, series, format string, args ...any) {
	c.report.Findings = append(c.report.Findings, Finding{Fail: fail, Check: check, Series: series, Msg: fmt.Sprintf(format, args...)})
}

func parse(body []byte) ([]series, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse exposition: %w", err)
	}
	var out []series
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			s := series{name: name, labels: map[string]string{}, value: value(mf.GetType(), m)}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

// checkSource: the source is up, every GPU the driver lists is exported, and
// none is lost.
func (c *checker) checkSource() {
	// The server adds gpuscope_source_up; a render of the engine alone has none.
	for _, s := range c.byName["gpuscope_source_up"] {
		if s.value != 1 {
			c.add(true, "source", s.String(), "the source is not up")
		}
	}
	seen := map[string]bool{}
	for _, s := range c.byName["gpuscope_gpu_lost"] {
		if _, mig := s.labels["GPU_I_ID"]; mig {
			continue
		}
		g := s.labels["gpu"]
		if !seen[g] {
			seen[g] = true
			c.gpus = append(c.gpus, g)
		}
		if s.value != 0 {
			c.add(true, "source", s.String(), "GPU reported lost")
		}
	}
	sort.Strings(c.gpus)
	if len(c.gpus) == 0 {
		c.add(true, "source", "gpuscope_gpu_lost", "no GPU is exported")
	}
	if c.in.GPUs > 0 && len(c.gpus) != c.in.GPUs {
		c.add(true, "source", "", "the driver lists %d GPUs, gpuscope exports %d", c.in.GPUs, len(c.gpus))
	}
}

// checkFields: every field of the counters file is on every GPU, or the GPU
// says it does not support it.
func (c *checker) checkFields() {
	if c.in.Counters == nil {
		return
	}
	unsupported := map[[2]string]bool{}
	for _, s := range c.byName["gpuscope_field_supported"] {
		if s.value == 0 {
			unsupported[[2]string{s.labels["field"], s.labels["gpu"]}] = true
		}
	}
	for _, f := range c.in.Counters.Fields {
		if strings.HasPrefix(f.Name, "DCGM_EXP_") {
			continue // exporter-side families have shapes of their own, judged by value only
		}
		c.report.Fields++
		var without []string // GPUs that lack the field by design
		for _, g := range c.gpus {
			if f.Type == counters.Label {
				c.checkLabelField(f.Name, g, unsupported[[2]string{f.Name, g}])
				continue
			}
			if c.hasSeries(f.Name, g) {
				continue
			}
			switch {
			case unsupported[[2]string{f.Name, g}] && f.Name == "DCGM_FI_DEV_GPU_UTIL" && c.migEnabled(g):
				// nvml.h: nvmlDeviceGetUtilizationRates is not supported on
				// MIG-enabled GPUs; dcgm-exporter's series is blank there too.
				c.report.Findings = append(c.report.Findings, Finding{Note: true, Check: "fields", Series: fmt.Sprintf("%s{gpu=%q}", f.Name, g),
					Msg: "unsupported, as NVML says it is on a GPU with MIG enabled"})
			case unsupported[[2]string{f.Name, g}] && (coreFields[f.Name] || (c.in.ExpectGPM && strings.HasPrefix(f.Name, "DCGM_FI_PROF_"))):
				c.add(true, "fields", fmt.Sprintf("%s{gpu=%q}", f.Name, g), "reported unsupported, but this GPU serves it through NVML")
			case unsupported[[2]string{f.Name, g}] && absentByDesign[f.Name] != "":
				without = append(without, g)
			case unsupported[[2]string{f.Name, g}]:
				c.add(false, "fields", fmt.Sprintf("%s{gpu=%q}", f.Name, g), "not supported by this GPU (gpuscope_field_supported 0)")
			default:
				c.add(true, "fields", fmt.Sprintf("%s{gpu=%q}", f.Name, g), "missing, and gpuscope_field_supported gives no reason")
			}
		}
		if len(without) > 0 {
			// One line for the node: eight GPUs without a fan are one fact.
			c.report.Findings = append(c.report.Findings, Finding{Note: true, Check: "fields", Series: f.Name,
				Msg: fmt.Sprintf("not supported on GPU %s (%s)", strings.Join(without, ", "), absentByDesign[f.Name])})
		}
	}
}

// migEnabled says whether a GPU has MIG enabled: nvidia-smi's
// mig.mode.current when the run took it, else whatever --expect-mig says
// of the node.
func (c *checker) migEnabled(gpu string) bool {
	if c.in.SMIBefore == nil {
		return c.in.ExpectMIG
	}
	for _, p := range c.in.SMIBefore {
		if p["index"] == gpu {
			return p["mig.mode.current"] == "Enabled"
		}
	}
	return false
}

func (c *checker) hasSeries(name, gpu string) bool {
	for _, s := range c.byName[name] {
		if s.labels["gpu"] == gpu {
			return true
		}
	}
	return false
}

// checkLabelField: a label-type field is a non-empty label on the GPU's
// series, or the GPU says it does not support it (the fabric's cluster
// UUID on a GPU that joins no NVLink fabric), which is a warning as for
// any other field.
func (c *checker) checkLabelField(name, gpu string, unsupported bool) {
	for fam, ss := range c.byName {
		if !strings.HasPrefix(fam, "DCGM_") {
			continue
		}
		for _, s := range ss {
			if s.labels["gpu"] != gpu {
				continue
			}
			if v, ok := s.labels[name]; ok && v != "" {
				return
			}
		}
	}
	if unsupported {
		c.add(false, "fields", fmt.Sprintf("%s{gpu=%q}", name, gpu), "not supported by this GPU (gpuscope_field_supported 0)")
		return
	}
	c.add(true, "fields", fmt.Sprintf("%s{gpu=%q}", name, gpu), "label field missing or empty on every series of the GPU")
}

// checkValues: every DCGM_* value is finite and within its unit's span;
// counters and window statistics never go below zero.
func (c *checker) checkValues(all []series) {
	for _, s := range all {
		if !strings.HasPrefix(s.name, "DCGM_") {
			continue
		}
		c.report.Series++
		base := strings.TrimSuffix(s.name, "_window")
		if math.IsNaN(s.value) || math.IsInf(s.value, 0) {
			c.add(true, "values", s.String(), "value %v is not finite", s.value)
			continue
		}
		info, ok := counters.Lookup(base)
		if !ok {
			continue
		}
		if r, ok := unitRanges[info.Unit]; ok && (s.value < r.lo || s.value > r.hi) {
			c.add(true, "values", s.String(), "%v is outside [%v, %v] %s", s.value, r.lo, r.hi, info.Unit)
			continue
		}
		if s.value < 0 && (info.Type == counters.Counter || info.Unit != "") {
			c.add(true, "values", s.String(), "%v is negative", s.value)
		}
	}
}

// checkConsistency: related fields of one GPU agree.
func (c *checker) checkConsistency() {
	get := func(name, gpu string) (float64, bool) {
		for _, s := range c.byName[name] {
			if s.labels["gpu"] == gpu && s.labels["GPU_I_ID"] == "" {
				return s.value, true
			}
		}
		return 0, false
	}
	for _, g := range c.gpus {
		total, okT := get("DCGM_FI_DEV_FB_TOTAL", g)
		used, okU := get("DCGM_FI_DEV_FB_USED", g)
		free, okF := get("DCGM_FI_DEV_FB_FREE", g)
		if okT && okU && okF && used+free > total+1 {
			c.add(true, "consistency", fmt.Sprintf("gpu %s", g), "FB_USED %v + FB_FREE %v exceed FB_TOTAL %v MiB", used, free, total)
		}
		if okT && total == 0 {
			c.add(true, "consistency", fmt.Sprintf("gpu %s", g), "FB_TOTAL is 0 MiB")
		}
		power, okP := get("DCGM_FI_DEV_POWER_USAGE", g)
		limit, okL := get("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", g)
		// Power may overshoot the limit briefly; a quarter above is a unit error.
		if okP && okL && limit > 0 && power > 1.25*limit {
			c.add(true, "consistency", fmt.Sprintf("gpu %s", g), "POWER_USAGE %v W is far above ENFORCED_POWER_LIMIT %v W", power, limit)
		}
		temp, okTemp := get("DCGM_FI_DEV_GPU_TEMP", g)
		shutdown, okS := get("DCGM_FI_DEV_SHUTDOWN_TEMP", g)
		if okTemp && okS && shutdown > 0 && temp >= shutdown {
			c.add(true, "consistency", fmt.Sprintf("gpu %s", g), "GPU_TEMP %v C is at or above SHUTDOWN_TEMP %v C", temp, shutdown)
		}
	}
	// Window statistics of one series are ordered: min <= avg <= max.
	type key struct{ name, id string }
	stats := map[key]map[string]float64{}
	for name, ss := range c.byName {
		if !strings.HasSuffix(name, "_window") {
			continue
		}
		for _, s := range ss {
			id := s
			id.labels = map[string]string{}
			for k, v := range s.labels {
				if k != "stat" {
					id.labels[k] = v
				}
			}
			k := key{name, id.String()}
			if stats[k] == nil {
				stats[k] = map[string]float64{}
			}
			stats[k][s.labels["stat"]] = s.value
		}
	}
	for k, st := range stats {
		lo, okLo := st["min"]
		hi, okHi := st["max"]
		if okLo && okHi && lo > hi {
			c.add(true, "consistency", k.id, "window min %v > max %v", lo, hi)
		}
		if avg, ok := st["avg"]; ok && okLo && okHi && (avg < lo-1e-9 || avg > hi+1e-9) {
			c.add(true, "consistency", k.id, "window avg %v outside [min %v, max %v]", avg, lo, hi)
		}
	}
}

// checkMIG: GPU-instance series appear exactly when MIG is enabled.
func (c *checker) checkMIG(all []series) {
	mig := 0
	for _, s := range all {
		if strings.HasPrefix(s.name, "DCGM_") && s.labels["GPU_I_ID"] != "" {
			mig++
		}
	}
	switch {
	case c.in.ExpectMIG && mig == 0:
		c.add(true, "mig", "", "MIG is enabled, but no series carries GPU_I_ID")
	case !c.in.ExpectMIG && mig > 0:
		c.add(true, "mig", "", "MIG is disabled, but %d series carry GPU_I_ID", mig)
	}
}

var (
	textLevel = regexp.MustCompile(`\blevel=(\w+)`)
	textMsg   = regexp.MustCompile(`\bmsg=("(?:[^"\\]|\\.)*"|\S+)`)
)

// checkLog: no error, no panic, and no warning from the XID or MIG paths.
// Other warnings are listed for a person to read.
func (c *checker) checkLog() {
	for _, line := range strings.Split(c.in.Log, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		level, msg := logLine(line)
		lower := strings.ToLower(line)
		switch {
		case strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "SIGSEGV"):
			c.add(true, "log", "", "%s", line)
		case level == "error" || level == "fatal" || level == "panic":
			c.add(true, "log", "", "%s", msg)
		case (level == "warning" || level == "warn") && (strings.Contains(lower, "xid") || strings.Contains(lower, "mig")):
			c.add(true, "log", "", "XID or MIG path: %s", msg)
		case level == "warning" || level == "warn":
			c.add(false, "log", "", "%s", msg)
		}
		if c.in.ExpectGPM && strings.Contains(line, "GPU found") && strings.Contains(lower, "gpm=false") {
			c.add(true, "log", "", "GPM is not supported on a GPU that should have it: %s", line)
		}
	}
}

// logLine returns the level and the whole line (for messages) of a logrus
// text or JSON line.
func logLine(line string) (string, string) {
	if strings.HasPrefix(line, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			level, _ := m["level"].(string)
			return level, line
		}
	}
	if m := textLevel.FindStringSubmatch(line); m != nil {
		msg := line
		if mm := textMsg.FindStringSubmatch(line); mm != nil {
			msg = strings.Trim(mm[1], `"`) + " (" + line + ")"
		}
		return m[1], msg
	}
	return "", line
}

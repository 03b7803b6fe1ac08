package gpucheck

import (
	"encoding/csv"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// smiField maps one `nvidia-smi --query-gpu` property onto the gpuscope
// series that reads the same NVML value, in dcgm-exporter's unit (the
// counters files' help text: C, W, MHz, MiB, %). nvidia-smi prints the
// same units, so scale is 1 except where noted; tolerances allow for the
// moment between nvidia-smi's read and gpuscope's sample, which the check
// narrows by taking nvidia-smi just before and just after the scrape.
type smiField struct {
	query string
	field string
	// abs and rel widen the span nvidia-smi's two readings make: abs in
	// the field's unit, rel as a share of the value. Zero for identity and
	// configuration, which do not move.
	abs, rel float64
	// label names an identity label that must equal nvidia-smi's text
	// instead of a series value.
	label string
}

var smiFields = []smiField{
	{query: "name", label: "modelName"},
	{query: "pci.bus_id", label: "pci_bus_id"},
	{query: "driver_version", label: "DCGM_FI_DRIVER_VERSION"},
	{query: "temperature.gpu", field: "DCGM_FI_DEV_GPU_TEMP", abs: 3},
	{query: "temperature.memory", field: "DCGM_FI_DEV_MEMORY_TEMP", abs: 3},
	// power.draw is a one-second average on current drivers; gpuscope's
	// sample can fall anywhere in a busy second.
	{query: "power.draw", field: "DCGM_FI_DEV_POWER_USAGE", abs: 30, rel: 0.2},
	{query: "power.limit", field: "DCGM_FI_DEV_POWER_MGMT_LIMIT", abs: 1},
	{query: "enforced.power.limit", field: "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", abs: 1},
	{query: "power.default_limit", field: "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF", abs: 1},
	{query: "clocks.current.sm", field: "DCGM_FI_DEV_SM_CLOCK", abs: 100, rel: 0.15},
	{query: "clocks.current.memory", field: "DCGM_FI_DEV_MEM_CLOCK", abs: 10, rel: 0.05},
	{query: "clocks.current.video", field: "DCGM_FI_DEV_VIDEO_CLOCK", abs: 100, rel: 0.15},
	{query: "clocks.max.sm", field: "DCGM_FI_DEV_MAX_SM_CLOCK", abs: 1},
	{query: "clocks.max.memory", field: "DCGM_FI_DEV_MAX_MEM_CLOCK", abs: 1},
	{query: "memory.total", field: "DCGM_FI_DEV_FB_TOTAL", abs: 1},
	{query: "memory.reserved", field: "DCGM_FI_DEV_FB_RESERVED", abs: 1},
	{query: "memory.used", field: "DCGM_FI_DEV_FB_USED", abs: 64, rel: 0.02},
	{query: "memory.free", field: "DCGM_FI_DEV_FB_FREE", abs: 64, rel: 0.02},
	{query: "utilization.gpu", field: "DCGM_FI_DEV_GPU_UTIL", abs: 15},
	{query: "utilization.memory", field: "DCGM_FI_DEV_MEM_COPY_UTIL", abs: 15},
	{query: "utilization.encoder", field: "DCGM_FI_DEV_ENC_UTIL", abs: 10},
	{query: "utilization.decoder", field: "DCGM_FI_DEV_DEC_UTIL", abs: 10},
	{query: "fan.speed", field: "DCGM_FI_DEV_FAN_SPEED", abs: 5},
	{query: "pstate", field: "DCGM_FI_DEV_PSTATE"},
	{query: "persistence_mode", field: "DCGM_FI_DEV_PERSISTENCE_MODE"},
	{query: "ecc.errors.corrected.aggregate.total", field: "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"},
	{query: "ecc.errors.uncorrected.aggregate.total", field: "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"},
	{query: "remapped_rows.correctable", field: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"},
	{query: "remapped_rows.uncorrectable", field: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"},
}

// SMIQuery is the --query-gpu list the check needs: the GPU's UUID and
// index first, then every property it compares.
func SMIQuery() string {
	q := []string{"uuid", "index", "mig.mode.current"}
	for _, f := range smiFields {
		q = append(q, f.query)
	}
	return strings.Join(q, ",")
}

// SMI is one answer of `nvidia-smi --query-gpu=... --format=csv`: each
// GPU's properties by query name, as printed.
type SMI map[string]map[string]string // UUID -> property -> text

// ParseSMI reads nvidia-smi's CSV, with or without units (nounits) and
// with the header line, which names the properties: "memory.used [MiB]".
func ParseSMI(b []byte) (SMI, error) {
	r := csv.NewReader(strings.NewReader(string(b)))
	r.TrimLeadingSpace = true
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi CSV: %w", err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("nvidia-smi CSV: a header and one line per GPU are needed, got %d lines", len(rows))
	}
	head := make([]string, len(rows[0]))
	uuidCol := -1
	for i, h := range rows[0] {
		if j := strings.Index(h, " ["); j >= 0 {
			h = h[:j]
		}
		head[i] = strings.TrimSpace(h)
		if head[i] == "uuid" {
			uuidCol = i
		}
	}
	if uuidCol < 0 {
		return nil, fmt.Errorf("nvidia-smi CSV: no uuid column in the header %q", strings.Join(rows[0], ","))
	}
	out := SMI{}
	for n, row := range rows[1:] {
		if len(row) != len(head) {
			return nil, fmt.Errorf("nvidia-smi CSV line %d: %d values for %d columns", n+2, len(row), len(head))
		}
		props := map[string]string{}
		for i, v := range row {
			props[head[i]] = strings.TrimSpace(v)
		}
		out[props["uuid"]] = props
	}
	return out, nil
}

// smiNumber reads one nvidia-smi value in the unit of its gpuscope field.
// ok is false for what nvidia-smi prints when the GPU has no such value:
// "[N/A]", "N/A", "[Not Supported]", "[Requested functionality has been
// deprecated]" and the like.
func smiNumber(query, text string) (v float64, ok bool, err error) {
	if text == "" || strings.HasPrefix(text, "[") || strings.EqualFold(text, "N/A") {
		return 0, false, nil
	}
	switch query {
	case "pstate": // "P0" is DCGM's 0
		if n, err := strconv.Atoi(strings.TrimPrefix(text, "P")); err == nil && strings.HasPrefix(text, "P") {
			return float64(n), true, nil
		}
		return 0, false, fmt.Errorf("%s %q: not P0..P15", query, text)
	case "persistence_mode":
		switch text {
		case "Enabled":
			return 1, true, nil
		case "Disabled":
			return 0, true, nil
		}
		return 0, false, fmt.Errorf("%s %q: not Enabled or Disabled", query, text)
	}
	// Strip the unit nvidia-smi appends without nounits: "700.00 W", "7 %".
	num := strings.Fields(text)[0]
	v, err = strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s %q: not a number", query, text)
	}
	return v, true, nil
}

// SMIRow is one comparison of the cross-check, for the report's table.
type SMIRow struct {
	GPU, Field, SMI, GPUScope string
	OK                        bool
	Why                       string
}

// checkSMI holds every field of the run's counters file that nvidia-smi
// also reports against nvidia-smi's answers taken just before and just
// after the scrape. A value nvidia-smi has must be exported within the
// span of its two readings (widened by the field's tolerance); one it
// reports N/A or unsupported must be absent, never a 0.
func (c *checker) checkSMI() {
	if c.in.SMIBefore == nil {
		return
	}
	after := c.in.SMIAfter
	if after == nil {
		after = c.in.SMIBefore
	}
	inFile := map[string]bool{}
	if c.in.Counters != nil {
		for _, f := range c.in.Counters.Fields {
			inFile[f.Name] = true
		}
	}
	uuids := make([]string, 0, len(c.in.SMIBefore))
	for u := range c.in.SMIBefore {
		uuids = append(uuids, u)
	}
	sort.Strings(uuids)
	for _, uuid := range uuids {
		gpu, found := c.gpuOfUUID(uuid)
		if !found {
			c.add(true, "nvidia-smi", "", "GPU %s (index %s) is not exported", uuid, c.in.SMIBefore[uuid]["index"])
			continue
		}
		for _, f := range smiFields {
			// Identity labels are always there; a field only when the
			// counters file asks for it.
			want := inFile[f.field]
			if f.label != "" {
				want = !strings.HasPrefix(f.label, "DCGM_") || inFile[f.label]
			}
			// A property this nvidia-smi was not asked for, or does not
			// know, is no answer at all.
			if _, asked := c.in.SMIBefore[uuid][f.query]; want && asked {
				c.compareSMI(gpu, f, c.in.SMIBefore[uuid][f.query], after[uuid][f.query])
			}
		}
	}
}

func (c *checker) gpuOfUUID(uuid string) (string, bool) {
	for _, s := range c.byName["gpuscope_gpu_lost"] {
		if _, mig := s.labels["GPU_I_ID"]; !mig && s.labels["UUID"] == uuid {
			return s.labels["gpu"], true
		}
	}
	return "", false
}

func (c *checker) compareSMI(gpu string, f smiField, before, after string) {
	row := SMIRow{GPU: gpu, Field: f.field, SMI: before}
	if after != before {
		row.SMI = before + " .. " + after
	}
	if f.label != "" {
		row.Field = f.label
		row.GPUScope, row.OK = c.labelOf(gpu, f.label)
		row.OK = row.OK && row.GPUScope == before
		if !row.OK {
			row.Why = "label differs from nvidia-smi's " + f.query
		}
		c.addSMIRow(row)
		return
	}
	b, okB, errB := smiNumber(f.query, before)
	a, okA, errA := smiNumber(f.query, after)
	if errB != nil || errA != nil {
		row.Why = fmt.Sprintf("nvidia-smi's value does not read: %v", firstErr(errB, errA))
		c.addSMIRow(row)
		return
	}
	got, has := c.valueOf(f.field, gpu)
	if has {
		row.GPUScope = strconv.FormatFloat(got, 'g', 6, 64)
	}
	switch {
	case !okB && !okA:
		row.OK = !has
		if has {
			row.Why = "nvidia-smi reports " + before + ", so the series must be absent, not a value"
		}
	case !has:
		row.Why = "nvidia-smi reads a value (" + f.query + "); gpuscope exports none"
	default:
		lo, hi := math.Min(b, a), math.Max(b, a)
		tol := math.Max(f.abs, f.rel*hi)
		row.OK = got >= lo-tol && got <= hi+tol
		if !row.OK {
			row.Why = fmt.Sprintf("outside [%.6g, %.6g], nvidia-smi's %s within its tolerance", lo-tol, hi+tol, f.query)
		}
	}
	c.addSMIRow(row)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (c *checker) addSMIRow(r SMIRow) {
	c.report.SMI = append(c.report.SMI, r)
	if !r.OK {
		c.add(true, "nvidia-smi", fmt.Sprintf("%s{gpu=%q}", r.Field, r.GPU), "gpuscope %q, nvidia-smi %q: %s", r.GPUScope, r.SMI, r.Why)
	}
}

// valueOf is the GPU's own series of a field, not a MIG instance's.
func (c *checker) valueOf(name, gpu string) (float64, bool) {
	for _, s := range c.byName[name] {
		if _, mig := s.labels["GPU_I_ID"]; mig || s.labels["gpu"] != gpu {
			continue
		}
		return s.value, true
	}
	return 0, false
}

// labelOf is the value of a label on the GPU's series.
func (c *checker) labelOf(gpu, label string) (string, bool) {
	for _, s := range c.byName["gpuscope_gpu_lost"] {
		if v, ok := s.labels[label]; ok && s.labels["gpu"] == gpu {
			return v, true
		}
	}
	for fam, ss := range c.byName {
		if !strings.HasPrefix(fam, "DCGM_") {
			continue
		}
		for _, s := range ss {
			if v, ok := s.labels[label]; ok && s.labels["gpu"] == gpu {
				return v, true
			}
		}
	}
	return "", false
}

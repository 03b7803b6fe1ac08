package gpucheck

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// LoadSummary is what gpuscope-cudaload reports it did (its JSON line).
type LoadSummary struct {
	PID               int     `json:"pid"`
	ProcessName       string  `json:"process_name"`
	Device            int     `json:"device"`
	AllocatedBytes    uint64  `json:"allocated_bytes"`
	Kernels           int     `json:"kernels"`
	H2DBytes          uint64  `json:"h2d_bytes"`
	ElapsedSeconds    float64 `json:"elapsed_seconds"`
	H2DBytesPerSecond float64 `json:"h2d_bytes_per_second"`
}

// LoadInput is a load run: a scrape before the load, scrapes during it,
// and the load's own account.
type LoadInput struct {
	Idle []byte
	Busy [][]byte
	Load LoadSummary
	// GPU is the loaded GPU's gpu label.
	GPU string
	// ExpectGPM: the GPU is Hopper or later, so SM activity and PCIe bytes
	// come through NVML's GPM and must be there.
	ExpectGPM bool
}

// Load bounds, with why:
const (
	// The kernel keeps every SM busy but for launch gaps and the copies
	// between launches (about 10% of the time).
	minSMActive = 0.5
	// The driver's context and the module take a few hundred MiB more
	// than the buffer.
	fbOverheadMiB = 2048
	// PCIe counters count headers and their own sampling window; the
	// load's rate is an average over its whole run.
	pcieLow, pcieHigh = 0.3, 3.0
)

// CheckLoad judges gpuscope's series for a GPU under gpuscope-cudaload:
// SM activity above 0.5, the framebuffer grown by about the load's
// allocation, PCIe receive traffic near the copies' rate, and the process
// listed with its PID, name and memory.
func CheckLoad(in LoadInput) (Report, error) {
	c := &checker{}
	idle, err := parse(in.Idle)
	if err != nil {
		return Report{}, fmt.Errorf("idle scrape: %w", err)
	}
	if len(in.Busy) == 0 {
		return Report{}, fmt.Errorf("no scrape during the load")
	}
	busy := make([][]series, len(in.Busy))
	for i, b := range in.Busy {
		if busy[i], err = parse(b); err != nil {
			return Report{}, fmt.Errorf("busy scrape %d: %w", i+1, err)
		}
		c.report.Series += len(busy[i])
	}
	c.report.GPUs = 1
	if in.Load.Kernels == 0 || in.Load.AllocatedBytes == 0 {
		c.add(true, "load", "", "the load ran no kernel or held no memory: %+v", in.Load)
	}
	c.checkSMActive(in, busy)
	c.checkFBGrowth(in, idle, busy)
	c.checkPCIe(in, busy)
	c.checkProcess(in, busy)
	return c.report, nil
}

// gpuValues are a field's values for one GPU (not a MIG instance) across
// scrapes.
func gpuValues(scrapes [][]series, name, gpu string) []float64 {
	var out []float64
	for _, all := range scrapes {
		for _, s := range all {
			if s.name == name && s.labels["gpu"] == gpu && s.labels["GPU_I_ID"] == "" && s.labels["pid"] == "" {
				out = append(out, s.value)
			}
		}
	}
	return out
}

func (c *checker) note(check, series, format string, args ...any) {
	c.report.Findings = append(c.report.Findings, Finding{Note: true, Check: check, Series: series, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) checkSMActive(in LoadInput, busy [][]series) {
	const f = "DCGM_FI_PROF_SM_ACTIVE"
	v := gpuValues(busy, f, in.GPU)
	if len(v) == 0 {
		c.add(in.ExpectGPM, "load", f, "not exported for GPU %s during the load", in.GPU)
		return
	}
	m := median(v)
	c.note("load", f, "median %.3f over %d scrapes", m, len(v))
	if m <= minSMActive {
		c.add(true, "load", f, "median %.3f during the load, not above %.1f", m, minSMActive)
	}
}

func (c *checker) checkFBGrowth(in LoadInput, idle []series, busy [][]series) {
	const f = "DCGM_FI_DEV_FB_USED"
	before := gpuValues([][]series{idle}, f, in.GPU)
	during := gpuValues(busy, f, in.GPU)
	if len(before) == 0 || len(during) == 0 {
		c.add(true, "load", f, "not exported for GPU %s before and during the load", in.GPU)
		return
	}
	grew := maxOf(during) - before[0]
	want := float64(in.Load.AllocatedBytes) / (1 << 20)
	c.note("load", f, "grew %.0f MiB for a %.0f MiB allocation", grew, want)
	if grew < 0.9*want || grew > want+fbOverheadMiB {
		c.add(true, "load", f, "grew %.0f MiB (MiB is dcgm-exporter's unit) for a %.0f MiB allocation: outside [%.0f, %.0f]", grew, want, 0.9*want, want+fbOverheadMiB)
	}
}

func (c *checker) checkPCIe(in LoadInput, busy [][]series) {
	rate, field := 0.0, ""
	if v := gpuValues(busy, "DCGM_FI_PROF_PCIE_RX_BYTES", in.GPU); len(v) > 0 {
		rate, field = median(v), "DCGM_FI_PROF_PCIE_RX_BYTES"
	} else if v := gpuValues(busy, "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", in.GPU); len(v) > 0 {
		rate, field = median(v)*1024, "DCGM_FI_DEV_PCIE_RX_THROUGHPUT" // KB/s
	}
	if field == "" {
		c.add(in.ExpectGPM, "load", "DCGM_FI_PROF_PCIE_RX_BYTES", "no PCIe receive series for GPU %s during the load", in.GPU)
		return
	}
	want := in.Load.H2DBytesPerSecond
	c.note("load", field, "median %.3g B/s; the load copied %.3g B/s host to device", rate, want)
	if want > 0 && (rate < pcieLow*want || rate > pcieHigh*want) {
		c.add(true, "load", field, "median %.3g B/s is not plausible for the load's %.3g B/s of copies (outside %.1f..%.1fx)", rate, want, pcieLow, pcieHigh)
	}
}

func (c *checker) checkProcess(in LoadInput, busy [][]series) {
	pid := strconv.Itoa(in.Load.PID)
	var named, held bool
	var mem float64
	for _, all := range busy {
		for _, s := range all {
			if s.labels["pid"] != pid || s.labels["gpu"] != in.GPU {
				continue
			}
			switch s.name {
			case "gpuscope_process_info":
				named = named || filepath.Base(s.labels["process_name"]) == in.Load.ProcessName
			case "gpuscope_process_memory_used_bytes":
				held, mem = true, max(mem, s.value)
			}
		}
	}
	series := fmt.Sprintf("gpuscope_process_info{gpu=%q,pid=%q}", in.GPU, pid)
	if named && held {
		c.note("load", series, "listed as %s, holding %.0f MiB", in.Load.ProcessName, mem/(1<<20))
	}
	if !named {
		c.add(true, "load", series, "the load's process is not listed with process_name %q", in.Load.ProcessName)
	}
	if !held {
		c.add(true, "load", series, "no gpuscope_process_memory_used_bytes for the load's process")
	} else if mem < 0.9*float64(in.Load.AllocatedBytes) {
		c.add(true, "load", series, "holds %.0f MiB by gpuscope_process_memory_used_bytes, less than the %.0f MiB the load allocated", mem/(1<<20), float64(in.Load.AllocatedBytes)/(1<<20))
	}
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}

package capturecheck

import (
	"sort"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuscope/gpuscope/counters/fieldid"
	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake/smifake"
)

// want is what a capture says one field must be, in dcgm-exporter's unit.
type want struct {
	// shown is false where nvidia-smi prints nothing for the field.
	shown bool
	// supported is false where it prints N/A, [Not Supported] or the like:
	// the series must be absent, never 0.
	supported bool
	num       float64
	text      string
	isText    bool
	// raw is the capture's text, for the report.
	raw string
}

func notShown() want { return want{raw: "(not shown)"} }

// number is a capture value scaled to DCGM's unit.
func number(v smicapture.Value, scale float64) want {
	if v.Raw == "(absent)" {
		return notShown()
	}
	f, ok := v.Number()
	return want{shown: true, supported: ok, num: f * scale, raw: v.Raw}
}

func text(v smicapture.Value) want {
	if v.Raw == "(absent)" {
		return notShown()
	}
	return want{shown: true, supported: v.Supported, text: v.Text(), isText: true, raw: v.Raw}
}

// enum maps a capture's word to DCGM's number; a word outside the map is
// unsupported.
func enum(v smicapture.Value, m map[string]float64) want {
	if v.Raw == "(absent)" {
		return notShown()
	}
	f, ok := m[v.Text()]
	return want{shown: true, supported: ok && v.Supported, num: f, raw: v.Raw}
}

var (
	onOff = map[string]float64{"Enabled": 1, "Disabled": 0, "Yes": 1, "No": 0}
	// DCGM's compute mode numbering drops NVML's removed exclusive-thread
	// mode (DCGM, dcgmlib/src/DcgmCacheManager.cpp, DCGM_FI_DEV_GPU_COMPUTE_MODE:
	// PROHIBITED is 1, EXCLUSIVE_PROCESS 2).
	dcgmComputeModes = map[string]float64{"Default": 0, "Prohibited": 1, "Exclusive_Process": 2}
	// DCGM_FI_DEV_FABRIC_MANAGER_STATUS takes NVML's fabric states
	// (nvml.h, NVML_GPU_FABRIC_STATE_*).
	fabricStates = map[string]float64{"Not Started": 1, "In Progress": 2, "Completed": 3}
)

// ctx is one GPU of one snapshot.
type ctx struct {
	c *smicapture.Capture
	s *smicapture.Snapshot
	i int
	g *smicapture.GPU
}

func (x ctx) f(name string) smicapture.Value { return x.g.Field(name) }
func (x ctx) q(path ...string) smicapture.Value {
	return x.g.Q.Get(path...)
}

// expectations are the GPU fields a capture shows, by DCGM field, in the
// units of dcgm-exporter's counters files (etc/default-counters.csv help
// texts: MHz, C, W, MiB, KB/s, ns for the violation counters).
var expectations = map[uint16]func(x ctx) want{
	fieldid.DriverVersion: func(x ctx) want { return text(smicapture.NewValue(x.s.DriverVersion)) },
	fieldid.Name:          func(x ctx) want { return text(x.f("name")) },
	fieldid.UUID:          func(x ctx) want { return text(x.f("uuid")) },
	fieldid.PCIBusID:      func(x ctx) want { return text(x.f("pci.bus_id")) },
	fieldid.Brand:         func(x ctx) want { return text(x.q("Product Brand")) },
	fieldid.Serial:        func(x ctx) want { return text(x.f("serial")) },
	fieldid.VBIOSVersion:  func(x ctx) want { return text(x.f("vbios_version")) },

	fieldid.SMClock:       func(x ctx) want { return number(x.f("clocks.current.sm"), 1) },
	fieldid.MemClock:      func(x ctx) want { return number(x.f("clocks.current.memory"), 1) },
	fieldid.VideoClock:    func(x ctx) want { return number(x.f("clocks.current.video"), 1) },
	fieldid.MaxSMClock:    func(x ctx) want { return number(x.f("clocks.max.sm"), 1) },
	fieldid.MaxMemClock:   func(x ctx) want { return number(x.f("clocks.max.memory"), 1) },
	fieldid.MaxVideoClock: func(x ctx) want { return number(x.q("Max Clocks", "Video"), 1) },
	fieldid.AppSMClock:    func(x ctx) want { return number(x.f("clocks.applications.graphics"), 1) },

	fieldid.ClocksEventReasons: func(x ctx) want { return number(x.f("clocks_event_reasons.active"), 1) },

	fieldid.GPUTemp:      func(x ctx) want { return number(x.f("temperature.gpu"), 1) },
	fieldid.MemoryTemp:   func(x ctx) want { return number(x.f("temperature.memory"), 1) },
	fieldid.SlowdownTemp: func(x ctx) want { return number(x.q("Temperature", "GPU Slowdown Temp"), 1) },
	fieldid.ShutdownTemp: func(x ctx) want { return number(x.q("Temperature", "GPU Shutdown Temp"), 1) },

	fieldid.PowerUsage:         func(x ctx) want { return number(x.f("power.draw"), 1) },
	fieldid.PowerUsageInstant:  func(x ctx) want { return number(x.f("power.draw.instant"), 1) },
	fieldid.PowerMgmtLimit:     func(x ctx) want { return number(x.f("power.limit"), 1) },
	fieldid.EnforcedPowerLimit: func(x ctx) want { return number(x.f("enforced.power.limit"), 1) },
	fieldid.PowerMgmtLimitDef:  func(x ctx) want { return number(x.f("power.default_limit"), 1) },
	fieldid.PowerMgmtLimitMin:  func(x ctx) want { return number(x.f("power.min_limit"), 1) },
	fieldid.PowerMgmtLimitMax:  func(x ctx) want { return number(x.f("power.max_limit"), 1) },

	fieldid.PCIeTXThroughput:  func(x ctx) want { return number(x.q("PCI", "Tx Throughput"), 1) },
	fieldid.PCIeRXThroughput:  func(x ctx) want { return number(x.q("PCI", "Rx Throughput"), 1) },
	fieldid.PCIeReplayCounter: func(x ctx) want { return number(x.q("PCI", "Replays Since Reset"), 1) },
	fieldid.PCIeLinkGen:       func(x ctx) want { return number(x.f("pcie.link.gen.current"), 1) },
	fieldid.PCIeMaxLinkGen:    func(x ctx) want { return number(x.f("pcie.link.gen.max"), 1) },
	fieldid.PCIeLinkWidth:     func(x ctx) want { return number(x.f("pcie.link.width.current"), 1) },
	fieldid.PCIeMaxLinkWidth:  func(x ctx) want { return number(x.f("pcie.link.width.max"), 1) },

	fieldid.GPUUtil:     func(x ctx) want { return number(x.f("utilization.gpu"), 1) },
	fieldid.MemCopyUtil: func(x ctx) want { return number(x.f("utilization.memory"), 1) },
	fieldid.EncUtil:     func(x ctx) want { return number(x.f("utilization.encoder"), 1) },
	fieldid.DecUtil:     func(x ctx) want { return number(x.f("utilization.decoder"), 1) },

	fieldid.Pstate: func(x ctx) want {
		v := x.f("pstate")
		return number(smicapture.Value{Raw: strings.TrimPrefix(v.Raw, "P"), Supported: v.Supported}, 1)
	},
	fieldid.FanSpeed:        func(x ctx) want { return number(x.f("fan.speed"), 1) },
	fieldid.ComputeMode:     func(x ctx) want { return enum(x.f("compute_mode"), dcgmComputeModes) },
	fieldid.PersistenceMode: func(x ctx) want { return enum(x.f("persistence_mode"), onOff) },
	fieldid.MIGMode:         func(x ctx) want { return enum(x.f("mig.mode.current"), onOff) },
	fieldid.GetGPURecoveryAction: func(x ctx) want {
		m := map[string]float64{}
		for k, v := range smifake.RecoveryActions {
			m[k] = float64(v)
		}
		return enum(x.f("gpu_recovery_action"), m)
	},
	fieldid.FabricManagerStatus: func(x ctx) want {
		w := enum(x.q("Fabric", "State"), fabricStates)
		if st := x.q("Fabric", "Status"); w.supported && w.num == 3 && st.Supported && st.Text() != "Success" {
			w.num = 4 // DCGM's DcgmFMStatusFailure
		}
		return w
	},
	fieldid.CUDADriverVersion: func(x ctx) want {
		major, minor, ok := strings.Cut(x.s.CUDAVersion, ".")
		ma, err1 := strconv.Atoi(major)
		mi, err2 := strconv.Atoi(minor)
		w := want{shown: true, isText: true, raw: x.s.CUDAVersion}
		if ok && err1 == nil && err2 == nil {
			w.supported, w.text = true, strconv.Itoa(ma*1000+mi*10)
		}
		return w
	},
	fieldid.CUDAComputeCapability: func(x ctx) want {
		v := x.f("compute_cap")
		major, minor, ok := strings.Cut(v.Text(), ".")
		ma, err1 := strconv.Atoi(major)
		mi, err2 := strconv.Atoi(minor)
		w := want{shown: true, isText: true, raw: v.Raw}
		if ok && err1 == nil && err2 == nil {
			w.supported, w.text = true, strconv.Itoa(ma<<16|mi)
		}
		return w
	},

	fieldid.PowerViolation:     violation(gonvml.PERF_POLICY_POWER),
	fieldid.ThermalViolation:   violation(gonvml.PERF_POLICY_THERMAL),
	fieldid.SyncBoostViolation: violation(gonvml.PERF_POLICY_SYNC_BOOST),

	fieldid.FBTotal:    func(x ctx) want { return number(x.f("memory.total"), 1) },
	fieldid.FBFree:     func(x ctx) want { return number(x.f("memory.free"), 1) },
	fieldid.FBUsed:     func(x ctx) want { return number(x.f("memory.used"), 1) },
	fieldid.FBReserved: func(x ctx) want { return number(x.f("memory.reserved"), 1) },

	fieldid.ECCSBEVolTotal: eccWant(gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.VOLATILE_ECC),
	fieldid.ECCDBEVolTotal: eccWant(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC),
	fieldid.ECCSBEAggTotal: eccWant(gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.AGGREGATE_ECC),
	fieldid.ECCDBEAggTotal: eccWant(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.AGGREGATE_ECC),

	fieldid.RetiredSBE:     func(x ctx) want { return number(x.f("retired_pages.single_bit_ecc.count"), 1) },
	fieldid.RetiredDBE:     func(x ctx) want { return number(x.f("retired_pages.double_bit.count"), 1) },
	fieldid.RetiredPending: func(x ctx) want { return enum(x.f("retired_pages.pending"), onOff) },

	fieldid.CorrectableRemappedRows:   func(x ctx) want { return number(x.f("remapped_rows.correctable"), 1) },
	fieldid.UncorrectableRemappedRows: func(x ctx) want { return number(x.f("remapped_rows.uncorrectable"), 1) },
	fieldid.RowRemapPending:           func(x ctx) want { return enum(x.f("remapped_rows.pending"), onOff) },
	fieldid.RowRemapFailure:           func(x ctx) want { return enum(x.f("remapped_rows.failure"), onOff) },

	// nvidia-smi prints link speeds, not traffic: a GPU without NVLink
	// (or in MIG mode) must have no bandwidth series; one with links has
	// nothing to compare against.
	fieldid.NVLinkBandwidthTotal: func(x ctx) want {
		n, ret := smifake.NVLinkCount(x.c, x.i, x.g)
		if ret == gonvml.SUCCESS && n > 0 {
			return notShown()
		}
		return want{shown: true, raw: "(no NVLink: " + strconv.Itoa(n) + " links)"}
	},
	// Outside a vGPU guest DCGM reports the license status 0.
	fieldid.VGPULicenseStatus: func(x ctx) want {
		v := x.q("GPU Virtualization Mode", "Virtualization Mode")
		if !v.Supported || v.Text() == "VGPU" {
			return notShown()
		}
		return want{shown: true, supported: true, num: 0, raw: "Virtualization Mode: " + v.Text()}
	},
}

func violation(p gonvml.PerfPolicyType) func(x ctx) want {
	return func(x ctx) want {
		ns, ok := smifake.ViolationNs(x.g, p)
		raw := x.f("clocks_event_reasons_counters.sw_power_cap").Raw
		if p != gonvml.PERF_POLICY_POWER {
			raw = "(clock event counters)"
		}
		return want{shown: true, supported: ok, num: float64(ns), raw: raw}
	}
}

func eccWant(t gonvml.MemoryErrorType, c gonvml.EccCounterType) func(x ctx) want {
	return func(x ctx) want {
		if on := x.f("ecc.mode.current"); on.Text() != "Enabled" {
			return want{shown: true, raw: "ECC " + on.Raw}
		}
		return number(x.f(smifake.EccField(t, c)), 1)
	}
}

// Unsupported lists the fields the capture shows as unsupported on GPU i
// of a snapshot (N/A, [Not Supported], no NVLink): the fields a GPU of that
// model exports no series for.
func Unsupported(c *smicapture.Capture, s *smicapture.Snapshot, i int) []uint16 {
	x := ctx{c: c, s: s, i: i, g: s.GPUs[i]}
	var out []uint16
	for id, exp := range expectations {
		if w := exp(x); w.shown && !w.supported {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

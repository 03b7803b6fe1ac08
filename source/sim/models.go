package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/counters/fieldid"
)

// model is the identity and the physical envelope of one simulated GPU type.
type model struct {
	key  string
	name string // as NVML reports it
	// Framebuffer, MiB, as NVML reports it.
	fbTotal, fbReserved int64
	idleW, limitW       float64
	// minLimitW and maxLimitW bound the power limit an operator may set;
	// zero takes 2/7 of the limit and the limit, as on an H100 SXM.
	minLimitW, maxLimitW float64
	maxSMClock           float64 // MHz
	idleSMClock          float64
	memClock             float64
	// idleVideo and busyVideo are the video clock idle and busy, MHz;
	// zero follows the SM clock (0.386 and 0.886 of its maximum).
	idleVideo, busyVideo float64
	// pcieGen and pcieWidth are the PCIe link the GPU trains at in a slot
	// of its own generation (nvidia-smi's pcie.link.gen.max, .width.max).
	pcieGen, pcieWidth int
	// pcieIdleGen, when set, is the generation the link drops to while
	// the GPU is idle: GeForce cards save power so (the RTX 2080 SUPER and
	// 4080 SUPER captures read generation 1 at rest and their maximum
	// under load); data-center cards stay at their maximum.
	pcieIdleGen int
	links       int     // NVLinks per GPU
	linkBytes   float64 // bytes/s per direction per link
	pcieBytes   float64 // usable bytes/s per direction
	tempRise    float64 // C above ambient at the power limit
	// tempBase is how far (C) the die sits above ambient at no power: the
	// fan curve of a card that keeps its fan slow until it is warm.
	tempBase float64
	vbios    string
	// computeCap is the CUDA compute capability as DCGM reports it,
	// major<<16|minor written out ("589824" is 9.0); fabric says whether the GPU joins an NVLink fabric that
	// the fabric manager sets up (Hopper's NVSwitch systems).
	computeCap string
	fabric     bool
	// fan says the card has a fan of its own (an actively cooled PCIe
	// card); the others are cooled by the server's airflow.
	fan bool
	// notReported are the fields a real GPU of the model answers N/A or
	// [Not Supported] for (its capture says so): the sim leaves them out.
	notReported []uint16
	// migProfiles is empty when the model has no MIG; the first profile is
	// the smallest one, which "all" uses.
	migProfiles []migProfile
}

type migProfile struct {
	name      string
	compute   int // compute slices out of 7
	memSlices int // memory slices out of 8
	// memMiB is the instance's framebuffer as nvidia-smi shows it, where
	// a capture shows one; zero takes memSlices eighths of the usable
	// framebuffer.
	memMiB int64
}

// migSlices is the number of compute slices of a full GPU.
const (
	migComputeSlices = 7
	migMemSlices     = 8
)

// hopper80Profiles are the H100's; the instance memory of 1g.10gb,
// 2g.20gb and 3g.40gb is what nvidia-smi -q shows on a real H100 in MIG
// mode (../shared/compat/nvidia-smi-captures, h100-mig).
var hopper80Profiles = []migProfile{
	{"1g.10gb", 1, 1, 9984}, {"1g.20gb", 1, 2, 0}, {"2g.20gb", 2, 2, 20096}, {"3g.40gb", 3, 4, 40448}, {"4g.40gb", 4, 4, 0}, {"7g.80gb", 7, 8, 0},
}

// ampere80Profiles are the A100's, without measured instance memory.
var ampere80Profiles = []migProfile{
	{"1g.10gb", 1, 1, 0}, {"1g.20gb", 1, 2, 0}, {"2g.20gb", 2, 2, 0}, {"3g.40gb", 3, 4, 0}, {"4g.40gb", 4, 4, 0}, {"7g.80gb", 7, 8, 0},
}

var models = map[string]*model{
	"h100": {
		key: "h100", name: "NVIDIA H100 80GB HBM3", fbTotal: 81559, fbReserved: 479,
		idleW: 70, limitW: 700, maxSMClock: 1980, idleSMClock: 345, memClock: 2619,
		idleVideo: 765, busyVideo: 1545, pcieGen: 5, pcieWidth: 16,
		links: 18, linkBytes: 25e9, pcieBytes: 50e9, tempBase: 11, tempRise: 22, vbios: "96.00.A5.00.01",
		computeCap: "589824", fabric: true,
		migProfiles: hopper80Profiles,
	},
	"h200": {
		key: "h200", name: "NVIDIA H200", fbTotal: 143771, fbReserved: 614,
		idleW: 78, limitW: 700, maxSMClock: 1980, idleSMClock: 345, memClock: 3201,
		idleVideo: 765, busyVideo: 1545, pcieGen: 5, pcieWidth: 16,
		links: 18, linkBytes: 25e9, pcieBytes: 50e9, tempRise: 27, vbios: "96.00.A5.00.03",
		computeCap: "589824", fabric: true,
		migProfiles: []migProfile{
			{"1g.18gb", 1, 1, 0}, {"1g.35gb", 1, 2, 0}, {"2g.35gb", 2, 2, 0}, {"3g.71gb", 3, 4, 0}, {"4g.71gb", 4, 4, 0}, {"7g.141gb", 7, 8, 0},
		},
	},
	"a100": {
		key: "a100", name: "NVIDIA A100-SXM4-80GB", fbTotal: 81920, fbReserved: 571,
		idleW: 58, limitW: 400, maxSMClock: 1410, idleSMClock: 210, memClock: 1593,
		links: 12, linkBytes: 25e9, pcieBytes: 25e9, tempRise: 38, vbios: "92.00.45.00.06",
		computeCap: "524288", pcieGen: 4, pcieWidth: 16,
		migProfiles: ampere80Profiles,
	},
	// A workstation card with a blower fan, for the fan scenarios.
	"rtx6000ada": {
		key: "rtx6000ada", name: "NVIDIA RTX 6000 Ada Generation", fbTotal: 49140, fbReserved: 495,
		idleW: 24, limitW: 300, maxSMClock: 2505, idleSMClock: 210, memClock: 10001,
		links: 0, pcieBytes: 25e9, tempRise: 38, vbios: "95.02.5C.00.02",
		computeCap: "524297", fan: true, pcieGen: 4, pcieWidth: 16,
	},
	// The models below are calibrated against real nvidia-smi captures
	// (../shared/compat/nvidia-smi-captures; capture_test.go holds the
	// sim to them). The L40S of the capture ran at its maximum clocks in
	// P0 throughout, drawing 110 W and more without load, so its idle
	// power is that.
	"l40s": {
		key: "l40s", name: "NVIDIA L40S", fbTotal: 46068, fbReserved: 609,
		idleW: 110, limitW: 350, minLimitW: 100, maxSMClock: 2520, idleSMClock: 2520, memClock: 9001,
		idleVideo: 1965, busyVideo: 1965, pcieGen: 4, pcieWidth: 16,
		links: 0, pcieBytes: 25e9, tempBase: 20, tempRise: 30, vbios: "95.02.66.00.02",
		computeCap: "524297", notReported: noHBMNoMIG,
	},
	// Consumer cards with fans of their own.
	"rtx4080super": {
		key: "rtx4080super", name: "NVIDIA GeForce RTX 4080 SUPER", fbTotal: 16376, fbReserved: 434,
		idleW: 26, limitW: 320, minLimitW: 150, maxLimitW: 400, maxSMClock: 3165, idleSMClock: 210, memClock: 11501,
		idleVideo: 1185, busyVideo: 2145, pcieGen: 4, pcieWidth: 16, pcieIdleGen: 1,
		links: 0, pcieBytes: 25e9, tempBase: 14, tempRise: 20, vbios: "95.03.44.00.B2",
		computeCap: "524297", fan: true, notReported: consumer,
	},
	"rtx2080super": {
		key: "rtx2080super", name: "NVIDIA GeForce RTX 2080 SUPER", fbTotal: 8192, fbReserved: 408,
		idleW: 39, limitW: 250, minLimitW: 105, maxLimitW: 350, maxSMClock: 2145, idleSMClock: 765, memClock: 7751,
		idleVideo: 705, busyVideo: 1905, pcieGen: 3, pcieWidth: 16, pcieIdleGen: 1,
		links: 0, pcieBytes: 12e9, tempBase: 10, tempRise: 20, vbios: "90.04.7A.40.73",
		computeCap: "458757", fan: true, notReported: consumer,
	},
	"l4": {
		key: "l4", name: "NVIDIA L4", fbTotal: 23034, fbReserved: 431,
		idleW: 16, limitW: 72, maxSMClock: 2040, idleSMClock: 210, memClock: 6251,
		links: 0, pcieBytes: 25e9, tempRise: 45, vbios: "95.04.29.00.01",
		computeCap: "524297", pcieGen: 4, pcieWidth: 16,
	},
}

// What GPUs without HBM, ECC or MIG report nothing for: memory
// temperature (GDDR has no sensor NVML reads), the ECC and row-remapping
// counters, the MIG mode; and the retired pages that Ampere and later
// replaced by row remapping.
var (
	noRetiredPages = []uint16{fieldid.RetiredSBE, fieldid.RetiredDBE, fieldid.RetiredPending}
	noHBMNoMIG     = append([]uint16{fieldid.MemoryTemp, fieldid.MIGMode}, noRetiredPages...)
	consumer       = append([]uint16{fieldid.ECCSBEVolTotal, fieldid.ECCDBEVolTotal, fieldid.ECCSBEAggTotal, fieldid.ECCDBEAggTotal,
		fieldid.CorrectableRemappedRows, fieldid.UncorrectableRemappedRows, fieldid.RowRemapPending, fieldid.RowRemapFailure},
		noHBMNoMIG...)
)

// Models lists the model names Config.Model accepts, sorted.
func Models() []string {
	names := make([]string, 0, len(models))
	for k := range models {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// parseMIG turns a MIG layout into the profiles of one GPU's instances.
//
// Syntax: "" (MIG off); "all" (seven instances of the model's smallest
// profile); or a comma-separated list of items "[N x]PROFILE", for example
// "7x1g.10gb" or "3g.40gb,2x2g.20gb". Every GPU gets the same layout. The
// layout must fit the GPU: at most 7 compute slices and 8 memory slices.
func parseMIG(m *model, layout string) ([]migProfile, error) {
	layout = strings.TrimSpace(layout)
	if layout == "" {
		return nil, nil
	}
	if len(m.migProfiles) == 0 {
		return nil, fmt.Errorf("MIG %q: model %s (%s) does not support MIG", layout, m.key, m.name)
	}
	if strings.EqualFold(layout, "all") {
		out := make([]migProfile, migComputeSlices)
		for i := range out {
			out[i] = m.migProfiles[0]
		}
		return out, nil
	}
	var out []migProfile
	compute, mem := 0, 0
	for _, item := range strings.Split(layout, ",") {
		item = strings.TrimSpace(item)
		count := 1
		prof := item
		if i := strings.IndexByte(item, 'x'); i > 0 {
			n, err := strconv.Atoi(strings.TrimSpace(item[:i]))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("MIG %q: item %q: count must be a positive integer", layout, item)
			}
			count, prof = n, strings.TrimSpace(item[i+1:])
		}
		p, ok := findProfile(m, prof)
		if !ok {
			return nil, fmt.Errorf("MIG %q: unknown profile %q for %s (known: %s)", layout, prof, m.key, profileNames(m))
		}
		for j := 0; j < count; j++ {
			out = append(out, p)
			compute += p.compute
			mem += p.memSlices
		}
	}
	if compute > migComputeSlices || mem > migMemSlices {
		return nil, fmt.Errorf("MIG %q: layout needs %d compute and %d memory slices; a %s GPU has at most %d and %d",
			layout, compute, mem, m.key, migComputeSlices, migMemSlices)
	}
	return out, nil
}

func findProfile(m *model, name string) (migProfile, bool) {
	for _, p := range m.migProfiles {
		if p.name == name {
			return p, true
		}
	}
	return migProfile{}, false
}

func profileNames(m *model) string {
	names := make([]string, len(m.migProfiles))
	for i, p := range m.migProfiles {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

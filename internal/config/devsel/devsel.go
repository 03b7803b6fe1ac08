// Package devsel selects which GPUs, MIG instances, NvSwitches, links, CPUs
// and CPU cores are exported, from dcgm-exporter's device options (-d/--devices,
// -s/--switch-devices, -p/--cpu-devices).
//
// The syntax and the meaning follow dcgm-exporter's pkg/cmd/app.go
// (parseDeviceOptions), internal/pkg/deviceinfo/device_info.go and
// internal/pkg/devicemonitoring/device_monitoring.go at commit d5e5f51:
//
//	f              flexible: every GPU without MIG, every GPU instance of a MIG GPU (the default)
//	g              every top-level entity (GPU, NvSwitch, CPU)
//	g:0,2-3        the top-level entities with these IDs
//	i              every sub-level entity (MIG GPU instance, NvSwitch link, CPU core)
//	i:1,4-5        the sub-level entities with these IDs
//	g:0+i:1-2      both: a g and an i part joined by '+', in either order
//	               (dcgm-exporter's combined selectors, parseDeviceOptions
//	               after 4.8.2; f cannot be combined)
package devsel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuscope/gpuscope/source"
)

// Accepted says the forms an option takes, for error messages.
const Accepted = "f, g, g:<id>[,<id>|<from>-<to>...], i, i:<id>[,<id>|<from>-<to>...], or a g and an i part joined by + (g:0+i:1)"

// Options is one parsed device option. Major and Minor hold the IDs to
// keep; a nil list selects none of that level, and All* selects every one.
type Options struct {
	Flex     bool
	AllMajor bool
	Major    []int
	AllMinor bool
	Minor    []int
}

// String gives the option back in dcgm-exporter's syntax.
func (o Options) String() string {
	if o.Flex {
		return "f"
	}
	var parts []string
	switch {
	case o.AllMajor:
		parts = append(parts, "g")
	case o.Major != nil:
		parts = append(parts, "g:"+joinInts(o.Major))
	}
	switch {
	case o.AllMinor:
		parts = append(parts, "i")
	case o.Minor != nil:
		parts = append(parts, "i:"+joinInts(o.Minor))
	}
	return strings.Join(parts, "+")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// Parse reads one device option. Its errors start with the value, so that
// a caller can put the option's name before it.
func Parse(s string) (Options, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "+") {
		return parseOne(s, s)
	}
	var o Options
	var seen []string
	for _, part := range strings.Split(s, "+") {
		p, err := parseOne(s, strings.TrimSpace(part))
		if err != nil {
			return Options{}, err
		}
		letter, _, _ := strings.Cut(strings.TrimSpace(part), ":")
		switch {
		case p.Flex:
			return Options{}, fmt.Errorf("%q: the flexible option f cannot be combined with g or i; use %s", s, Accepted)
		case slices.Contains(seen, letter):
			return Options{}, fmt.Errorf("%q: %s is given twice; use %s", s, letter, Accepted)
		}
		seen = append(seen, letter)
		if letter == "g" {
			o.AllMajor, o.Major = p.AllMajor, p.Major
		} else {
			o.AllMinor, o.Minor = p.AllMinor, p.Minor
		}
	}
	return o, nil
}

// parseOne reads one f, g or i part of whole.
func parseOne(whole, s string) (Options, error) {
	var o Options
	bad := func(why string) (Options, error) {
		return Options{}, fmt.Errorf("%q: %s; use %s", whole, why, Accepted)
	}
	letter, ids, ranged := strings.Cut(s, ":")
	if strings.Contains(ids, ":") {
		// dcgm-exporter: "there can only be one specified range".
		return bad("only one ':<range>' may follow the letter")
	}
	switch letter {
	case "f":
		if ranged {
			return bad("no range can follow the flexible option f")
		}
		o.Flex = true
		return o, nil
	case "g", "i":
	default:
		return bad(fmt.Sprintf("%q is not f, g or i", letter))
	}
	var list []int
	all := !ranged
	if ranged {
		list = []int{}
		for _, tok := range strings.Split(ids, ",") {
			from, to, isRange := strings.Cut(tok, "-")
			a, err := strconv.Atoi(strings.TrimSpace(from))
			if err != nil || a < 0 {
				return bad(fmt.Sprintf("%q is not an ID nor a range <from>-<to>", tok))
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(strings.TrimSpace(to)); err != nil || b < a {
					return bad(fmt.Sprintf("%q is not a range <from>-<to> with from <= to", tok))
				}
			}
			if b-a > 4096 {
				return bad(fmt.Sprintf("range %q spans more than 4096 IDs", tok))
			}
			for i := a; i <= b; i++ {
				if !slices.Contains(list, i) {
					list = append(list, i)
				}
			}
		}
	}
	if letter == "g" {
		o.AllMajor, o.Major = all, list
	} else {
		o.AllMinor, o.Minor = all, list
	}
	return o, nil
}

func (o Options) major(id int) bool { return o.Flex || o.AllMajor || slices.Contains(o.Major, id) }
func (o Options) minor(id int) bool { return o.Flex || o.AllMinor || slices.Contains(o.Minor, id) }

// Selector keeps the entities the device options ask for.
type Selector struct {
	GPUs     Options // -d/--devices
	Switches Options // -s/--switch-devices
	CPUs     Options // -p/--cpu-devices
}

// Default is dcgm-exporter's default: f for every kind.
func Default() Selector {
	return Selector{GPUs: Options{Flex: true}, Switches: Options{Flex: true}, CPUs: Options{Flex: true}}
}

// Filter returns the entities of list that the options select, in their
// order. With f everywhere it returns list itself: which entities a MIG GPU
// shows by default is the sources' and the engine's business.
//
// GPU options (devicemonitoring.handleGPUOptions): g selects GPU entities by
// GPU index, i selects MIG GPU instances by their node-wide instance number.
// dcgm-exporter matches i IDs against DCGM's GPU-instance entity IDs; this
// numbers the GPU instances of the node from 0 in (GPU index, instance ID)
// order, which is how DCGM numbers them on a node partitioned from scratch.
// Compute instances are never selected by g or i (dcgm-exporter monitors
// FE_GPU_I entities only). A GPU's own NVLinks follow its GPU (deviceinfo
// fills NvLinks only for GPUs that f or g selects).
//
// Switch options (deviceinfo.IsSwitchWatched, IsLinkWatched): g selects
// NvSwitches by ID, i selects links of watched switches by link index. As in
// dcgm-exporter, g selects no link (its minor range is empty) and i alone
// watches no switch, so it selects no link either: only f exports links.
//
// CPU options (deviceinfo.IsCPUWatched, IsCoreWatched) work the same way:
// g selects CPUs by ID, i selects cores of watched CPUs by core ID, so g
// alone selects no core and i alone selects nothing.
func (s Selector) Filter(list []*source.Entity) []*source.Entity {
	if s.GPUs.Flex && s.Switches.Flex && s.CPUs.Flex {
		return list
	}
	instanceNumber := map[*source.Entity]int{}
	var gis []*source.Entity
	for _, e := range list {
		if e.Kind == source.GPUInstance {
			gis = append(gis, e)
		}
	}
	slices.SortStableFunc(gis, func(a, b *source.Entity) int {
		if a.GPU != b.GPU {
			return a.GPU - b.GPU
		}
		return a.GPUInstanceID - b.GPUInstanceID
	})
	for i, e := range gis {
		instanceNumber[e] = i
	}
	// A kept GPU instance keeps its GPU too: the engine exports a GPU whose
	// instances are exported only through them, and gives them its
	// GPU-level fields, as DCGM answers those on an instance. So -d i shows
	// the instances with power and temperature, as in dcgm-exporter, and no
	// series of the GPU itself.
	parents := map[int]bool{}
	for _, e := range gis {
		if s.keep(e, instanceNumber) {
			parents[e.GPU] = true
		}
	}
	out := make([]*source.Entity, 0, len(list))
	for _, e := range list {
		if s.keep(e, instanceNumber) || (e.Kind == source.GPU && parents[e.GPU]) {
			out = append(out, e)
		}
	}
	return out
}

func (s Selector) keep(e *source.Entity, instanceNumber map[*source.Entity]int) bool {
	g := s.GPUs
	switch e.Kind {
	case source.GPU:
		return g.Flex || g.AllMajor || slices.Contains(g.Major, e.GPU)
	case source.GPUInstance:
		return g.Flex || g.AllMinor || slices.Contains(g.Minor, instanceNumber[e])
	case source.ComputeInstance:
		return g.Flex
	case source.NvSwitch:
		return s.Switches.major(e.Switch)
	case source.NVLink:
		if e.Switch >= 0 {
			sw := s.Switches
			return sw.Flex || (sw.major(e.Switch) && sw.minor(e.Link))
		}
		return g.Flex || g.AllMajor || slices.Contains(g.Major, e.GPU)
	case source.CPU:
		return s.CPUs.major(e.CPU)
	case source.CPUCore:
		c := s.CPUs
		return c.Flex || (c.major(e.CPU) && c.minor(e.CPUCore))
	}
	return true
}

// Missing lists the IDs the options name that list lacks, so that a typo
// (or a GPU that fell off the bus) is reported. dcgm-exporter refuses to
// start then (deviceinfo.verifyDevicePresence); gpuscope warns and keeps
// serving what is there, since the GPU may come back.
func (s Selector) Missing(list []*source.Entity) []string {
	gpus, switches, links := map[int]bool{}, map[int]bool{}, map[int]bool{}
	cpus, cores := map[int]bool{}, map[int]bool{}
	gis := 0
	for _, e := range list {
		switch e.Kind {
		case source.GPU:
			gpus[e.GPU] = true
		case source.GPUInstance:
			gis++
		case source.NvSwitch:
			switches[e.Switch] = true
		case source.NVLink:
			if e.Switch >= 0 {
				links[e.Link] = true
			}
		case source.CPU:
			cpus[e.CPU] = true
		case source.CPUCore:
			cores[e.CPUCore] = true
		}
	}
	var out []string
	for _, id := range s.GPUs.Major {
		if !gpus[id] {
			out = append(out, fmt.Sprintf("GPU %d", id))
		}
	}
	for _, id := range s.GPUs.Minor {
		if id >= gis {
			out = append(out, fmt.Sprintf("GPU instance %d", id))
		}
	}
	for _, id := range s.Switches.Major {
		if !switches[id] {
			out = append(out, fmt.Sprintf("NvSwitch %d", id))
		}
	}
	for _, id := range s.Switches.Minor {
		if !links[id] {
			out = append(out, fmt.Sprintf("NvSwitch link %d", id))
		}
	}
	// deviceinfo.verifyCPUDevicePresence: CPU IDs, and core IDs on any CPU.
	for _, id := range s.CPUs.Major {
		if !cpus[id] {
			out = append(out, fmt.Sprintf("CPU %d", id))
		}
	}
	for _, id := range s.CPUs.Minor {
		if !cores[id] {
			out = append(out, fmt.Sprintf("CPU core %d", id))
		}
	}
	return out
}

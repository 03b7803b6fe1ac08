package devsel

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/source"
)

// The accepted forms and the errors follow dcgm-exporter's parseDeviceOptions
// (pkg/cmd/app.go): f takes no range, only g and i take one, one ':' at most,
// '<number>-<number>' ranges are inclusive, and g or i alone mean "all".
func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Options
		wantErr string
	}{
		{"f", Options{Flex: true}, ""},
		{"g", Options{AllMajor: true}, ""},
		{"i", Options{AllMinor: true}, ""},
		{"g:0,1", Options{Major: []int{0, 1}}, ""},
		{"g:0-2,5", Options{Major: []int{0, 1, 2, 5}}, ""},
		{"i:1,3-4", Options{Minor: []int{1, 3, 4}}, ""},
		{"g:1,1", Options{Major: []int{1}}, ""},
		{"f:0", Options{}, "no range can follow the flexible option f"},
		{"x:1", Options{}, `"x" is not f, g or i`},
		{"", Options{}, `"" is not f, g or i`},
		{"g:1:2", Options{}, "only one ':<range>'"},
		{"g:", Options{}, `"" is not an ID`},
		{"g:a", Options{}, `"a" is not an ID`},
		{"g:1-2-3", Options{}, `"1-2-3" is not a range`},
		{"g:3-1", Options{}, `"3-1" is not a range`},
		{"g:0-100000", Options{}, "spans more than 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), strconv.Quote(tt.in)+": "), "the error starts with the value: %s", err)
				assert.NotContains(t, err.Error(), "--", "a library names no flag")
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), Accepted)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := Parse(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, again, "String gives the option back")
		})
	}
}

// node is two GPUs (GPU 1 in MIG mode with two GPU instances and a compute
// instance), one NVLink on GPU 0, and NvSwitch 0 with links 0 and 1.
func node() []*source.Entity {
	g0 := source.NewGPU(0, "GPU-0", "0000:01:00.0", "H100")
	g1 := source.NewGPU(1, "GPU-1", "0000:02:00.0", "H100")
	gi := func(id int) *source.Entity {
		e := g1
		e.Kind, e.GPUInstanceID, e.GPUInstanceProfile = source.GPUInstance, id, "3g.40gb"
		return &e
	}
	ci := g1
	ci.Kind, ci.GPUInstanceID, ci.ComputeInstanceID = source.ComputeInstance, 2, 0
	link := g0
	link.Kind, link.Link = source.NVLink, 0
	sw := source.Entity{Kind: source.NvSwitch, GPU: -1, GPUInstanceID: -1, ComputeInstanceID: -1, Link: -1, Switch: 0}
	swl := func(l int) *source.Entity {
		e := sw
		e.Kind, e.Link = source.NVLink, l
		return &e
	}
	return []*source.Entity{&g0, &g1, gi(2), gi(1), &ci, &link, &sw, swl(0), swl(1)}
}

func keys(list []*source.Entity) []string {
	out := []string{}
	for _, e := range list {
		out = append(out, e.Key())
	}
	return out
}

// Expectations from dcgm-exporter's devicemonitoring/device_monitoring.go
// (handleGPUOptions, monitorAllNvSwitchNvLinks) and deviceinfo/device_info.go
// (IsSwitchWatched, IsLinkWatched, the NvLinks of gOpt-selected GPUs).
func TestFilter(t *testing.T) {
	tests := []struct {
		name     string
		gpus, sw string
		want     []string
	}{
		{"f everywhere keeps all", "f", "f", []string{"gpu/GPU-0", "gpu/GPU-1", "gi/GPU-1/2", "gi/GPU-1/1", "ci/GPU-1/2/0", "link/GPU-0/0", "switch/0", "swlink/0/0", "swlink/0/1"}},
		{"g: every GPU, no instance", "g", "f", []string{"gpu/GPU-0", "gpu/GPU-1", "link/GPU-0/0", "switch/0", "swlink/0/0", "swlink/0/1"}},
		{"g:1: GPU 1 only, without GPU 0's link", "g:1", "f", []string{"gpu/GPU-1", "switch/0", "swlink/0/0", "swlink/0/1"}},
		// The MIG GPU stays as the instances' parent (the engine exports it
		// through them only); GPU 0, without MIG, is left out.
		{"i: every GPU instance, no GPU of its own", "i", "f", []string{"gpu/GPU-1", "gi/GPU-1/2", "gi/GPU-1/1", "switch/0", "swlink/0/0", "swlink/0/1"}},
		{"i:1: the node's second GPU instance", "i:1", "f", []string{"gpu/GPU-1", "gi/GPU-1/2", "switch/0", "swlink/0/0", "swlink/0/1"}},
		// IsLinkWatched needs the link in MinorRange, which g leaves empty.
		{"s g: switches, no link", "f", "g", []string{"gpu/GPU-0", "gpu/GPU-1", "gi/GPU-1/2", "gi/GPU-1/1", "ci/GPU-1/2/0", "link/GPU-0/0", "switch/0"}},
		{"s g:1: no such switch", "f", "g:1", []string{"gpu/GPU-0", "gpu/GPU-1", "gi/GPU-1/2", "gi/GPU-1/1", "ci/GPU-1/2/0", "link/GPU-0/0"}},
		{"s i: no switch is watched, so no link", "g:0", "i", []string{"gpu/GPU-0", "link/GPU-0/0"}},
		{"s i:1 alone: no switch watched", "g:0", "i:1", []string{"gpu/GPU-0", "link/GPU-0/0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse(tt.gpus)
			require.NoError(t, err)
			s, err := Parse(tt.sw)
			require.NoError(t, err)
			sel := Selector{GPUs: g, Switches: s, CPUs: Options{Flex: true}}
			assert.Equal(t, tt.want, keys(sel.Filter(node())))
		})
	}
}

func TestMissing(t *testing.T) {
	g, _ := Parse("g:0,7")
	s, _ := Parse("g:3")
	sel := Selector{GPUs: g, Switches: s}
	assert.Equal(t, []string{"GPU 7", "NvSwitch 3"}, sel.Missing(node()))
	i, _ := Parse("i:1,2")
	sel = Selector{GPUs: i, Switches: Options{Flex: true}}
	assert.Equal(t, []string{"GPU instance 2"}, sel.Missing(node()))
	assert.Empty(t, Default().Missing(node()))
}

// cpuNode is two Grace CPUs with cores 0 and 1 each, beside a GPU.
func cpuNode() []*source.Entity {
	g0 := source.NewGPU(0, "GPU-0", "0000:01:00.0", "GH200")
	out := []*source.Entity{&g0}
	for cpu := 0; cpu < 2; cpu++ {
		c := source.NewCPU(cpu, -1)
		out = append(out, &c)
		for core := 0; core < 2; core++ {
			k := source.NewCPU(cpu, core)
			out = append(out, &k)
		}
	}
	return out
}

// Expectations from dcgm-exporter's deviceinfo/device_info.go (IsCPUWatched,
// IsCoreWatched, verifyCPUDevicePresence) and devicemonitoring/
// device_monitoring.go (monitorAllCPUs, monitorAllCPUCores): g picks CPUs,
// i picks cores of picked CPUs only, so g alone picks no core and i alone
// picks nothing.
func TestFilterCPUs(t *testing.T) {
	tests := []struct {
		cpus    string
		want    []string
		missing []string
	}{
		{"f", []string{"gpu/GPU-0", "cpu/0", "cpucore/0/0", "cpucore/0/1", "cpu/1", "cpucore/1/0", "cpucore/1/1"}, nil},
		{"g", []string{"gpu/GPU-0", "cpu/0", "cpu/1"}, nil},
		{"g:1", []string{"gpu/GPU-0", "cpu/1"}, nil},
		{"g:1,4", []string{"gpu/GPU-0", "cpu/1"}, []string{"CPU 4"}},
		{"i", []string{"gpu/GPU-0"}, nil},
		{"i:1,9", []string{"gpu/GPU-0"}, []string{"CPU core 9"}},
	}
	for _, tt := range tests {
		t.Run(tt.cpus, func(t *testing.T) {
			c, err := Parse(tt.cpus)
			require.NoError(t, err)
			sel := Selector{GPUs: Options{Flex: true}, Switches: Options{Flex: true}, CPUs: c}
			assert.Equal(t, tt.want, keys(sel.Filter(cpuNode())))
			assert.Equal(t, tt.missing, sel.Missing(cpuNode()))
		})
	}
}

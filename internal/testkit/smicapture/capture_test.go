package smicapture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValueClassifiesWhatTheDriverDidNotGive(t *testing.T) {
	for _, tc := range []struct {
		raw       string
		supported bool
		num       float64
		hasNum    bool
	}{
		{"81559 MiB", true, 81559, true},
		{"433.78 W", true, 433.78, true},
		{"16x", true, 16, true},
		{"100.00%", true, 100, true},
		{"0x00000000000001FF", true, 0x1ff, true},
		{"-8 C", true, -8, true},
		{"N/A", false, 0, false},
		{"[N/A]", false, 0, false},
		{"[Not Supported]", false, 0, false},
		{"Requested functionality has been deprecated", false, 0, false},
		{"[Requested functionality has been deprecated]", false, 0, false},
		{"Enabled", true, 0, false},
	} {
		v := NewValue(tc.raw)
		assert.Equal(t, tc.supported, v.Supported, tc.raw)
		n, ok := v.Number()
		assert.Equal(t, tc.hasNum, ok, tc.raw)
		assert.InDelta(t, tc.num, n, 1e-9, tc.raw)
	}
}

const tiny = `collected_at:   2026-07-14T09:00:26Z
load:           burn
################################################################################
# capabilities :: nvlink -s
# $ nvidia-smi nvlink -s
################################################################################
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)
	 Link 0: 26.562 GB/s
	 Link 1: 26.562 GB/s
################################################################################
# load :: query (-q)
# $ nvidia-smi -q
################################################################################

==============NVSMI LOG==============

Driver Version                                         : 590.48.01
CUDA Version                                           : 13.1

Attached GPUs                                          : 1
GPU 00000000:00:09.0
    Product Name                                       : NVIDIA H100 80GB HBM3
    MIG Device
        Index                                          : 0
        GPU Instance ID                                : 2
        Compute Instance ID                            : 0
        Device Attributes
            Shared
                Multiprocessor count                   : 60
                Copy Engine count                      : 3
                Encoder count                          : 0
                Decoder count                          : 3
                OFA count                              : 0
                JPG count                              : 3
        Shared FB Memory Usage
            Total                                      : 40448 MiB
            Reserved                                   : 0 MiB
            Used                                       : 11091 MiB
            Free                                       : 29357 MiB
    PCI
        GPU Link Info
            PCIe Generation
                Max                                    : 5
                Current                                : 4
    Fan Speed                                          : N/A
    Processes
        GPU instance ID                   : 2
        Compute instance ID               : 0
        Process ID                        : 21180
            Type                          : C
            Name                          : /root/tools/memhog
            Used GPU Memory               : 2296 MiB
################################################################################
# load :: query-gpu (csv, what the exporter parses)
# $ nvidia-smi --query-gpu=pci.bus_id,memory.total,fan.speed --format=csv
################################################################################
pci.bus_id, memory.total [MiB], fan.speed [%]
00000000:00:09.0, 81559 MiB, [N/A]
################################################################################
# load :: query-compute-apps (per-process)
# $ nvidia-smi --query-compute-apps=gpu_bus_id,gpu_uuid,pid,process_name,used_gpu_memory --format=csv
################################################################################
gpu_bus_id, gpu_uuid, pid, process_name, used_gpu_memory [MiB]
00000000:00:09.0, GPU-1, 21180, /root/tools/memhog, 2296 MiB
`

func TestParseReadsEverySectionKind(t *testing.T) {
	c, err := Parse(strings.NewReader(tiny))
	require.NoError(t, err)
	assert.Equal(t, "burn", c.Header["load"])
	assert.Equal(t, map[int]int{0: 2}, c.NVLinks)
	require.Len(t, c.Snapshots, 1)
	s := c.Snapshots[0]
	assert.Equal(t, "load", s.Phase)
	assert.Equal(t, "590.48.01", s.DriverVersion)
	assert.Equal(t, "13.1", s.CUDAVersion)
	require.Len(t, s.GPUs, 1)
	g := s.GPUs[0]
	assert.Equal(t, "00000000:00:09.0", g.BusID)
	assert.Equal(t, "NVIDIA H100 80GB HBM3", g.Q.Get("Product Name").Text())
	assert.Equal(t, "4", g.Q.Get("PCI", "GPU Link Info", "PCIe Generation", "Current").Text())
	assert.False(t, g.Q.Get("Fan Speed").Supported)
	assert.False(t, g.Q.Get("No", "Such").Supported)
	assert.Equal(t, []MIGDevice{{Index: 0, GPUInstanceID: 2, SMs: 60, CopyEngines: 3, Decoders: 3, JPGs: 3,
		TotalMiB: 40448, UsedMiB: 11091, FreeMiB: 29357}}, g.MIG)
	assert.Equal(t, []Process{{PID: 21180, GPUInstanceID: 2, ComputeInstanceID: 0, Type: "C", Name: "/root/tools/memhog",
		UsedMiB: 2296, UsedSupported: true}}, g.Processes)
	total, ok := g.Field("memory.total").Number()
	assert.True(t, ok)
	assert.Equal(t, 81559.0, total)
	assert.False(t, g.Field("fan.speed").Supported)
	assert.Equal(t, []App{{PID: 21180, Name: "/root/tools/memhog", UUID: "GPU-1", UsedMiB: 2296}}, g.Apps)
}

func TestParseNamesTheBadLine(t *testing.T) {
	bad := strings.Replace(tiny, "00000000:00:09.0, 81559 MiB, [N/A]", "00000000:00:09.0, 81559 MiB", 1)
	_, err := Parse(strings.NewReader(bad))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 58")
	_, err = Parse(strings.NewReader("nothing here\n"))
	assert.ErrorContains(t, err, "no `nvidia-smi -q` section")
}

// TestSharedCapturesParse reads every shared capture: an idle and a load
// snapshot each, the -q block and the --query-gpu row of every GPU, and on
// the MIG capture its four MIG devices.
func TestSharedCapturesParse(t *testing.T) {
	for _, f := range TestFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := ParseFile(f)
			require.NoError(t, err)
			require.Len(t, c.Snapshots, 2)
			for _, s := range c.Snapshots {
				require.NotEmpty(t, s.GPUs)
				for _, g := range s.GPUs {
					assert.NotEmpty(t, g.CSV, "%s: --query-gpu row", s.Phase)
					assert.Equal(t, g.Q.Get("GPU UUID").Text(), g.Field("uuid").Text())
					if strings.Contains(f, "mig") {
						assert.Len(t, g.MIG, 4)
					}
				}
			}
		})
	}
}

// TestDirEnvMovesTheCaptures: GPUSCOPE_CAPTURES_DIR points the tests and
// scripts/check-capture.sh at another folder of captures.
func TestDirEnvMovesTheCaptures(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.txt"), []byte(tiny), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte(tiny), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.md"), nil, 0o600))
	t.Setenv(DirEnv, dir)
	assert.Equal(t, dir, DefaultDir())
	assert.Equal(t, []string{filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")}, TestFiles(t))
	t.Setenv(DirEnv, "")
	assert.True(t, strings.HasSuffix(DefaultDir(), filepath.Join("shared", "compat", "nvidia-smi-captures")))
}

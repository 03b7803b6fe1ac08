package gpucheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
)

// smiScrape is one H200 as gpuscope serves it, with the values of the
// H200 capture's idle query-gpu line (../shared/compat/nvidia-smi-captures,
// linux-x86_64__nvidia-h200__590.48.01.txt) in dcgm-exporter's units.
const smiScrape = `# TYPE gpuscope_gpu_lost gauge
gpuscope_gpu_lost{gpu="0",UUID="GPU-0a",pci_bus_id="00000000:83:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="n"} 0
# TYPE gpuscope_field_supported gauge
gpuscope_field_supported{field="DCGM_FI_DEV_FAN_SPEED",gpu="0",UUID="GPU-0a"} 0
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0a",pci_bus_id="00000000:83:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="n",DCGM_FI_DRIVER_VERSION="590.48.01"} 620.5
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-0a",pci_bus_id="00000000:83:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="n",DCGM_FI_DRIVER_VERSION="590.48.01"} 32362
# TYPE DCGM_FI_DEV_PSTATE gauge
DCGM_FI_DEV_PSTATE{gpu="0",UUID="GPU-0a",pci_bus_id="00000000:83:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="n",DCGM_FI_DRIVER_VERSION="590.48.01"} 0
`

const smiCounters = `DCGM_FI_DRIVER_VERSION, label, Driver Version
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_PSTATE, gauge, Performance state.
DCGM_FI_DEV_FAN_SPEED, gauge, Fan speed (in %).
`

// smiCSV is nvidia-smi's answer with units, as --format=csv prints it.
func smiCSV(power, used, pstate, fan, name string) string {
	return "uuid, index, mig.mode.current, name, pci.bus_id, driver_version, power.draw [W], memory.used [MiB], pstate, fan.speed [%]\n" +
		"GPU-0a, 0, [N/A], " + name + ", 00000000:83:00.0, 590.48.01, " + power + ", " + used + ", " + pstate + ", " + fan + "\n"
}

func TestCrossCheckAgainstNvidiaSMI(t *testing.T) {
	set, err := counters.Parse("test.csv", strings.NewReader(smiCounters))
	require.NoError(t, err)
	ok := smiCSV("627.40 W", "32362 MiB", "P0", "[N/A]", "NVIDIA H200")
	cases := []struct {
		name          string
		scrape        string
		before, after string
		fails         map[string]string // field -> part of the finding
	}{
		{"the capture's own values", smiScrape, ok, "", nil},
		{"between the readings before and after", strings.Replace(smiScrape, "} 32362", "} 40000", 1),
			ok, smiCSV("627.40 W", "48000 MiB", "P0", "[N/A]", "NVIDIA H200"), nil},
		{"power in mW where W is due", strings.Replace(smiScrape, "} 620.5", "} 620500", 1), ok, "",
			map[string]string{"DCGM_FI_DEV_POWER_USAGE": `gpuscope "620500", nvidia-smi "627.40 W": outside [501.92, 752.88]`}},
		{"memory in bytes where MiB is due", strings.Replace(smiScrape, "} 32362", "} 33934868480", 1), ok, "",
			map[string]string{"DCGM_FI_DEV_FB_USED": "outside"}},
		{"a P-state off by one", strings.Replace(smiScrape, "DCGM_FI_DRIVER_VERSION=\"590.48.01\"} 0", "DCGM_FI_DRIVER_VERSION=\"590.48.01\"} 1", 1), ok, "",
			map[string]string{"DCGM_FI_DEV_PSTATE": `gpuscope "1", nvidia-smi "P0"`}},
		{"unsupported exported as 0", strings.Replace(smiScrape, "gpuscope_field_supported{field=\"DCGM_FI_DEV_FAN_SPEED\",gpu=\"0\",UUID=\"GPU-0a\"} 0\n",
			"# TYPE DCGM_FI_DEV_FAN_SPEED gauge\nDCGM_FI_DEV_FAN_SPEED{gpu=\"0\",UUID=\"GPU-0a\"} 0\n", 1), ok, "",
			map[string]string{"DCGM_FI_DEV_FAN_SPEED": "nvidia-smi reports [N/A], so the series must be absent, not a value"}},
		{"a value nvidia-smi has and gpuscope lacks", smiScrape, smiCSV("627.40 W", "32362 MiB", "P0", "45 %", "NVIDIA H200"), "",
			map[string]string{"DCGM_FI_DEV_FAN_SPEED": "nvidia-smi reads a value (fan.speed); gpuscope exports none"}},
		{"another model name", smiScrape, smiCSV("627.40 W", "32362 MiB", "P0", "[N/A]", "NVIDIA H100 80GB HBM3"), "",
			map[string]string{"modelName": "label differs from nvidia-smi's name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Exposition: []byte(tc.scrape), Counters: set}
			in.SMIBefore, err = ParseSMI([]byte(tc.before))
			require.NoError(t, err)
			if tc.after != "" {
				in.SMIAfter, err = ParseSMI([]byte(tc.after))
				require.NoError(t, err)
			}
			rep, err := Check(in)
			require.NoError(t, err)
			got := map[string]string{}
			for _, f := range rep.Findings {
				if f.Check == "nvidia-smi" {
					got[strings.SplitN(f.Series, "{", 2)[0]] = f.Msg
				}
			}
			require.Len(t, got, len(tc.fails), "findings: %v", rep.Findings)
			for field, want := range tc.fails {
				assert.Contains(t, got[field], want)
			}
			compared := map[string]bool{}
			for _, r := range rep.SMI {
				compared[r.Field] = true
			}
			for _, f := range []string{"modelName", "pci_bus_id", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_PSTATE", "DCGM_FI_DEV_FAN_SPEED"} {
				assert.True(t, compared[f], "%s not compared: %v", f, rep.SMI)
			}
		})
	}
}

func TestCrossCheckNamesAGPUGpuscopeLacks(t *testing.T) {
	set, err := counters.Parse("test.csv", strings.NewReader(smiCounters))
	require.NoError(t, err)
	smi, err := ParseSMI([]byte(strings.ReplaceAll(smiCSV("1 W", "1 MiB", "P0", "[N/A]", "x"), "GPU-0a", "GPU-1b")))
	require.NoError(t, err)
	rep, err := Check(Input{Exposition: []byte(smiScrape), Counters: set, SMIBefore: smi})
	require.NoError(t, err)
	require.Contains(t, strings.Join(findingStrings(rep), "\n"), "GPU GPU-1b (index 0) is not exported")
}

func findingStrings(r Report) []string {
	out := make([]string, len(r.Findings))
	for i, f := range r.Findings {
		out[i] = f.String()
	}
	return out
}

// Every property the cross-check asks nvidia-smi for is one a real driver
// answers, and every answer in the real captures reads: a number with its
// unit, a P-state, Enabled/Disabled, or one of the bracketed words for
// "none" ([N/A], [Not Supported], [Requested functionality has been
// deprecated]).
func TestSMIQueryReadsTheRealCaptures(t *testing.T) {
	dir := filepath.Join(compattest.Dir(t), "..", "nvidia-smi-captures")
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no captures in %s", dir)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			sections := querySections(string(b))
			require.NotEmpty(t, sections, "no --query-gpu section")
			for _, sec := range sections {
				smi, err := ParseSMI([]byte(sec))
				require.NoError(t, err)
				require.NotEmpty(t, smi)
				for uuid, props := range smi {
					for _, f := range smiFields {
						text, asked := props[f.query]
						require.True(t, asked, "%s: the capture's query has no %s", uuid, f.query)
						if f.label == "" {
							_, _, err := smiNumber(f.query, text)
							assert.NoError(t, err, "%s %s", uuid, f.query)
						}
					}
				}
			}
		})
	}
}

// querySections are the CSV answers under each "# $ nvidia-smi
// --query-gpu=" banner of a capture.
func querySections(capture string) []string {
	var out []string
	lines := strings.Split(capture, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "# $ nvidia-smi --query-gpu=") {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.HasPrefix(lines[j], "#") {
			j++
		}
		k := j
		for k < len(lines) && strings.TrimSpace(lines[k]) != "" && !strings.HasPrefix(lines[k], "#") {
			k++
		}
		out = append(out, strings.Join(lines[j:k], "\n"))
		i = k
	}
	return out
}

// On a GPU with MIG enabled NVML has no GPU utilisation (nvml.h,
// nvmlDeviceGetUtilizationRates), so DCGM_FI_DEV_GPU_UTIL reported
// unsupported there is a note; on a GPU without MIG it stays a failure,
// as for every core field.
func TestGPUUtilUnsupportedOnlyExpectedWithMIG(t *testing.T) {
	body, set := simScrape(t, 2)
	uuids := regexp.MustCompile(`gpuscope_gpu_lost\{[^}]*UUID="([^"]+)"`).FindAllStringSubmatch(string(body), -1)
	require.Len(t, uuids, 2)
	b := dropLines(body, "DCGM_FI_DEV_GPU_UTIL", "0")
	b = markUnsupported(b, "DCGM_FI_DEV_GPU_UTIL", "0")
	for _, tc := range []struct {
		mig0 string
		fail bool
	}{{"Enabled", false}, {"Disabled", true}} {
		t.Run("MIG "+tc.mig0, func(t *testing.T) {
			smi, err := ParseSMI([]byte("uuid, index, mig.mode.current\n" + uuids[0][1] + ", 0, " + tc.mig0 + "\n" + uuids[1][1] + ", 1, Disabled\n"))
			require.NoError(t, err)
			rep, err := Check(Input{Exposition: b, Counters: set, GPUs: 2, ExpectGPM: true, SMIBefore: smi})
			require.NoError(t, err)
			require.Equal(t, tc.fail, rep.Failed(), "findings: %v", rep.Findings)
			if tc.fail {
				require.Contains(t, failures(rep), `DCGM_FI_DEV_GPU_UTIL{gpu="0"}: reported unsupported, but this GPU serves it through NVML`)
			} else {
				require.Contains(t, findings(rep, func(f Finding) bool { return f.Note }), `NOTE fields       DCGM_FI_DEV_GPU_UTIL{gpu="0"}: unsupported, as NVML says it is on a GPU with MIG enabled`)
			}
		})
	}
}

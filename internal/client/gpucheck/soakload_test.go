package gpucheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// soakScrape is what one scrape of a soak shows of gpuscope's health.
func soakScrape(errors, lost float64, rssMiB float64) []byte {
	return []byte(fmt.Sprintf(`# TYPE gpuscope_sample_errors_total counter
gpuscope_sample_errors_total{field="DCGM_FI_DEV_GPU_TEMP"} %v
# TYPE gpuscope_gpu_lost gauge
gpuscope_gpu_lost{gpu="0",UUID="GPU-0a"} %v
# TYPE gpuscope_source_up gauge
gpuscope_source_up{source="nvml"} 1
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes %v
`, errors, lost, rssMiB*(1<<20)))
}

func TestSoak(t *testing.T) {
	flat := []float64{30, 31, 30.5, 31, 31.2, 31}
	cases := []struct {
		name   string
		rss    []float64
		errAt  int // scrape (1-based) from which a read failed; 0 none
		lostAt int
		want   string // part of the failure; "" passes
	}{
		{"steady", flat, 0, 0, ""},
		{"a failed read", flat, 4, 0, `gpuscope_sample_errors_total{field="DCGM_FI_DEV_GPU_TEMP"}: 2 failed reads by scrape 4`},
		{"a lost GPU", flat, 0, 3, `gpuscope_gpu_lost{gpu="0"}: GPU reported lost in scrape 3`},
		{"a growing resident set", []float64{30, 30, 30, 30, 40, 45}, 0, 0, "grew from 30.0 MiB to 42.5 MiB (medians of the middle and last thirds)"},
		{"warm-up growth only", []float64{12, 30, 30, 30, 31, 30}, 0, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var scrapes [][]byte
			for i, r := range tc.rss {
				e, l := 0.0, 0.0
				if tc.errAt > 0 && i+1 >= tc.errAt {
					e = 2
				}
				if tc.lostAt == i+1 {
					l = 1
				}
				scrapes = append(scrapes, soakScrape(e, l, r))
			}
			rep, err := Soak(scrapes)
			require.NoError(t, err)
			if tc.want == "" {
				require.False(t, rep.Failed(), "findings: %v", rep.Findings)
				require.Contains(t, findings(rep, func(f Finding) bool { return f.Note }), "scrapes")
				return
			}
			require.True(t, rep.Failed())
			require.Contains(t, failures(rep), tc.want)
		})
	}
	_, err := Soak([][]byte{soakScrape(0, 0, 1), soakScrape(0, 0, 1)})
	require.ErrorContains(t, err, "soak: 2 scrapes; at least 3 are needed")
	rep, err := Soak([][]byte{[]byte("up 1\n"), []byte("up 1\n"), []byte("up 1\n")})
	require.NoError(t, err)
	require.Contains(t, failures(rep), "process_resident_memory_bytes: in 0 scrapes only")
}

// loadScrape is GPU 0 as gpuscope shows it; busy adds the load's process.
func loadScrape(fbMiB, smActive, pcieRx float64, proc string) []byte {
	id := `gpu="0",UUID="GPU-0a"`
	return []byte(fmt.Sprintf(`# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{%[1]s} %[2]v
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{%[1]s} %[3]v
# TYPE DCGM_FI_PROF_PCIE_RX_BYTES gauge
DCGM_FI_PROF_PCIE_RX_BYTES{%[1]s} %[4]v
%[5]s`, id, fbMiB, smActive, pcieRx, proc))
}

func procSeries(pid, name string, memBytes float64) string {
	return fmt.Sprintf(`# TYPE gpuscope_process_info gauge
gpuscope_process_info{gpu="0",UUID="GPU-0a",pid=%q,process_name=%q} 1
# TYPE gpuscope_process_memory_used_bytes gauge
gpuscope_process_memory_used_bytes{gpu="0",UUID="GPU-0a",pid=%q} %v
`, pid, name, pid, memBytes)
}

func TestCheckLoad(t *testing.T) {
	load := LoadSummary{PID: 4242, ProcessName: "gpuscope-cudaload", AllocatedBytes: 8 << 30, Kernels: 900,
		H2DBytes: 200 << 30, ElapsedSeconds: 45, H2DBytesPerSecond: 4.4e9}
	proc := procSeries("4242", "/opt/gpu-check/bin/gpuscope-cudaload", 8.6*(1<<30))
	cases := []struct {
		name string
		busy []byte
		want []string // parts of failures; none passes
	}{
		{"a loaded H200", loadScrape(600+8192+420, 0.93, 4.1e9, proc), nil},
		{"SM activity low", loadScrape(600+8192+420, 0.2, 4.1e9, proc), []string{"DCGM_FI_PROF_SM_ACTIVE: median 0.200 during the load, not above 0.5"}},
		{"framebuffer in bytes", loadScrape((600+8192+420)*(1<<20), 0.93, 4.1e9, proc), []string{"DCGM_FI_DEV_FB_USED: grew"}},
		{"framebuffer unchanged", loadScrape(610, 0.93, 4.1e9, proc), []string{"grew 10 MiB (MiB is dcgm-exporter's unit) for a 8192 MiB allocation"}},
		{"PCIe in KB/s", loadScrape(600+8192+420, 0.93, 4.1e6, proc), []string{"median 4.1e+06 B/s is not plausible for the load's 4.4e+09 B/s"}},
		{"process not listed", loadScrape(600+8192+420, 0.93, 4.1e9, ""), []string{"not listed with process_name \"gpuscope-cudaload\"", "no gpuscope_process_memory_used_bytes"}},
		{"process memory short", loadScrape(600+8192+420, 0.93, 4.1e9, procSeries("4242", "gpuscope-cudaload", 100<<20)), []string{"holds 100 MiB"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := CheckLoad(LoadInput{Idle: loadScrape(600, 0, 1e6, ""), Busy: [][]byte{tc.busy, tc.busy}, Load: load, GPU: "0", ExpectGPM: true})
			require.NoError(t, err)
			if len(tc.want) == 0 {
				require.False(t, rep.Failed(), "findings: %v", rep.Findings)
				return
			}
			require.Equal(t, len(tc.want), rep.Failures(), "findings: %v", rep.Findings)
			for _, w := range tc.want {
				assert.Contains(t, failures(rep), w)
			}
		})
	}
	_, err := CheckLoad(LoadInput{Idle: loadScrape(600, 0, 0, ""), Load: load, GPU: "0"})
	require.ErrorContains(t, err, "no scrape during the load")
	rep, err := CheckLoad(LoadInput{Idle: loadScrape(600, 0, 0, ""), Busy: [][]byte{loadScrape(600, 0.9, 1, "")}, Load: LoadSummary{}, GPU: "0"})
	require.NoError(t, err)
	require.True(t, strings.Contains(failures(rep), "the load ran no kernel or held no memory"))
}

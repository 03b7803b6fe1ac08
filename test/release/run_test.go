package release

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/internal/testkit/testwait"
)

// sysroots are the C libraries qemu-user runs a foreign binary against:
// Debian's libc6-arm64-cross for arm64.
var sysroots = map[string]string{"amd64": "/usr/x86_64-linux-gnu", "arm64": "/usr/aarch64-linux-gnu"}

// unpacked extracts the release archive of goarch and returns its folder
// and the command line prefix that runs its binary here: the binary itself
// on its own architecture, qemu-user with the cross C library otherwise.
func unpacked(t *testing.T, goarch string) (root string, argv []string) {
	t.Helper()
	dist, version := makeRelease(t)
	name := archiveName(version, goarch)
	root = filepath.Join(extract(t, filepath.Join(dist, name+".tar.gz")), name)
	bin := filepath.Join(root, "gpuscope")
	if goarch == runtime.GOARCH {
		return root, []string{bin}
	}
	if _, err := os.Stat(filepath.Join(sysroots[goarch], "lib")); err != nil {
		msg := fmt.Sprintf("%s is missing: qemu needs %s's C library (scripts/install-test-deps.sh installs it)", sysroots[goarch], goarch)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return root, []string{qemuFor(t, goarch), "-L", sysroots[goarch], bin}
}

func TestArchiveBinaryCommands(t *testing.T) {
	_, version := makeRelease(t)
	bad := filepath.Join(t.TempDir(), "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("DCGM_FI_DEV_GPU_TEMP, gauge, temperature\nDCGM_FI_DEV_GPU_TMEP, gauge, a typo\n"), 0o644))
	tests := []struct {
		name    string
		args    func(root string) []string
		wantErr bool
		want    []string
	}{
		{"help lists the flags with their variables", func(string) []string { return []string{"--help"} }, false,
			[]string{"gpuscope - high-resolution GPU metrics", "--source", "GPUSCOPE_SOURCE", "--collectors"}},
		{"version is the release's", func(string) []string { return []string{"--version"} }, false,
			[]string{version}},
		{"counters check passes the shipped files", func(root string) []string {
			return []string{"counters", "check", filepath.Join(root, "etc", "default-counters.csv"), filepath.Join(root, "etc", "dcp-metrics.csv")}
		}, false, []string{"default-counters.csv: ok", "dcp-metrics.csv: ok"}},
		{"counters check names a typo's file and line", func(string) []string { return []string{"counters", "check", bad} }, true,
			[]string{"bad.csv:2", "DCGM_FI_DEV_GPU_TEMP"}},
	}
	for _, a := range arches {
		t.Run(a.goarch, func(t *testing.T) {
			root, argv := unpacked(t, a.goarch)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					args := append(append([]string{}, argv[1:]...), tt.args(root)...)
					out, err := exec.Command(argv[0], args...).CombinedOutput()
					if tt.wantErr {
						assert.Error(t, err, "%s", out)
					} else {
						assert.NoError(t, err, "%s", out)
					}
					for _, w := range tt.want {
						assert.Contains(t, string(out), w)
					}
				})
			}
		})
	}
}

// TestArchiveBinaryServesMetrics starts each archive's binary on the sim
// source, the arm64 one under qemu-user, and reads one scrape.
func TestArchiveBinaryServesMetrics(t *testing.T) {
	_, version := makeRelease(t)
	for _, a := range arches {
		t.Run(a.goarch, func(t *testing.T) {
			root, argv := unpacked(t, a.goarch)
			addr := e2etest.FreePort(t)
			args := append(append([]string{}, argv[1:]...), "--source=sim", "--sim-gpus=4", "--address", addr,
				"--hostname", "release-node", "--collectors", filepath.Join(root, "etc", "default-counters.csv"))
			e2etest.Start(t, argv[0], args...)
			// Emulation is slow to start; the first sample still comes
			// within a collect interval of it.
			e2etest.WaitHTTP(t, "http://"+addr+"/ready", 90*time.Second)

			// Ready means the first sample is in; wait until every GPU's is.
			var families map[string]*dto.MetricFamily
			testwait.Every(30*time.Second, 250*time.Millisecond, func() bool {
				families = scrape(t, "http://"+addr+"/metrics")
				return len(families["DCGM_FI_DEV_GPU_TEMP"].GetMetric()) >= 4
			})
			temp := families["DCGM_FI_DEV_GPU_TEMP"]
			require.NotNil(t, temp, "DCGM_FI_DEV_GPU_TEMP is exported")
			gpus := map[string]bool{}
			for _, m := range temp.GetMetric() {
				gpus[label(m, "gpu")] = true
				assert.Equal(t, "release-node", label(m, "Hostname"))
				assert.Positive(t, m.GetGauge().GetValue(), "a simulated GPU has a temperature")
			}
			assert.Equal(t, map[string]bool{"0": true, "1": true, "2": true, "3": true}, gpus)

			build := families["gpuscope_build_info"]
			require.NotNil(t, build, "gpuscope_build_info is exported")
			require.Len(t, build.GetMetric(), 1)
			assert.Equal(t, a.goarch, label(build.GetMetric()[0], "goarch"), "the scrape comes from the %s binary", a.goarch)
			assert.Equal(t, version, label(build.GetMetric()[0], "version"))
		})
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "the scrape is valid text exposition")
	return families
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

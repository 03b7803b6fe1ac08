package capturecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/smicapture"
)

func TestCompareRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    want
		g    got
		st   Status
	}{
		{"same number", want{shown: true, supported: true, num: 433.78}, got{num: 433.78, has: true}, Agree},
		{"other number", want{shown: true, supported: true, num: 433.78}, got{num: 433780, has: true}, Differ},
		{"unsupported and absent", want{shown: true}, got{}, Agree},
		{"unsupported but exported as 0", want{shown: true}, got{num: 0, has: true}, Differ},
		{"shown but absent", want{shown: true, supported: true, num: 5}, got{}, Differ},
		{"shown but failed", want{shown: true, supported: true, num: 5}, got{fail: "GetX: Unknown Error"}, Differ},
		{"text", want{shown: true, supported: true, isText: true, text: "NVIDIA"}, got{text: "NVIDIA", has: true, isText: true}, Agree},
		{"other text", want{shown: true, supported: true, isText: true, text: "NVIDIA"}, got{text: "Tesla", has: true, isText: true}, Differ},
		{"not shown", notShown(), got{num: 1, has: true}, NotShown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.st, compare("gpu0", "F", tc.w, tc.g).Status)
		})
	}
}

// TestSharedCapturesAgree is the check scripts/check-capture.sh runs: on
// every shared capture, idle and loaded, every field the capture shows is
// what the NVML source exports.
func TestSharedCapturesAgree(t *testing.T) {
	for _, f := range smicapture.TestFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rep, err := CheckFile(f)
			require.NoError(t, err)
			for _, r := range rep.Mismatches() {
				t.Errorf("%s %s %s: capture %q, gpuscope %q", r.Phase, r.Entity, r.Field, r.Capture, r.Gpuscope)
			}
			// The comparison has teeth: most fields are shown and agree
			// with a value, not merely absent on both sides.
			valued := 0
			for _, r := range rep.Rows {
				if r.Status == Agree && r.Gpuscope != "absent" {
					valued++
				}
			}
			assert.Greater(t, valued, 2*40, "fields that agree with a value, over two snapshots")
			if strings.Contains(f, "-mig_") || strings.Contains(f, "-mig__") {
				profiles := 0
				for _, r := range rep.Rows {
					if r.Field == "GPU_I_PROFILE" && r.Status == Agree {
						profiles++
					}
				}
				assert.Equal(t, 8, profiles, "4 MIG instances, idle and loaded")
			}
		})
	}
}

// rewrite copies a shared capture with its --query-gpu rows changed.
func rewrite(t *testing.T, name string, change func(row string) string) string {
	t.Helper()
	var src string
	for _, f := range smicapture.TestFiles(t) {
		if strings.Contains(filepath.Base(f), name) {
			src = f
		}
	}
	require.NotEmpty(t, src, "no shared capture named like %q", name)
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		// --query-gpu rows start with the timestamp and driver version.
		if strings.Count(l, ", ") > 100 && !strings.HasPrefix(l, "timestamp") && !strings.HasPrefix(l, "#") {
			lines[i] = change(l)
		}
	}
	out := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.WriteFile(out, []byte(strings.Join(lines, "\n")), 0o600))
	return out
}

func rowOf(t *testing.T, rep *Report, phase, field string) Row {
	t.Helper()
	for _, r := range rep.Rows {
		if r.Phase == phase && r.Entity == "gpu0" && r.Field == field {
			return r
		}
	}
	t.Fatalf("no row for %s %s", phase, field)
	return Row{}
}

// TestComputeModeInDCGMNumbering: DCGM numbers compute modes without
// NVML's removed exclusive-thread mode (DCGM, dcgmlib/src/
// DcgmCacheManager.cpp, case DCGM_FI_DEV_GPU_COMPUTE_MODE), so a GPU in
// exclusive-process mode is 2 in dcgm-exporter, not NVML's 3.
func TestComputeModeInDCGMNumbering(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want string
	}{{"Default", "0"}, {"Prohibited", "1"}, {"Exclusive_Process", "2"}} {
		t.Run(tc.mode, func(t *testing.T) {
			path := rewrite(t, "h100-80gb-hbm3", func(row string) string {
				return strings.Replace(row, ", Default, 9.0, ", ", "+tc.mode+", 9.0, ", 1)
			})
			rep, err := CheckFile(path)
			require.NoError(t, err)
			r := rowOf(t, rep, "load", "DCGM_FI_DEV_COMPUTE_MODE")
			assert.Equal(t, tc.mode, r.Capture)
			assert.Equal(t, tc.want, r.Gpuscope)
			assert.Equal(t, Agree, r.Status)
		})
	}
}

// TestUnsupportedIsAbsent: where the capture says a value is not
// supported, the source exports nothing for it, not a 0.
func TestUnsupportedIsAbsent(t *testing.T) {
	path := rewrite(t, "h100-80gb-hbm3", func(row string) string {
		return strings.Replace(row, ", P0, ", ", [N/A], ", 1)
	})
	rep, err := CheckFile(path)
	require.NoError(t, err)
	r := rowOf(t, rep, "load", "DCGM_FI_DEV_PSTATE")
	assert.Equal(t, "[N/A]", r.Capture)
	assert.Equal(t, "absent", r.Gpuscope, "an unsupported field is absent, never 0")
	assert.Equal(t, Agree, r.Status)
}

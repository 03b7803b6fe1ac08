package smicapture

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
)

// DirEnv overrides where the shared captures are read from.
const DirEnv = "GPUSCOPE_CAPTURES_DIR"

// DefaultDir is the shared captures folder: $GPUSCOPE_CAPTURES_DIR, else
// ../shared/compat/nvidia-smi-captures beside the checkout.
func DefaultDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "shared", "compat", "nvidia-smi-captures"))
}

// Files lists the capture files (*.txt) of a folder, sorted.
func Files(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	sort.Strings(files)
	return files, err
}

// TestFiles returns the shared captures for a test: it skips where the
// folder is missing or empty and fails there under CI=true, which always
// has them.
func TestFiles(t testing.TB) []string {
	t.Helper()
	dir := DefaultDir()
	files, err := Files(dir)
	if err == nil && len(files) > 0 {
		return files
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s holds no capture (*.txt); CI must have the nvidia-smi captures (set %s to move them): %v", dir, DirEnv, err)
	}
	t.Skipf("%s holds no capture (it sits beside the checkout, not in it; %s moves it): skipping", dir, DirEnv)
	return nil
}

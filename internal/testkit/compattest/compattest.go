// Package compattest finds dcgm-exporter's own counters files, which the
// compatibility tests read unchanged. They live in ../shared beside the
// checkout, not in the repository, so a clone without them skips those
// tests, and CI (CI=true), which always has them, fails instead.
package compattest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// path is the folder, found from this file's place in the repository.
func path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "shared", "compat", "dcgm-exporter"))
}

// Dir returns the folder of dcgm-exporter's counters files, skipping the
// test where it is missing and failing it in CI.
func Dir(t testing.TB) string {
	t.Helper()
	dir := DirOrEmpty(t)
	if dir == "" {
		t.Skipf("%s is missing (it sits beside the checkout, not in it): skipping", path())
	}
	return dir
}

// DirOrEmpty is Dir for tests with other cases to run: where the folder is
// missing outside CI it logs so and returns "".
func DirOrEmpty(t testing.TB) string {
	t.Helper()
	dir := path()
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; CI must have dcgm-exporter's counters files: %v", dir, err)
		}
		t.Logf("%s is missing (it sits beside the checkout, not in it)", dir)
		return ""
	}
	return dir
}

package dcgm

import (
	"strconv"
	"strings"
)

// baseUnitRelease is the first DCGM release whose host engine knows the
// base-unit fields (IDs 1600-1612 in go-dcgm v1.4611.0's dcgm_fields.h;
// DCGM 4.6.0's header stops at 1533).
var baseUnitRelease = [3]int{4, 6, 1}

// KnowsBaseUnits reports whether a host engine of this release reads the
// base-unit fields itself; an older one (or one whose version cannot be
// read) has them derived from their legacy fields.
func KnowsBaseUnits(version string) bool {
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(version), "v"), ".", 4)
	for i, want := range baseUnitRelease {
		if i >= len(parts) {
			return false
		}
		// A part may carry a suffix ("1-rc1"): its leading digits count.
		digits := parts[i]
		if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
			digits = digits[:end]
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			return false
		}
		if n != want {
			return n > want
		}
	}
	return true
}

package counters

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrNotInterval is the cause of ParseInterval's error for text that is
// neither a Go duration nor a number of milliseconds.
var ErrNotInterval = errors.New("not a duration such as 100ms or 1s, nor a number of milliseconds")

// ParseInterval reads an interval as dcgm-exporter writes one, in plain
// milliseconds ("30000"), or as a Go duration ("100ms", "1s"). It is the one
// grammar of the counters file's watch-interval column and of the interval
// flags; each caller checks the bounds that apply to it (MinInterval for a
// watch interval, more than zero for a flag).
func ParseInterval(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms > int64(time.Duration(1<<62)/time.Millisecond) || ms < -int64(time.Duration(1<<62)/time.Millisecond) {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is %w", s, ErrNotInterval)
	}
	return d, nil
}

package reload

import (
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
)

// TestWatcherRound4RewrittenInPlace (round 4, item 15): a file rewritten
// in place reads as a prefix of itself between its writes, and a prefix
// of a counters file parses: 48 of 444 scrapes served one as the whole
// set. A content is loaded only when two reads of it agree; otherwise the
// running set stays, and the next poll or SIGHUP tries again.
func TestWatcherRound4RewrittenInPlace(t *testing.T) {
	full := good + other
	tests := []struct {
		name   string
		reads  []string // what successive reads of the file return
		loaded int      // fields of the set applied; 0: none
	}{
		{"a prefix, then the whole file", []string{good, full}, 0},
		{"the whole file, then a prefix", []string{full, good}, 0},
		{"empty, then the whole file", []string{"", full}, 0},
		{"the whole file twice", []string{full, full}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			logger, _ := logtest.NewNullLogger()
			var applied []int
			w := New("counters.csv", func(s *counters.Set) error {
				applied = append(applied, len(s.Fields))
				return nil
			}, 0, logrus.NewEntry(logger))
			w.ReadFile = func(string) ([]byte, error) {
				mu.Lock()
				defer mu.Unlock()
				b := tt.reads[min(n, len(tt.reads)-1)]
				n++
				return []byte(b), nil
			}
			ok := w.Reload()
			if tt.loaded == 0 {
				assert.False(t, ok)
				assert.Empty(t, applied, "a content read only once is never applied")
				return
			}
			require.True(t, ok)
			assert.Equal(t, []int{tt.loaded}, applied)
		})
	}
}

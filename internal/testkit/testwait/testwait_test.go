package testwait

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestUntil(t *testing.T) {
	tests := []struct {
		name      string
		trueAfter int // calls; -1 never
		want      bool
		wantCalls int
	}{
		{"holds at once", 0, true, 1},
		{"holds on the fourth check", 3, true, 4},
		{"never holds", -1, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			got := Until(50*time.Millisecond, func() bool {
				calls++
				return tt.trueAfter >= 0 && calls > tt.trueAfter
			})
			assert.Equal(t, tt.want, got)
			if tt.wantCalls >= 0 {
				assert.Equal(t, tt.wantCalls, calls, "checks stop once the condition holds")
			} else {
				assert.Greater(t, calls, 1, "checked again until the deadline")
			}
		})
	}
}

package counters

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseInterval(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"30000", 30 * time.Second, ""},
		{"100", 100 * time.Millisecond, ""},
		{" 250ms ", 250 * time.Millisecond, ""},
		{"1m30s", 90 * time.Second, ""},
		{"0", 0, ""},
		{"-1s", -time.Second, ""},
		{"soon", 0, `"soon" is not a duration such as 100ms or 1s, nor a number of milliseconds`},
		{"9223372036854775807", 0, `"9223372036854775807" is out of range`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseInterval(tt.in)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := ParseInterval("soon")
	assert.ErrorIs(t, err, ErrNotInterval)
}

package window

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAppendSinceAndOldest(t *testing.T) {
	tests := []struct {
		name       string
		capacity   int
		pushed     []int64
		since      int64
		wantTS     []int64
		wantOldest int64
	}{
		{"empty", 4, nil, 0, nil, 0},
		{"all", 4, []int64{1, 2, 3}, 0, []int64{1, 2, 3}, 1},
		{"after since only", 4, []int64{1, 2, 3}, 2, []int64{3}, 1},
		{"wrapped keeps the newest in order", 3, []int64{1, 2, 3, 4, 5}, 0, []int64{3, 4, 5}, 3},
		{"wrapped and since", 3, []int64{1, 2, 3, 4, 5}, 3, []int64{4, 5}, 3},
		{"nothing newer", 3, []int64{1, 2}, 9, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRing(tt.capacity)
			for _, ts := range tt.pushed {
				r.Push(ts, float64(ts)*10)
			}
			ts, vals := r.AppendSince(tt.since, nil, nil)
			assert.Equal(t, tt.wantTS, ts)
			for i := range ts {
				assert.Equal(t, float64(ts[i])*10, vals[i], "value of the sample at %d", ts[i])
			}
			oldest, ok := r.Oldest()
			assert.Equal(t, len(tt.pushed) > 0, ok)
			assert.Equal(t, tt.wantOldest, oldest)
		})
	}
}

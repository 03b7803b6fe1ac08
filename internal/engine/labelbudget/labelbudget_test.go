package labelbudget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllowlistKeys(t *testing.T) {
	tests := []struct {
		expr   string
		n      int
		finite bool
	}{
		{"team", 1, true},
		{"team|tier|app", 3, true},
		{"app\\.kubernetes\\.io/(name|instance|version)", 3, true},
		{"team-[abc]", 3, true},
		{"team-[0-9]{2}", 100, true},
		{"k[0-9]?", 11, true},
		{"(?i)ab", 4, true},
		{"team.*", 0, false},
		{"a+", 0, false},
		{"k.", 0, false},
		{"[a-z]{1,10}", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			n, finite, err := AllowlistKeys(tt.expr)
			require.NoError(t, err)
			assert.Equal(t, tt.finite, finite)
			if tt.finite {
				assert.Equal(t, tt.n, n)
			}
		})
	}
	_, _, err := AllowlistKeys("team(")
	assert.ErrorContains(t, err, `allowlist "team("`)
}

func TestShape(t *testing.T) {
	tests := []struct {
		name   string
		shape  Shape
		widest int
		room   int
		ok     bool
	}{
		// The shipped counters files hold one label field (the driver
		// version); Kubernetes adds pod, namespace and container.
		{"kubernetes", Shape{LabelFields: 1, EnricherLabels: 3}, 18, 12, true},
		{"kubernetes with pod_uid and hpc_job", Shape{LabelFields: 1, EnricherLabels: 5}, 20, 10, true},
		{"pod labels filling the room", Shape{LabelFields: 1, EnricherLabels: 5, ExtraLabels: 10}, 30, 10, true},
		{"one pod label too many", Shape{LabelFields: 1, EnricherLabels: 5, ExtraLabels: 11}, 31, 10, false},
		{"label fields alone too many", Shape{LabelFields: 17}, 31, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.widest, tt.shape.Widest())
			assert.Equal(t, tt.room, tt.shape.Room())
			err := tt.shape.Check()
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "over the limit of 30")
			}
		})
	}
}

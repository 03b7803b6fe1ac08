package nvml

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/testkit/compattest"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/nvml/nvmlfake"
)

func countersFiles(t *testing.T) []string {
	files := []string{"../../etc/default-counters.csv", "../../etc/dcp-metrics.csv", "../../etc/nvidia-gpu-exporter.csv"}
	dir := compattest.DirOrEmpty(t)
	if dir == "" {
		return files
	}
	compat, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	require.NoError(t, err)
	return append(files, compat...)
}

// On the fake DGX H100, every field of each counters file that the NVML
// source serves yields a sample on every GPU, and every other field is
// reported unsupported with a reason.
func TestCountersFilesOnDGXH100(t *testing.T) {
	sup := Support()
	for _, file := range countersFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			set, err := counters.Load(file)
			require.NoError(t, err)
			f := nvmlfake.New(nvmlfake.DGXH100)
			s, err := New(Config{Lib: f, Logger: quietLogger(), EventWait: 20 * time.Millisecond, Clock: newSteppingClock()})
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			require.NoError(t, s.Watch([]source.Group{source.GroupOf(time.Second, set.Fields)}))
			sink := newSink()
			collectTwice(t, s, sink)
			for i := range f.GPUs {
				e := gpuEntity(t, s, i)
				for _, fld := range set.Fields {
					// A derived field is served when its base field is read.
					read, health := source.ReadFor(fld.ID)
					if health {
						read = fld.ID
					}
					k := sample{e.Key(), read}
					_, isValue := sink.values[k]
					_, isText := sink.texts[k]
					serves, _ := sup.Serves(fld.ID)
					switch {
					case serves:
						assert.True(t, isValue || isText, "%s (line %d) on GPU %d: unsupported %v, fails %v",
							fld.Name, fld.Line, i, sink.unsupported[k], sink.fails[k])
					default:
						// Not served.
						assert.False(t, isValue || isText, "%s on GPU %d", fld.Name, i)
						assert.Len(t, sink.unsupported[k], 1, "%s on GPU %d", fld.Name, i)
					}
				}
			}
			assert.Empty(t, sink.fails)
		})
	}
}

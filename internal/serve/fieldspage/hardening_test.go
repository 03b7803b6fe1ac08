package fieldspage

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
)

// TestFieldsCSVUsersMistakeBecomesA500: window statistics of counter fields
// are refused with 400 naming the field, on /fields.csv and /fields alike,
// as statistics of label fields are; the page offers no statistics for a
// counter; and nothing a client sends is logged above debug level. Before,
// /fields.csv answered 500 and logged the whole parse error at error level
// per request.
func TestFieldsCSVUsersMistakeBecomesA500(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	srv, _, _ := newServerWith(t, func(o *Options) { o.Log = logrus.NewEntry(logger) })
	counterStats := "field=DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,DCGM_FI_DEV_GPU_TEMP" +
		"&stats.DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION=max+p99&stats.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=avg&stats.DCGM_FI_DEV_GPU_TEMP=max"
	for _, path := range []string{CSVPath, CSVPath + "?format=configmap&", PagePath} {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = ""
		}
		for range 20 {
			code, _, body := get(t, srv.URL+path+sep+counterStats)
			require.Equal(t, http.StatusBadRequest, code, "%s: %s", path, body)
			assert.Regexp(t, `DCGM_FI_DEV_(TOTAL_ENERGY_CONSUMPTION|ECC_DBE_VOL_TOTAL) is a counter`, body, path)
			assert.Less(t, len(body), 512, "%s: one short reason", path)
		}
	}
	for _, e := range hook.AllEntries() {
		assert.Equal(t, logrus.DebugLevel, e.Level, "a client's mistake logged as %q", e.Message)
	}

	code, _, page := get(t, srv.URL+PagePath)
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, page, `name="stats.DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"`, "no statistics offered for a counter")
	assert.Contains(t, page, `name="stats.DCGM_FI_DEV_GPU_TEMP"`, "a gauge's are")
}

// TestFieldsHasNoConcurrencyBoundParsesOncePerExposition: the pages asked
// for together are priced from one parse of the exposition (and one read
// of the rings for the sparklines), not one each; a second later, or with
// another running counters file, the next page parses again. Before, every
// request copied and parsed the whole exposition.
func TestFieldsHasNoConcurrencyBoundParsesOncePerExposition(t *testing.T) {
	var parses atomic.Int32
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := parseRunning(t)
	var running atomic.Pointer[counters.Set]
	running.Store(set)
	srv, fs, _ := newServerWith(t, func(o *Options) {
		o.Now = clock
		o.Running = running.Load
		o.Exposition = func() []byte { parses.Add(1); return []byte(exposition) }
	})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := PagePath
			if i%2 == 1 {
				path += "?field=DCGM_FI_DEV_GPU_TEMP&stats.DCGM_FI_DEV_GPU_TEMP=max"
			}
			code, _, body := get(t, srv.URL+path)
			assert.Equal(t, http.StatusOK, code)
			assert.Contains(t, body, "0.5", "the latest value of SM activity")
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), parses.Load(), "20 pages, one parse")
	assert.Len(t, fs.asked, 1, "20 pages, one read of the rings")

	mu.Lock()
	now = now.Add(modelMaxAge)
	mu.Unlock()
	get(t, srv.URL+PagePath)
	assert.Equal(t, int32(2), parses.Load(), "a second later the exposition is parsed again")
	running.Store(parseRunning(t))
	get(t, srv.URL+PagePath)
	assert.Equal(t, int32(3), parses.Load(), "a reloaded counters file is priced at once")
}

func parseRunning(t *testing.T) *counters.Set {
	t.Helper()
	set, err := counters.Parse("running.csv", strings.NewReader(running))
	require.NoError(t, err)
	return set
}

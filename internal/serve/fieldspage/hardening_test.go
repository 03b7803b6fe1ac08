package fieldspage

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

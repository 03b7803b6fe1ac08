package dash

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBilingual(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: `DCGM_FI_DEV_GPU_TEMP > 85`, want: `(DCGM_FI_DEV_GPU_TEMP or DCGM_FI_DEV_GPU_TEMP_CELSIUS) > 85`},
		{in: `DCGM_FI_DEV_SM_CLOCK{gpu="0"}`, want: `(DCGM_FI_DEV_SM_CLOCK{gpu="0"} or DCGM_FI_DEV_SM_CLOCK_HERTZ{gpu="0"} / 1e6)`},
		{in: `rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{GPU_CI_ID=""}[5m]) / 1000`,
			want: `(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{GPU_CI_ID=""}[5m]) or rate(DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL{GPU_CI_ID=""}[5m]) * 1000) / 1000`},
		{in: `avg_over_time(DCGM_FI_DEV_GPU_UTIL[10m] offset 1h)`,
			want: `(avg_over_time(DCGM_FI_DEV_GPU_UTIL[10m] offset 1h) or avg_over_time(DCGM_FI_DEV_GPU_UTIL_RATIO[10m] offset 1h) * 100)`},
		// Counting samples does not depend on the unit.
		{in: `count_over_time(DCGM_FI_DEV_FAN_SPEED[5m])`, want: `(count_over_time(DCGM_FI_DEV_FAN_SPEED[5m]) or count_over_time(DCGM_FI_DEV_FAN_SPEED_RATIO[5m]))`},
		// Recorded series, label values and longer names are not selectors of the field.
		{in: `cluster:DCGM_FI_PROF_SM_ACTIVE:sum`, want: `cluster:DCGM_FI_PROF_SM_ACTIVE:sum`},
		{in: `gpuscope_field_supported{field="DCGM_FI_DEV_GPU_UTIL"}`, want: `gpuscope_field_supported{field="DCGM_FI_DEV_GPU_UTIL"}`},
		{in: `DCGM_FI_DEV_XID_ERRORS > 0`, want: `(DCGM_FI_DEV_XID_ERRORS or DCGM_FI_DEV_XID_ERROR) > 0`},
		{in: `DCGM_FI_DEV_FB_USED`, want: `DCGM_FI_DEV_FB_USED`},
		// gpuscope's own families of a field take the field's name.
		{in: `rate(DCGM_FI_PROF_SM_ACTIVE_distribution[5m])`,
			want: `(rate(DCGM_FI_PROF_SM_ACTIVE_distribution[5m]) or rate(DCGM_FI_PROF_SM_UTIL_RATIO_distribution[5m]))`},
		{in: `DCGM_FI_PROF_SM_ACTIVE_window{stat="max"}`, want: `(DCGM_FI_PROF_SM_ACTIVE_window{stat="max"} or DCGM_FI_PROF_SM_UTIL_RATIO_window{stat="max"})`},
		// A query already in the new names, or a range the table cannot convert, is refused.
		{in: `DCGM_FI_DEV_GPU_TEMP_CELSIUS`, err: "already names DCGM_FI_DEV_GPU_TEMP_CELSIUS"},
		{in: `absent_over_time(DCGM_FI_DEV_GPU_TEMP[5m])`, err: "cannot convert"},
	} {
		got, err := Bilingual(c.in)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

func TestParseVocabularyRefusesBadRows(t *testing.T) {
	for _, c := range []struct{ text, err string }{
		{"A\tB\t\tC\tC\n", "5 columns, want 6"},
		{"A\tB\t\tC\tC\tsynonym\n", `kind "synonym"`},
		{"A\tB\t\tMHz\tHz\tbase-unit\n", "units MHz and Hz but conversion"},
		{"A\tB\t\tC\tC\talias\nA\tD\t\tC\tC\talias\n", "A already on line 1"},
	} {
		_, err := ParseVocabulary(c.text)
		assert.ErrorContains(t, err, c.err, c.text)
	}
	assert.NotEmpty(t, Vocabulary)
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// TestEveryDashboardQueryReadsBothVocabularies: in every query and variable
// of the generated dashboards, each renamed field is read under both names
// (as many selectors of the current name as of the legacy one), so a panel
// shows the same on a DCGM 4.7 exporter as on an older one.
func TestEveryDashboardQueryReadsBothVocabularies(t *testing.T) {
	read := 0
	for name, raw := range generated(t) {
		qs, vs, err := Extract(raw)
		require.NoError(t, err)
		exprs := map[string]string{}
		for _, q := range qs {
			exprs["panel "+q.Panel+" "+q.RefID] = q.Expr
		}
		for _, v := range vs {
			exprs["variable "+v.Name] = v.Query
		}
		for where, expr := range exprs {
			code := quoted.ReplaceAllStringFunc(expr, func(s string) string {
				if strings.Contains(s, "|") { // a __name__ regex names both
					return strings.ReplaceAll(strings.Trim(s, `"`), "|", " ")
				}
				return `""`
			})
			for _, v := range Terms() {
				l, c := countName(code, v.Legacy), countName(code, v.Current)
				assert.Equal(t, l, c, "%s: %s reads %s %d times and %s %d times: %s", name, where, v.Legacy, l, v.Current, c, expr)
				read += l
			}
		}
	}
	assert.Positive(t, read, "no dashboard query reads a renamed field")
}

func countName(expr, name string) int {
	n := 0
	for i := 0; ; {
		j := strings.Index(expr[i:], name)
		if j < 0 {
			return n
		}
		s, e := i+j, i+j+len(name)
		if (s == 0 || !nameChar(expr[s-1])) && (e == len(expr) || !nameChar(expr[e])) {
			n++
		}
		i = e
	}
}

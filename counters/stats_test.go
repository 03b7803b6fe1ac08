package counters

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryRegisteredStatisticParses: a counters line accepts each
// registered window statistic by its name, in any case, and a word that
// is none is refused with a message naming every one.
func TestEveryRegisteredStatisticParses(t *testing.T) {
	require.Len(t, AllStats, len(Statistics))
	for i, reg := range Statistics {
		t.Run(reg.Name, func(t *testing.T) {
			for _, word := range []string{reg.Name, strings.ToUpper(reg.Name)} {
				set, err := Parse("stats.csv", strings.NewReader("DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, "+word+"\n"))
				require.NoError(t, err, word)
				require.Len(t, set.Fields, 1)
				require.Equal(t, []Stat{AllStats[i]}, set.Fields[0].Stats, word)
				assert.Equal(t, reg.Name, set.Fields[0].Stats[0].String())
				assert.Equal(t, i, set.Fields[0].Stats[0].Index())
			}
		})
	}
	_, err := Parse("stats.csv", strings.NewReader("DCGM_FI_PROF_SM_ACTIVE, gauge, a, 100ms, p42\n"))
	require.Error(t, err)
	for _, reg := range Statistics {
		assert.Contains(t, err.Error(), " "+reg.Name, "the message names %s", reg.Name)
	}
}

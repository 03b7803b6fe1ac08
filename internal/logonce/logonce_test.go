package logonce

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDoLogsEachKeyOnceAndStaysBounded(t *testing.T) {
	s := New(3)
	calls := map[string]int{}
	for range 2 {
		for _, k := range []string{"a", "b", "a", "c", "d", "e"} {
			s.Do(k, func() { calls[k]++ })
		}
	}
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, calls, "repeats and keys past the bound are not logged")
	for i := range 100 {
		s.Do(strconv.Itoa(i), func() {})
	}
	assert.Equal(t, 3, s.Len())
}

package source

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/counters"
)

// TestRegistry: registered sources are found by name, listed sorted in
// messages and --source's help, their supports handed out; a name given
// twice, or a source without a name or an Open, is refused at init.
func TestRegistry(t *testing.T) {
	open := func(Env) (Source, error) { return nil, nil }
	support := func() counters.Support { return counters.Support{Source: "regtest-b"} }
	Register(Kind{Name: "regtest-b", Support: support, Open: open})
	Register(Kind{Name: "regtest-a", Usage: "regtest-a (first)", Open: open})
	Register(Kind{Name: "regtest-c", Open: open})

	k, ok := Lookup("regtest-b")
	require.True(t, ok)
	assert.Equal(t, "regtest-b", k.Name)
	_, ok = Lookup("regtest-z")
	assert.False(t, ok)
	assert.Equal(t, []string{"regtest-a", "regtest-b", "regtest-c"}, Names())
	assert.Equal(t, "regtest-a, regtest-b or regtest-c", OneOf(Names()))
	assert.Equal(t, "regtest-a (first), regtest-b, or regtest-c", Usage())
	require.Len(t, Supports(), 1)
	assert.Equal(t, "regtest-b", Supports()[0].Source)

	for name, k := range map[string]Kind{
		"twice":   {Name: "regtest-a", Open: open},
		"no name": {Open: open},
		"no open": {Name: "regtest-d"},
	} {
		assert.Panics(t, func() { Register(k) }, name)
	}
	_, ok = Lookup("regtest-d")
	assert.False(t, ok)
}

func TestOneOf(t *testing.T) {
	for _, tt := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a or b"},
		{[]string{"a", "b", "c"}, "a, b or c"},
	} {
		assert.Equal(t, tt.want, OneOf(tt.names))
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpIsReadable renders every help page and checks what a reader
// sees: no line wider than helpWidth, the serve flags in categories, and
// each of dcgm-exporter's other names and variables listed once.
func TestHelpIsReadable(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"counters", "list", "--help"},
		{"counters", "check", "--help"}, {"profiling", "pause", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, err := run(t, args...)
			require.NoError(t, err)
			for i, line := range strings.Split(out, "\n") {
				assert.LessOrEqual(t, len(line), helpWidth, "line %d: %q", i+1, line)
			}
		})
	}

	app := newApp()
	var buf bytes.Buffer
	app.Writer = &buf
	require.NoError(t, runApp(app, []string{"gpuscope", "--help"}))
	out := buf.String()
	for _, cat := range []string{catCollection, catLabels, catSources, catSim, catKubernetes, catWeb, catAPI, catLogging} {
		assert.Contains(t, out, "\n   "+cat+"\n", "category %q", cat)
	}
	assert.GreaterOrEqual(t, len(app.VisibleFlagCategories()), 4)
	for _, f := range app.Flags {
		names := f.Names()
		if names[0] == "help" || names[0] == "version" {
			continue
		}
		type categorized interface{ GetCategory() string }
		assert.NotEmpty(t, f.(categorized).GetCategory(), "--%s has no category", names[0])
		for _, a := range names[1:] {
			if len(a) > 1 {
				// dcgm-exporter's names in a list, a deprecated one at a
				// line's start.
				assert.Equal(t, 1, strings.Count(out, "--"+a+",")+strings.Count(out, "\n   --"+a+" "), "--%s (for --%s) is listed once", a, names[0])
			}
		}
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, v := range ev.GetEnvVars() {
				assert.Equal(t, 1, strings.Count(out, "$"+v+"]")+strings.Count(out, "$"+v+",")+strings.Count(out, "$"+v+"\n"),
					"$%s (for --%s) is listed once", v, names[0])
			}
		}
	}
}

func TestWrapWords(t *testing.T) {
	tests := []struct {
		text  string
		width int
		want  []string
	}{
		{"", 10, []string{""}},
		{"one two three", 20, []string{"one two three"}},
		{"one two three", 7, []string{"one two", "three"}},
		{"a-very-long-word fits alone", 5, []string{"a-very-long-word", "fits", "alone"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, wrapWords(tt.text, tt.width), tt.text)
	}
}

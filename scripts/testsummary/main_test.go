package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run as `go test -json` writes it: a passing test, a skipped one, a
// failing subtest, a package without tests, and a package that fails to
// build.
const run = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestOK"}
{"Action":"output","Package":"ex/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"ex/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"ex/a","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestNeedsGPU"}
{"Action":"output","Package":"ex/a","Test":"TestNeedsGPU","Output":"=== RUN   TestNeedsGPU\n"}
{"Action":"output","Package":"ex/a","Test":"TestNeedsGPU","Output":"--- SKIP: TestNeedsGPU (0.00s)\n"}
{"Action":"output","Package":"ex/a","Test":"TestNeedsGPU","Output":"    a_test.go:12: libdcgm.so.4 is installed here; this test covers hosts without it\n"}
{"Action":"skip","Package":"ex/a","Test":"TestNeedsGPU","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestTable"}
{"Action":"run","Package":"ex/a","Test":"TestTable/good"}
{"Action":"pass","Package":"ex/a","Test":"TestTable/good","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestTable/bad"}
{"Action":"output","Package":"ex/a","Test":"TestTable/bad","Output":"    a_test.go:30: got 2, want 3\n"}
{"Action":"fail","Package":"ex/a","Test":"TestTable/bad","Elapsed":0}
{"Action":"fail","Package":"ex/a","Test":"TestTable","Elapsed":0}
{"Action":"fail","Package":"ex/a","Elapsed":0.5}
{"Action":"start","Package":"ex/empty"}
{"Action":"output","Package":"ex/empty","Output":"?   \tex/empty\t[no test files]\n"}
{"Action":"skip","Package":"ex/empty","Elapsed":0}
{"ImportPath":"ex/broken [ex/broken.test]","Action":"build-output","Output":"broken_test.go:3:1: syntax error\n"}
{"Action":"start","Package":"ex/broken"}
{"Action":"output","Package":"ex/broken","Output":"FAIL\tex/broken [build failed]\n"}
{"Action":"fail","Package":"ex/broken","Elapsed":0,"FailedBuild":"ex/broken [ex/broken.test]"}
{"Action":"run","Package":"scripts/test.sh","Test":"gofmt"}
{"Action":"pass","Package":"scripts/test.sh","Test":"gofmt"}
{"Action":"run","Package":"scripts/test.sh","Test":"promtool"}
{"Action":"output","Package":"scripts/test.sh","Test":"promtool","Output":"promtool not found\n"}
{"Action":"skip","Package":"scripts/test.sh","Test":"promtool"}
`

func TestSummary(t *testing.T) {
	s, err := summarise(strings.NewReader(run))
	require.NoError(t, err)
	var out bytes.Buffer
	s.write(&out)
	text := out.String()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	assert.Equal(t, "3 passed, 3 failed, 2 skipped", lines[len(lines)-1], "the last line is the plain count CI reads")
	for _, want := range []string{
		"  libdcgm.so.4 is installed here; this test covers hosts without it\n    ex/a.TestNeedsGPU\n",
		"  promtool not found\n    scripts/test.sh.promtool\n",
		"  ex/a.TestTable\n  ex/a.TestTable/bad\n",
		"  ex/broken (failed outside any test: build error, panic or timeout)\n",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "ex/a (failed outside", "a package whose test failed is not counted twice")
	assert.NotContains(t, text, "ex/empty", "a package without tests is no test")
}

func TestSummaryOfAPassingRun(t *testing.T) {
	s, err := summarise(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Elapsed":0.1}
`))
	require.NoError(t, err)
	var out bytes.Buffer
	s.write(&out)
	assert.Equal(t, "== summary\nslowest (wall seconds, several running at once): p 0\n1 passed, 0 failed, 0 skipped\n", out.String())
	assert.Zero(t, s.failed())
}

func TestSummaryNamesABadLine(t *testing.T) {
	_, err := summarise(strings.NewReader("{\"Action\":\"pass\"}\nnot json\n"))
	require.ErrorContains(t, err, "line 2")
}

func TestStreamShowsResultsAndFailures(t *testing.T) {
	var events, out bytes.Buffer
	require.NoError(t, copyAndShow(strings.NewReader("go: downloading example.com/x v1.0.0\n"+run), &events, &out))
	shown := out.String()
	assert.Contains(t, shown, "go: downloading example.com/x v1.0.0\n", "a tool's own lines are shown")
	assert.Contains(t, shown, "got 2, want 3", "a failing test's output is shown")
	assert.Contains(t, shown, "broken_test.go:3:1: syntax error", "build errors are shown")
	assert.Contains(t, shown, "FAIL\tex/a\t0.500s")
	assert.NotContains(t, shown, "=== RUN   TestOK", "a passing test's output is not")
	assert.Equal(t, strings.Count(run, "\n"), strings.Count(events.String(), "\n"), "every event is kept, nothing else")
	s, err := summarise(&events)
	require.NoError(t, err)
	assert.Equal(t, 3, s.passed)
}

func TestCheckIsCountedAsATest(t *testing.T) {
	events := t.TempDir() + "/events.jsonl"
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"passes", []string{"sh", "-c", "echo fine"}, 0},
		{"fails", []string{"sh", "-c", "echo 'gofmt would change: x.go'; exit 3"}, 3},
		{"cannot start", []string{"/nonexistent/tool"}, 127},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		code, err := runCheck(tt.name, tt.args, events, &out)
		require.NoError(t, err)
		assert.Equal(t, tt.wantCode, code, tt.name)
	}
	f, err := os.Open(events)
	require.NoError(t, err)
	defer f.Close()
	s, err := summarise(f)
	require.NoError(t, err)
	assert.Equal(t, 1, s.passed)
	assert.Equal(t, []string{"scripts/test.sh.cannot start", "scripts/test.sh.fails"}, s.failedTests)
	_, err = runCheck("empty", nil, events, &bytes.Buffer{})
	assert.ErrorContains(t, err, "no command")
}

// TestSummaryNamesTheSlowest: the line before the count names the ten
// packages and checks that took longest, slowest first, with their times.
func TestSummaryNamesTheSlowest(t *testing.T) {
	var ev strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&ev, `{"Action":"pass","Package":"ex/p%02d","Elapsed":%d}`+"\n", i, i*10)
	}
	ev.WriteString(`{"Action":"pass","Package":"scripts/test.sh","Test":"go vet","Elapsed":115.4}` + "\n")
	ev.WriteString(`{"Action":"skip","Package":"ex/empty","Elapsed":0}` + "\n")
	s, err := summarise(strings.NewReader(ev.String()))
	require.NoError(t, err)
	var out bytes.Buffer
	s.write(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	assert.Equal(t, "slowest (wall seconds, several running at once): ex/p12 120, go vet 115, ex/p11 110, ex/p10 100, "+
		"ex/p09 90, ex/p08 80, ex/p07 70, ex/p06 60, ex/p05 50, ex/p04 40", lines[len(lines)-2])
	assert.Equal(t, "1 passed, 0 failed, 0 skipped", lines[len(lines)-1])
}

// Command testsummary reads `go test -json` events and reports them for
// people and for CI. With -stream it copies events from stdin to the file
// named by -events while printing each package's result and the output of
// each failing test as they happen. Without it, it reads the -events file and
// prints the summary: every failed test, every skipped test with the reason
// it gave, and as the last line "N passed, N failed, N skipped", which CI
// reads. It exits 1 when a test or a package failed.
//
// With -check NAME, it runs the command after "--", shows its output, and
// records it as a test NAME of the package scripts/test.sh, so that the
// checks that are not Go tests (gofmt, vet, promtool) are counted the same
// way.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string `json:",omitempty"`
	Test       string `json:",omitempty"`
	Output     string `json:",omitempty"`
	ImportPath string `json:",omitempty"`
	Elapsed    float64
}

func main() {
	stream := flag.Bool("stream", false, "copy events from stdin to -events, printing progress")
	events := flag.String("events", "", "file of go test -json events")
	check := flag.String("check", "", "run the command after -- and record it as this check")
	flag.Parse()
	if *events == "" {
		fmt.Fprintln(os.Stderr, "testsummary: -events is required")
		os.Exit(2)
	}
	if *check != "" {
		code, err := runCheck(*check, flag.Args(), *events, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		os.Exit(code)
	}
	if *stream {
		f, err := os.OpenFile(*events, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		if err := copyAndShow(os.Stdin, f, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		return
	}
	f, err := os.Open(*events)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	defer f.Close()
	s, err := summarise(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: %s: %v\n", *events, err)
		os.Exit(2)
	}
	s.write(os.Stdout)
	if s.failed() > 0 {
		os.Exit(1)
	}
}

// checkPackage is the package the checks of scripts/test.sh are counted in.
const checkPackage = "scripts/test.sh"

// runCheck runs args, copying its output to out, and appends its result to
// the events file as a test named name. It returns the command's exit code.
func runCheck(name string, args []string, events string, out io.Writer) (int, error) {
	if len(args) == 0 {
		return 0, fmt.Errorf("-check %s: no command after --", name)
	}
	var buf strings.Builder
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout = io.MultiWriter(out, &buf)
	cmd.Stderr = cmd.Stdout
	cmd.Stdin = os.Stdin
	start := time.Now()
	runErr := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(runErr, &exitErr):
		code = exitErr.ExitCode()
	case runErr != nil:
		// The command could not start at all: a failed check too.
		code = 127
		fmt.Fprintf(out, "%s: %v\n", args[0], runErr)
		buf.WriteString(runErr.Error() + "\n")
	}
	action := "pass"
	if code != 0 {
		action = "fail"
	}
	f, err := os.OpenFile(events, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return code, err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, e := range []event{
		{Action: "run", Package: checkPackage, Test: name},
		{Action: "output", Package: checkPackage, Test: name, Output: buf.String()},
		{Action: action, Package: checkPackage, Test: name, Elapsed: time.Since(start).Seconds()},
	} {
		if err := enc.Encode(e); err != nil {
			return code, fmt.Errorf("writing %s: %w", events, err)
		}
	}
	return code, nil
}

// testKey names one test of one package.
type testKey struct{ pkg, test string }

// copyAndShow copies events from r to w and prints, on out, a line per
// finished package and the output of every failing test, including build
// errors. Lines that are not events (a tool's own messages) are printed as
// they are and not copied.
func copyAndShow(r io.Reader, w, out io.Writer) error {
	outputs := map[testKey][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, string(line))
			continue
		}
		if _, err := fmt.Fprintf(w, "%s\n", line); err != nil {
			return fmt.Errorf("writing events: %w", err)
		}
		k := testKey{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "output":
			// Kept until the test (or, for output outside tests, the
			// package) ends, and printed only if it failed.
			outputs[k] = append(outputs[k], e.Output)
		case "fail":
			fmt.Fprint(out, strings.Join(outputs[k], ""))
			if e.Test == "" {
				fmt.Fprintf(out, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
			delete(outputs, k)
		case "pass", "skip":
			if e.Test == "" && e.Action == "pass" {
				fmt.Fprintf(out, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
			delete(outputs, k)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading events: %w", err)
	}
	return nil
}

// summary is what a run of tests came to.
type summary struct {
	passed int
	// failedTests are failed tests; failedPackages are packages that failed
	// with no failed test (a build error, a panic, a timeout).
	failedTests    []string
	failedPackages []string
	// skipped maps each skipped test to the reason it gave.
	skipped map[string]string
	// elapsed is each package's wall time, and each check's under its
	// own name: what a budget is measured by.
	elapsed map[string]float64
}

func (s *summary) failed() int { return len(s.failedTests) + len(s.failedPackages) }

// summarise counts the final result of every test, subtests included, in
// the events read from r.
func summarise(r io.Reader) (*summary, error) {
	s := &summary{skipped: map[string]string{}, elapsed: map[string]float64{}}
	outputs := map[testKey][]string{}
	result := map[testKey]string{}
	var order []testKey
	pkgFailed := map[string]bool{}
	pkgHasFailedTest := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		k := testKey{e.Package, e.Test}
		switch e.Action {
		case "output":
			if e.Test != "" {
				outputs[k] = append(outputs[k], e.Output)
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					pkgFailed[e.Package] = true
				}
				if e.Elapsed > 0 {
					s.elapsed[e.Package] = e.Elapsed
				}
				continue
			}
			if e.Package == checkPackage && e.Elapsed > 0 {
				s.elapsed[e.Test] = e.Elapsed
			}
			if _, seen := result[k]; !seen {
				order = append(order, k)
			}
			result[k] = e.Action
			if e.Action == "fail" {
				pkgHasFailedTest[e.Package] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, k := range order {
		name := k.pkg + "." + k.test
		switch result[k] {
		case "pass":
			s.passed++
		case "fail":
			s.failedTests = append(s.failedTests, name)
		case "skip":
			s.skipped[name] = skipReason(outputs[k])
		}
	}
	for pkg := range pkgFailed {
		if !pkgHasFailedTest[pkg] {
			s.failedPackages = append(s.failedPackages, pkg)
		}
	}
	sort.Strings(s.failedTests)
	sort.Strings(s.failedPackages)
	return s, nil
}

// skipReason is what a skipped test printed, without go test's own RUN and
// SKIP lines and without the file:line prefix of t.Skip.
func skipReason(lines []string) string {
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		if i := strings.Index(l, ": "); i > 0 && strings.Contains(l[:i], ".go:") {
			l = l[i+2:]
		}
		parts = append(parts, l)
	}
	if len(parts) == 0 {
		return "no reason given"
	}
	return strings.Join(parts, " ")
}

func (s *summary) write(w io.Writer) {
	fmt.Fprintln(w, "== summary")
	if len(s.skipped) > 0 {
		names := make([]string, 0, len(s.skipped))
		for n := range s.skipped {
			names = append(names, n)
		}
		sort.Strings(names)
		// Tests that skip for the same reason are listed under it once.
		byReason := map[string][]string{}
		var reasons []string
		for _, n := range names {
			r := s.skipped[n]
			if byReason[r] == nil {
				reasons = append(reasons, r)
			}
			byReason[r] = append(byReason[r], n)
		}
		fmt.Fprintf(w, "skipped (%d):\n", len(s.skipped))
		for _, r := range reasons {
			fmt.Fprintf(w, "  %s\n", r)
			for _, n := range byReason[r] {
				fmt.Fprintf(w, "    %s\n", n)
			}
		}
	}
	if s.failed() > 0 {
		fmt.Fprintf(w, "failed (%d):\n", s.failed())
		for _, n := range s.failedTests {
			fmt.Fprintf(w, "  %s\n", n)
		}
		for _, p := range s.failedPackages {
			fmt.Fprintf(w, "  %s (failed outside any test: build error, panic or timeout)\n", p)
		}
	}
	if slow := s.slowest(slowestShown); len(slow) > 0 {
		fmt.Fprintf(w, "slowest (wall seconds, several running at once): %s\n", strings.Join(slow, ", "))
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", s.passed, s.failed(), len(s.skipped))
}

// slowestShown is how many of the slowest packages and checks the summary
// names: the ones a cut of the test budget starts from.
const slowestShown = 10

// slowest names the n packages and checks that took longest, slowest
// first, each with its wall time.
func (s *summary) slowest(n int) []string {
	names := make([]string, 0, len(s.elapsed))
	for name := range s.elapsed {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if s.elapsed[names[i]] != s.elapsed[names[j]] {
			return s.elapsed[names[i]] > s.elapsed[names[j]]
		}
		return names[i] < names[j]
	})
	if len(names) > n {
		names = names[:n]
	}
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = fmt.Sprintf("%s %.0f", name, s.elapsed[name])
	}
	return out
}

package counters

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary bytes to the counters parser. Whatever the
// input, Parse returns without panicking, reports at most maxLineErrors
// problems with a line inside the file, and what it accepts is safe to
// serve: known field names and help text that is valid UTF-8 without line
// breaks, which Prometheus' text parser reads. The seeds are the shipped
// files and the hostile inputs of issue 13 (Latin-1 help, a byte-order
// mark, CR-only endings, a huge line, near-miss names); they run in every
// `go test`, and `make fuzz` explores from them.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"default-counters.csv", "dcp-metrics.csv"} {
		if b, err := os.ReadFile(filepath.Join("..", "etc", name)); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in \xb0C).\n",
		"\ufeffDCGM_FI_DEV_GPU_TEMP, gauge, t\n",
		"DCGM_FI_DEV_GPU_TEMP, gauge, t\rDCGM_FI_DEV_POWER_USAGE, gauge, p\r",
		"DCGM_FI_DEV_GPU_TEMP, gauge, \"quoted, with comma\", 100ms, max p99\n",
		"DCGM_FI_DEV_GPU_TEMQ, gauge, x\nDCGM_FI_DEV_GPU_TEMP, counter, x\nDCGM_FI_DEV_GPU_TEMP, gauge, x\n",
		"DCGM_FI_DRIVER_VERSION, label, d, 1s\n# comment\n\n",
		"DCGM_FI_DEV_GPU_TEMP, gauge, \"unterminated\n",
		"DCGM_FI_DEV_GPU_TEMP, gauge, t, 0x10, p101\n",
		strings.Repeat("DCGM_FI_DEV_GPU_TEMP, gauge, x\n", 300),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("fuzz.csv", bytes.NewReader(data))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if len(pe.Errors) == 0 || len(pe.Errors) > maxLineErrors {
				t.Fatalf("%d problems reported", len(pe.Errors))
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			for _, le := range pe.Errors {
				if le.Line < 0 || le.Line > lines {
					t.Fatalf("problem on line %d of a %d-line file: %v", le.Line, lines, le)
				}
			}
			return
		}
		if len(set.Fields) == 0 {
			t.Fatal("accepted a file without a field")
		}
		if len(set.Warnings) > maxWarnings+1 {
			t.Fatalf("%d warnings", len(set.Warnings))
		}
		for _, fd := range set.Fields {
			if _, ok := Lookup(fd.Name); !ok {
				t.Fatalf("accepted unknown field %q", fd.Name)
			}
			if !utf8.ValidString(fd.Help) || strings.ContainsAny(fd.Help, "\r\n") {
				t.Fatalf("accepted help text %q of %s", fd.Help, fd.Name)
			}
			if fd.Interval != 0 && fd.Interval < MinInterval {
				t.Fatalf("accepted interval %s", fd.Interval)
			}
		}
	})
}

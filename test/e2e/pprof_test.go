package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// TestHeapProfileOnlyWithPprof: gpuscope does not sample its heap unless
// --enable-pprof serves the profiles; with it, /debug/pprof/heap holds
// samples of the running exporter.
func TestHeapProfileOnlyWithPprof(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want int // HTTP status of /debug/pprof/heap
	}{
		{"without --enable-pprof", nil, http.StatusNotFound},
		{"with --enable-pprof", []string{"--enable-pprof"}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, _ := e2etest.GPUScope(t, append([]string{"--source=sim", "--collectors=../../etc/dcp-metrics.csv"}, tt.args...)...)
			status, body := get(t, base+"/debug/pprof/heap?debug=1")
			if status != tt.want {
				t.Fatalf("/debug/pprof/heap answered %d, want %d", status, tt.want)
			}
			if status != http.StatusOK {
				return
			}
			// The header line ends "@ heap/<2 x the sampling rate>": on, at
			// the Go runtime's default of 512 KiB, not the 0 of a process
			// that does not serve profiles.
			line, _, _ := strings.Cut(body, "\n")
			if !strings.HasSuffix(line, "@ heap/1048576") {
				t.Fatalf("heap profile header %q: sampling is not at the default rate", line)
			}
		})
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

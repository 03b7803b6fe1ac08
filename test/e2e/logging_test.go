package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
)

// TestOneLogFormatAndLevel starts the real binary with each log format and
// level: every line it writes, its web server's (exporter-toolkit) included,
// is in the chosen format, and the level filters the web server's lines too.
func TestOneLogFormatAndLevel(t *testing.T) {
	tests := []struct {
		format, level string
		// webLine says whether exporter-toolkit's info line "Listening on"
		// is written.
		webLine bool
	}{
		{"json", "info", true},
		{"json", "warn", false},
		{"text", "info", true},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.level, func(t *testing.T) {
			_, proc := e2etest.GPUScope(t, "--source", "sim", "--sim-gpus", "1", "--log-format", tt.format, "--log-level", tt.level)
			// The web server answers before it logs "Listening on": only
			// the output of the ended process holds every line.
			out := strings.TrimSpace(proc.Stop())
			var webLines int
			for line := range strings.SplitSeq(out, "\n") {
				if line == "" {
					continue
				}
				var level, msg string
				switch tt.format {
				case "json":
					var m map[string]any
					require.NoError(t, json.Unmarshal([]byte(line), &m), "a line that is not JSON: %q", line)
					level, _ = m["level"].(string)
					msg, _ = m["msg"].(string)
					if m["component"] == "web" {
						webLines++
					}
				case "text":
					require.True(t, strings.HasPrefix(line, "time="), "a line that is not logrus text: %q", line)
					if strings.Contains(line, "component=web") {
						webLines++
					}
				}
				if tt.format == "json" && tt.level == "warn" {
					assert.Contains(t, []string{"warning", "error"}, level, "a line below --log-level=warn: %s", msg)
				}
			}
			if tt.webLine {
				assert.Positive(t, webLines, "the web server's lines go through the same logger")
				assert.Contains(t, out, "Listening on")
			} else {
				assert.Zero(t, webLines, "the web server's info lines are filtered at warn")
				assert.NotContains(t, out, "Listening on")
			}
		})
	}
}

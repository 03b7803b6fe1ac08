package counters

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// namesInFile returns the field names of every line of a counters file,
// the commented-out field lines included.
func namesInFile(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "#"))
		name, _, found := strings.Cut(line, ",")
		name = strings.TrimSpace(name)
		if found && (strings.HasPrefix(strings.ToUpper(name), "DCGM_")) {
			names = append(names, name)
		}
	}
	require.NoError(t, sc.Err())
	return names
}

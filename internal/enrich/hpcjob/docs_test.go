package hpcjob

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gpuscope reads mapping files differently from dcgm-exporter, whose
// hpcMapper (internal/pkg/transformation/hpc.go: readFile, Process) keeps
// each line as it is and returns the error of a file it cannot read. The
// docs say so, with the bounds this package applies.
func TestDocsStateHowMappingFilesDiffer(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", name))
		require.NoError(t, err)
		return string(b)
	}
	var row string
	for _, l := range strings.Split(read("metrics.md"), "\n") {
		if strings.HasPrefix(l, "| HPC job mapping files") {
			row = l
		}
	}
	require.NotEmpty(t, row, "docs/metrics.md has no differences row for the HPC job mapping files")
	for _, want := range []string{"each line kept as it is", "fails the scrape's enrichment", "lines trimmed, blank lines skipped",
		"more than " + strconv.Itoa(maxJobsPerFile) + " IDs", "over " + strconv.Itoa(maxJobIDLen) + " bytes", "is skipped"} {
		assert.Contains(t, row, want)
	}
	k8s := strings.Join(strings.Fields(read("kubernetes.md")), " ")
	assert.Contains(t, k8s, "gpuscope trims each line, skips blank ones, and skips a file it cannot read")
	assert.Contains(t, k8s, "("+strconv.Itoa(maxJobsPerFile)+" IDs of at most "+strconv.Itoa(maxJobIDLen)+" bytes)")
}

// The behaviour the docs describe: surrounding space trimmed, blank lines
// skipped, an ID with a space refused with the file and line.
func TestMappingLinesAreTrimmedAndChecked(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"  slurm-1 \n\n\tslurm-2\n", []string{"slurm-1", "slurm-2"}, ""},
		{"slurm-1\nslurm 2\n", nil, "0:2: job ID"},
	} {
		got, err := parseJobs("0", strings.NewReader(tc.in))
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
}

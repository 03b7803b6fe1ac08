package hpcjob

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzReadJobs feeds arbitrary content to the parser of one HPC job mapping
// file (the scheduler's prolog writes them). It never panics, and every job
// ID it accepts can go into one hpc_job label: bounded in length and count,
// without the comma that joins them or any space.
func FuzzReadJobs(f *testing.F) {
	for _, s := range []string{
		"4711\n", "\n  8001 \n8002\n\n", "job-\xe9t\xe9\n", "a,b\n", "a b\n",
		strings.Repeat("x", maxJobIDLen+1) + "\n", strings.Repeat("1\n", maxJobsPerFile+1),
		"\r\n42\r\n", "\x00\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "/run/gpuscope/jobs/0"
		jobs, err := parseJobs(path, bytes.NewReader(data))
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(jobs) > maxJobsPerFile {
			t.Fatalf("%d jobs", len(jobs))
		}
		for _, j := range jobs {
			if j == "" || len(j) > maxJobIDLen || strings.ContainsAny(j, ", \t\n") {
				t.Fatalf("accepted job ID %q", j)
			}
		}
	})
}

package gpucheck

import (
	"fmt"
	"sort"
)

// Soak checks scrapes taken one after another from one gpuscope process:
// no read ever failed (gpuscope_sample_errors_total stays 0), no GPU was
// ever lost, the source stayed up, and the resident set stayed flat once
// warm (process_resident_memory_bytes, from the process itself).
func Soak(scrapes [][]byte) (Report, error) {
	c := &checker{}
	if len(scrapes) < 3 {
		return Report{}, fmt.Errorf("soak: %d scrapes; at least 3 are needed", len(scrapes))
	}
	var rss []float64
	gpus := map[string]bool{}
	for i, body := range scrapes {
		all, err := parse(body)
		if err != nil {
			return Report{}, fmt.Errorf("scrape %d: %w", i+1, err)
		}
		c.report.Series += len(all)
		for _, s := range all {
			switch {
			case s.name == "gpuscope_sample_errors_total" && s.value != 0:
				c.add(true, "soak", s.String(), "%v failed reads by scrape %d", s.value, i+1)
			case s.name == "gpuscope_gpu_lost":
				gpus[s.labels["gpu"]] = true
				if s.value != 0 {
					c.add(true, "soak", s.String(), "GPU reported lost in scrape %d", i+1)
				}
			case s.name == "gpuscope_source_up" && s.value != 1:
				c.add(true, "soak", s.String(), "source down in scrape %d", i+1)
			case s.name == "process_resident_memory_bytes":
				rss = append(rss, s.value)
			}
		}
	}
	c.checkRSS(rss)
	c.report.GPUs = len(gpus)
	return c.report, nil
}

// rssSlack is the growth of the resident set, past 10%, that the check
// lets pass: a few garbage-collection cycles' worth of heap.
const rssSlack = 4 << 20

// checkRSS compares the last third of the run with the middle third: the
// first third is warm-up (rings filling, the first scrape's buffers).
func (c *checker) checkRSS(rss []float64) {
	if len(rss) < 3 {
		c.add(true, "soak", "process_resident_memory_bytes", "in %d scrapes only; the resident set cannot be judged", len(rss))
		return
	}
	third := len(rss) / 3
	mid, last := median(rss[third:2*third]), median(rss[2*third:])
	c.report.Findings = append(c.report.Findings, Finding{Note: true, Check: "soak", Series: "process_resident_memory_bytes",
		Msg: fmt.Sprintf("first %.1f MiB, middle third %.1f MiB, last third %.1f MiB (medians), %d scrapes", rss[0]/(1<<20), mid/(1<<20), last/(1<<20), len(rss))})
	if last > mid*1.1+rssSlack {
		c.add(true, "soak", "process_resident_memory_bytes", "grew from %.1f MiB to %.1f MiB (medians of the middle and last thirds): more than 10%% + %d MiB", mid/(1<<20), last/(1<<20), rssSlack>>20)
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

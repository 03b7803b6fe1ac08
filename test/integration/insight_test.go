package integration

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/e2etest"
	"github.com/gpuscope/gpuscope/source/sim"
)

// The tolerances the insight metrics promise on the simulated workloads
// (docs/insight.md states them).
const (
	periodTolerance = 0.05 // relative
	stallTolerance  = 0.05 // absolute
)

var truthSeeds = []int64{1, 2, 3, 4, 5, 6}

// TestInsightFindsEachWorkloadKindsTruth runs every simulated workload kind
// across seeds and checks that the insight metrics find what the simulation
// does: the step period within 5% (and none where there are no steps), the
// stall share within 0.05, and the right dominant class. The table of truth
// against measured in docs/insight.md is this test's output; rerun with
// -update after a change and review the diff.
func TestInsightFindsEachWorkloadKindsTruth(t *testing.T) {
	type row struct {
		truthPeriod, periodErr, minConf []float64
		truthStall, stallErr            []float64
		truthBound                      string
		dominantRight                   int
		shares                          []float64
	}
	rows := map[sim.Workload]*row{}
	for _, seed := range truthSeeds {
		got, truths := kindsRun(t, seed, 0, 0)
		for i, tr := range truths {
			m := got[i]
			require.True(t, m.has, "seed %d %s: no insight series", seed, tr.Workload)
			r := rows[tr.Workload]
			if r == nil {
				r = &row{truthBound: tr.Bound}
				rows[tr.Workload] = r
			}
			name := fmt.Sprintf("seed %d %s", seed, tr.Workload)
			if tr.Period > 0 {
				require.Greater(t, m.period, 0.0, "%s: step period absent (confidence %.3f), want %.3f s", name, m.confidence, tr.Period)
				rel := math.Abs(m.period-tr.Period) / tr.Period
				assert.LessOrEqual(t, rel, periodTolerance, "%s: step period %.3f s, truth %.3f s", name, m.period, tr.Period)
				r.truthPeriod = append(r.truthPeriod, tr.Period)
				r.periodErr = append(r.periodErr, rel)
			} else {
				assert.Zero(t, m.period, "%s: a step period is reported for a workload without steps (confidence %.3f)", name, m.confidence)
			}
			r.minConf = append(r.minConf, m.confidence)
			d := math.Abs(m.stallRatio - tr.StallShare)
			assert.LessOrEqual(t, d, stallTolerance, "%s: stall ratio %.3f, truth %.3f", name, m.stallRatio, tr.StallShare)
			r.truthStall = append(r.truthStall, tr.StallShare)
			r.stallErr = append(r.stallErr, d)
			dom, share := m.dominant()
			assert.Equal(t, tr.Bound, dom, "%s: dominant class (bound ratios %v)", name, m.bound)
			if dom == tr.Bound {
				r.dominantRight++
			}
			r.shares = append(r.shares, share)
			sum := 0.0
			for _, v := range m.bound {
				sum += v
			}
			assert.InDelta(t, 1, sum, 0.001, "%s: bound ratios sum to %v", name, sum)
			if tr.StallShare > 0 {
				assert.Positive(t, m.stalls, "%s: stalls were counted", name)
			}
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "| workload | truth: step period | measured: max period error | truth: stall share | measured: max stall error | truth: bound by | measured: dominant class right | measured: dominant share | min confidence |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range sim.Kinds() {
		r := rows[k]
		period, perr := "none", "none reported"
		if len(r.truthPeriod) > 0 {
			period = fmt.Sprintf("%.2f–%.2f s", minOf(r.truthPeriod), maxOf(r.truthPeriod))
			perr = fmt.Sprintf("%.2f%%", 100*maxOf(r.periodErr))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f–%.2f | %.3f | %s | %d of %d | %.2f–%.2f | %.2f |\n",
			k, period, perr, minOf(r.truthStall), maxOf(r.truthStall), maxOf(r.stallErr), r.truthBound,
			r.dominantRight, len(truthSeeds), minOf(r.shares), maxOf(r.shares), minOf(r.minConf))
	}
	checkDocTable(t, "ground-truth", b.String())
}

// TestInsightDegradesRatherThanLies adds step jitter and sensor noise to the
// simulated workloads: the confidence falls and the period disappears, but a
// period that is reported stays within 5% of the truth, no stalls are
// invented, and the dominant class stays right.
func TestInsightDegradesRatherThanLies(t *testing.T) {
	noises := []float64{0, 0.05, 0.1, 0.2}
	jitters := []float64{0, 0.1, 0.2, 0.4}
	seeds := []int64{1, 2, 3}
	type cell struct {
		conf           []float64
		reported, runs int
		maxErr         float64
		maxStallErr    float64
	}
	cells := map[[2]int]*cell{}
	for ni, noise := range noises {
		for ji, jitter := range jitters {
			c := &cell{}
			cells[[2]int{ni, ji}] = c
			for _, seed := range seeds {
				got, truths := kindsRun(t, seed, jitter, noise)
				for i, tr := range truths {
					m := got[i]
					name := fmt.Sprintf("noise %.2f jitter %.1f seed %d %s", noise, jitter, seed, tr.Workload)
					dom, _ := m.dominant()
					assert.Equal(t, tr.Bound, dom, "%s: dominant class (bound ratios %v)", name, m.bound)
					assert.LessOrEqual(t, m.stallRatio, tr.StallShare+stallTolerance, "%s: stall ratio %.3f invents stalls (truth %.3f)", name, m.stallRatio, tr.StallShare)
					if tr.Period == 0 {
						assert.Zero(t, m.period, "%s: period reported for a workload without steps", name)
						continue
					}
					c.runs++
					c.conf = append(c.conf, m.confidence)
					c.maxStallErr = math.Max(c.maxStallErr, math.Abs(m.stallRatio-tr.StallShare))
					if m.period > 0 {
						c.reported++
						rel := math.Abs(m.period-tr.Period) / tr.Period
						c.maxErr = math.Max(c.maxErr, rel)
						assert.LessOrEqual(t, rel, periodTolerance, "%s: reported step period %.3f s, truth %.3f s (confidence %.3f)", name, m.period, tr.Period, m.confidence)
					}
				}
			}
		}
	}
	// Confidence falls as jitter grows, at every noise level, and as noise
	// grows, at every jitter level (means over seeds and periodic kinds; a
	// hundredth of slack for the draw of the noise).
	mean := func(ni, ji int) float64 { return meanOf(cells[[2]int{ni, ji}].conf) }
	for ni := range noises {
		for ji := 1; ji < len(jitters); ji++ {
			assert.LessOrEqual(t, mean(ni, ji), mean(ni, ji-1)+0.01, "noise %.2f: confidence rises from jitter %.1f to %.1f", noises[ni], jitters[ji-1], jitters[ji])
		}
	}
	for ji := range jitters {
		for ni := 1; ni < len(noises); ni++ {
			assert.LessOrEqual(t, mean(ni, ji), mean(ni-1, ji)+0.01, "jitter %.1f: confidence rises from noise %.2f to %.2f", jitters[ji], noises[ni-1], noises[ni])
		}
	}
	worst := cells[[2]int{len(noises) - 1, len(jitters) - 1}]
	assert.Less(t, worst.reported, worst.runs, "the noisiest, most jittered steps still report every period")

	var b strings.Builder
	fmt.Fprintf(&b, "| added noise | step jitter | mean confidence | periods reported | max error of a reported period | max stall error |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- |\n")
	for ni, noise := range noises {
		for ji, jitter := range jitters {
			c := cells[[2]int{ni, ji}]
			fmt.Fprintf(&b, "| ±%.2f | ±%.0f%% | %.2f | %d of %d | %.2f%% | %.3f |\n", noise, 50*jitter, meanOf(c.conf), c.reported, c.runs, 100*c.maxErr, c.maxStallErr)
		}
	}
	checkDocTable(t, "degradation", b.String())
}

// checkDocTable compares a generated table with the one between the markers
// of docs/insight.md, or writes it there with -update.
func checkDocTable(t *testing.T, name, table string) {
	t.Helper()
	path := filepath.Join(e2etest.RepoRoot(), "docs", "insight.md")
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	begin := "<!-- BEGIN " + name + " table: generated by go test ./test/integration -run Insight -update -->\n"
	end := "<!-- END " + name + " table -->"
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	require.True(t, i >= 0 && j > i, "%s: markers of the %s table are missing", path, name)
	cur := s[i+len(begin) : j]
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(s[:i+len(begin)]+table+s[j:]), 0o644))
		return
	}
	require.Equal(t, table, cur, "%s: the %s table differs from what the test measures; rerun with -update and review the diff", path, name)
}

func minOf(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[0] }
func maxOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)-1]
}
func meanOf(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

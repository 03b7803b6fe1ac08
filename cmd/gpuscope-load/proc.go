package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux fixes it
// at 100 for user space on every architecture Go supports, whatever the
// kernel's own tick rate.
const userHZ = 100

// procSample is one reading of a process's CPU time and resident memory.
type procSample struct {
	at       time.Time
	cpuTicks uint64 // utime + stime
	rssKiB   uint64
	// anonKiB is RssAnon: the heap and stacks, without the mapped binary
	// (RssFile), which the kernel may share and drop.
	anonKiB uint64
}

// readProc reads the CPU time from /proc/<pid>/stat and VmRSS from
// /proc/<pid>/status under root (normally /proc).
func readProc(root string, pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	statPath := fmt.Sprintf("%s/%d/stat", root, pid)
	b, err := os.ReadFile(statPath)
	if err != nil {
		return s, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	if s.cpuTicks, err = parseStatCPU(b); err != nil {
		return s, fmt.Errorf("%s: %w", statPath, err)
	}
	statusPath := fmt.Sprintf("%s/%d/status", root, pid)
	b, err = os.ReadFile(statusPath)
	if err != nil {
		return s, fmt.Errorf("reading memory of pid %d: %w", pid, err)
	}
	if s.rssKiB, s.anonKiB, err = parseStatusRSS(b); err != nil {
		return s, fmt.Errorf("%s: %w", statusPath, err)
	}
	return s, nil
}

// parseStatCPU returns utime+stime (fields 14 and 15 of proc(5)). The
// command name, field 2, may hold spaces and parentheses, so the fields are
// counted from its last closing parenthesis.
func parseStatCPU(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", truncate(b))
	}
	// After ")": field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(string(b[i+1:]))
	if len(rest) < 13 {
		return 0, fmt.Errorf("only %d fields after the command name, want at least 13", len(rest))
	}
	utime, err := strconv.ParseUint(rest[14-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("field 14 (utime) %q: %w", rest[14-3], err)
	}
	stime, err := strconv.ParseUint(rest[15-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("field 15 (stime) %q: %w", rest[15-3], err)
	}
	return utime + stime, nil
}

// parseStatusRSS returns the VmRSS and RssAnon lines of /proc/<pid>/status,
// in KiB; RssAnon is 0 on kernels before 4.5, which lack it.
func parseStatusRSS(b []byte) (rss, anon uint64, err error) {
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		for _, k := range []struct {
			prefix string
			dst    *uint64
		}{{"VmRSS:", &rss}, {"RssAnon:", &anon}} {
			v, ok := strings.CutPrefix(line, k.prefix)
			if !ok {
				continue
			}
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, 0, fmt.Errorf("line %q: want \"%s <n> kB\"", line, k.prefix)
			}
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("line %q: %w", line, err)
			}
			*k.dst = n
			found = found || k.prefix == "VmRSS:"
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if !found {
		return 0, 0, fmt.Errorf("no VmRSS line (is the process a zombie?)")
	}
	return rss, anon, nil
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// procStats summarises the samples of a run.
type procStats struct {
	// cpuPct is the CPU time used between the first and last sample, in %
	// of one core; cpuSec is that time in seconds, over wallSec.
	cpuPct, cpuSec, wallSec float64
	// rssMaxMiB and anonMaxMiB are the largest RSS and RssAnon seen.
	rssMaxMiB, anonMaxMiB float64
	// rssEarlyMiB and rssLateMiB are the median RSS of the first and last
	// quarter of the samples taken after the warm-up; driftPct is how much
	// the late one differs, in % of the early one.
	rssEarlyMiB, rssLateMiB, driftPct float64
	samples                           int
}

func summariseProc(s []procSample, warmup time.Duration) procStats {
	var st procStats
	st.samples = len(s)
	if len(s) == 0 {
		return st
	}
	for _, p := range s {
		st.rssMaxMiB = max(st.rssMaxMiB, float64(p.rssKiB)/1024)
		st.anonMaxMiB = max(st.anonMaxMiB, float64(p.anonKiB)/1024)
	}
	first, last := s[0], s[len(s)-1]
	st.cpuSec = float64(last.cpuTicks-first.cpuTicks) / userHZ
	if wall := last.at.Sub(first.at).Seconds(); wall > 0 {
		st.wallSec = wall
		st.cpuPct = st.cpuSec / wall * 100
	}
	var steady []procSample
	for _, p := range s {
		if p.at.Sub(first.at) >= warmup {
			steady = append(steady, p)
		}
	}
	if len(steady) < 4 {
		steady = s
	}
	q := max(len(steady)/4, 1)
	st.rssEarlyMiB = medianRSS(steady[:q])
	st.rssLateMiB = medianRSS(steady[len(steady)-q:])
	if st.rssEarlyMiB > 0 {
		st.driftPct = (st.rssLateMiB - st.rssEarlyMiB) / st.rssEarlyMiB * 100
	}
	return st
}

func medianRSS(s []procSample) float64 {
	v := make([]float64, len(s))
	for i, p := range s {
		v[i] = float64(p.rssKiB) / 1024
	}
	sort.Float64s(v)
	return percentile(v, 0.5)
}

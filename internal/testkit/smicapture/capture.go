// Package smicapture reads captures of nvidia-smi output: the banner
// separated sections that ../shared/compat/nvidia-smi-captures holds and
// scripts/take-capture.sh writes, with `nvidia-smi -q`, `--query-gpu` and
// `--query-compute-apps` taken idle and under load. Every value keeps its
// text; N/A, [Not Supported] and the like read as not supported.
package smicapture

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Capture is one capture file.
type Capture struct {
	File string
	// Header holds the "key: value" lines before the first section.
	Header map[string]string
	// Snapshots are the phases that have an `nvidia-smi -q` section, in file
	// order ("idle", "load").
	Snapshots []*Snapshot
	// NVLinks is the number of links `nvidia-smi nvlink -s` lists per GPU
	// index; a GPU without NVLink (or in MIG mode) has none.
	NVLinks map[int]int
}

// Snapshot is what one phase of the capture shows.
type Snapshot struct {
	Phase         string
	DriverVersion string
	CUDAVersion   string
	GPUs          []*GPU
}

// section is one banner-delimited block.
type section struct {
	phase, title, command string
	line                  int
	body                  []string
}

var bannerRe = regexp.MustCompile(`^#{20,}\s*$`)

// ParseFile reads a capture file.
func ParseFile(path string) (*Capture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", path, err)
	}
	c.File = path
	return c, nil
}

// Parse reads a capture.
func Parse(r io.Reader) (*Capture, error) {
	secs, header, err := split(r)
	if err != nil {
		return nil, err
	}
	c := &Capture{Header: header, NVLinks: map[int]int{}}
	byPhase := map[string]*Snapshot{}
	snap := func(phase string) *Snapshot {
		if s, ok := byPhase[phase]; ok {
			return s
		}
		s := &Snapshot{Phase: phase}
		byPhase[phase] = s
		c.Snapshots = append(c.Snapshots, s)
		return s
	}
	var csvs, apps []section
	for _, s := range secs {
		switch {
		case strings.HasPrefix(s.command, "nvidia-smi -q"):
			if err := parseQuery(snap(s.phase), s); err != nil {
				return nil, err
			}
		case strings.HasPrefix(s.command, "nvidia-smi --query-gpu="):
			csvs = append(csvs, s)
		case strings.HasPrefix(s.command, "nvidia-smi --query-compute-apps="):
			apps = append(apps, s)
		case strings.HasPrefix(s.command, "nvidia-smi nvlink -s"):
			parseNVLinks(c, s)
		}
	}
	if len(c.Snapshots) == 0 {
		return nil, fmt.Errorf("no `nvidia-smi -q` section")
	}
	for _, s := range csvs {
		sn, ok := byPhase[s.phase]
		if !ok {
			return nil, fmt.Errorf("line %d: --query-gpu section of phase %q has no -q section", s.line, s.phase)
		}
		if err := parseQueryGPU(sn, s); err != nil {
			return nil, err
		}
	}
	for _, s := range apps {
		if sn, ok := byPhase[s.phase]; ok {
			if err := parseApps(sn, s); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// split cuts the file into its sections: a banner, "# phase :: title" and
// "# $ command" lines, a banner, then the body up to the next banner.
func split(r io.Reader) ([]section, map[string]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	header := map[string]string{}
	var secs []section
	var cur *section
	inBanner, seenSection := false, false
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if bannerRe.MatchString(line) {
			if inBanner {
				inBanner = false
				continue
			}
			inBanner = true
			if cur != nil {
				secs = append(secs, *cur)
			}
			cur = &section{line: n}
			continue
		}
		if inBanner {
			text := strings.TrimPrefix(line, "# ")
			switch {
			case strings.HasPrefix(text, "$ "):
				cur.command = strings.TrimSpace(strings.TrimPrefix(text, "$ "))
			case strings.Contains(text, " :: "):
				phase, title, _ := strings.Cut(text, " :: ")
				cur.phase, cur.title = strings.TrimSpace(phase), strings.TrimSpace(title)
				seenSection = true
			}
			continue
		}
		if !seenSection {
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
				header[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			continue
		}
		if cur != nil {
			cur.body = append(cur.body, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if cur != nil && !inBanner {
		secs = append(secs, *cur)
	}
	return secs, header, nil
}

var nvlinkGPURe = regexp.MustCompile(`^GPU (\d+): `)
var nvlinkLinkRe = regexp.MustCompile(`^\s+Link \d+: `)

func parseNVLinks(c *Capture, s section) {
	gpu := -1
	for _, l := range s.body {
		if m := nvlinkGPURe.FindStringSubmatch(l); m != nil {
			fmt.Sscan(m[1], &gpu)
			c.NVLinks[gpu] += 0
			continue
		}
		if gpu >= 0 && nvlinkLinkRe.MatchString(l) && !strings.Contains(l, "inactive") {
			c.NVLinks[gpu]++
		}
	}
}

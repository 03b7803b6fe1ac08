// Package dump writes periodic debug dumps of what gpuscope read: the
// entities and the exposition, as JSON, optionally gzipped. It is
// dcgm-exporter's --dump-enabled (internal/pkg/debug/debug.go: JSON files,
// .json.gz when compressed, removed after --dump-retention hours), written
// on a timer rather than at every scrape, and bounded by a file count and
// their total size as well as by age.
package dump

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

const (
	prefix     = "gpuscope-dump-"
	timeLayout = "20060102T150405.000Z"
)

// DefaultMaxBytes bounds the dumps' total size when the configuration does
// not: a node with 16 GPUs and MIG writes about 4 MB a minute, 6 GB over
// 1,440 files, more than a /tmp should hold for a debugging aid.
const DefaultMaxBytes = 512 << 20

// Config says where and how often dumps are written and how long they stay.
type Config struct {
	Dir string
	// Retention is how long a dump is kept; 0 keeps dumps until MaxFiles.
	Retention time.Duration
	Compress  bool
	// Interval between dumps.
	Interval time.Duration
	// MaxFiles bounds the dumps kept, oldest removed first.
	MaxFiles int
	// MaxBytes bounds the total size of the dumps kept, oldest removed
	// first; the newest is kept whatever its size. DefaultMaxBytes when 0.
	MaxBytes int64
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	Log *logrus.Entry
}

// Snapshot returns what one dump holds; it must be JSON-serialisable.
type Snapshot func() any

// Dumper writes the dumps.
type Dumper struct {
	cfg  Config
	snap Snapshot
	seq  int
}

// New checks the configuration and creates the directory.
func New(cfg Config, snap Snapshot) (*Dumper, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("dump: no directory")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = 1440
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("dump directory %s: %w", cfg.Dir, err)
	}
	return &Dumper{cfg: cfg, snap: snap}, nil
}

// Run writes a dump every interval until ctx ends. A failed write is
// logged and retried at the next tick: dumps are a debugging aid, never a
// reason to stop.
func (d *Dumper) Run(ctx context.Context) {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if path, err := d.Once(); err != nil {
				d.cfg.Log.WithError(err).Warn("Writing a debug dump failed")
			} else {
				d.cfg.Log.WithField("file", path).Debug("Debug dump written")
			}
		}
	}
}

// Once writes one dump and removes the dumps past retention or the count.
func (d *Dumper) Once() (string, error) {
	now := d.cfg.Now().UTC()
	d.seq++
	name := fmt.Sprintf("%s%s-%d.json", prefix, now.Format(timeLayout), d.seq)
	if d.cfg.Compress {
		name += ".gz"
	}
	path := filepath.Join(d.cfg.Dir, name)
	if err := d.write(path); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("dump %s: %w", path, err)
	}
	if err := d.prune(now); err != nil {
		return path, fmt.Errorf("pruning dumps in %s: %w", d.cfg.Dir, err)
	}
	return path, nil
}

func (d *Dumper) write(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	var w io.Writer = f
	var gz *gzip.Writer
	if d.cfg.Compress {
		gz = gzip.NewWriter(f)
		w = gz
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	err = enc.Encode(d.snap())
	if gz != nil {
		if cerr := gz.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// prune removes this package's dumps older than the retention, then the
// oldest beyond MaxFiles or MaxBytes. Ages come from the names, so a copied
// or touched file keeps its age.
func (d *Dumper) prune(now time.Time) error {
	entries, err := os.ReadDir(d.cfg.Dir)
	if err != nil {
		return err
	}
	type dumpFile struct {
		name string
		at   time.Time
		size int64
	}
	var files []dumpFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || e.IsDir() {
			continue
		}
		stamp, _, ok := strings.Cut(strings.TrimPrefix(name, prefix), "-")
		if !ok {
			continue
		}
		at, err := time.Parse(timeLayout, stamp)
		if err != nil {
			continue
		}
		var size int64
		if fi, err := e.Info(); err == nil {
			size = fi.Size()
		}
		files = append(files, dumpFile{name, at, size})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].at.Before(files[j].at) })
	// keepFrom is the oldest file the size bound keeps, counted from the
	// newest, which always stays.
	keepFrom, total := len(files)-1, int64(0)
	for i := len(files) - 1; i >= 0; i-- {
		if total += files[i].size; total > d.cfg.MaxBytes && i < len(files)-1 {
			break
		}
		keepFrom = i
	}
	var firstErr error
	for i, f := range files {
		expired := d.cfg.Retention > 0 && now.Sub(f.at) > d.cfg.Retention
		if !expired && len(files)-i <= d.cfg.MaxFiles && i >= keepFrom {
			continue
		}
		if err := os.Remove(filepath.Join(d.cfg.Dir, f.name)); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

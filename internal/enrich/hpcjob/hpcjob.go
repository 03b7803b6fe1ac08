// Package hpcjob labels GPU series with the HPC job running on them, read
// from a mapping directory that the batch system's prolog and epilog
// scripts maintain (the dcgm-exporter convention): one file per GPU, named
// after the GPU index ("0") or, for a MIG instance, "<index>.<GPU instance>"
// ("0.3"), holding job IDs one per line.
package hpcjob

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/enrich/logonce"
	"github.com/gpuscope/gpuscope/source"
)

// LabelJob is the label added to GPU series.
const LabelJob = "hpc_job"

// Bounds on what is read, so a stray file in the directory cannot make a
// refresh allocate without limit.
const (
	maxFiles       = 4096
	maxFileBytes   = 64 << 10
	maxJobsPerFile = 64
	maxJobIDLen    = 128
	maxLogged      = 256
)

// DefaultInterval is the period of the background refresh.
const DefaultInterval = 5 * time.Second

var fileNameRe = regexp.MustCompile(`^(\d+)(?:\.(\d+))?$`)

// Option changes a default of New.
type Option func(*Enricher)

// WithInterval sets the refresh period.
func WithInterval(d time.Duration) Option { return func(e *Enricher) { e.interval = d } }

// WithLogger sets the logger.
func WithLogger(l logrus.FieldLogger) Option { return func(e *Enricher) { e.log = l } }

// Enricher implements enrich.Enricher with the hpc_job label.
type Enricher struct {
	dir      string
	interval time.Duration
	log      logrus.FieldLogger

	jobs atomic.Pointer[map[string][]string]
	gen  atomic.Uint64

	mu     sync.Mutex
	logged *logonce.Set

	errors  prometheus.Counter
	upDesc  *prometheus.Desc
	gpuDesc *prometheus.Desc
	up      atomic.Bool
}

// New returns an enricher reading dir; Run starts its refresh loop.
func New(dir string, opts ...Option) (*Enricher, error) {
	if dir == "" {
		return nil, fmt.Errorf("job mapping directory: empty path")
	}
	e := &Enricher{
		dir:      dir,
		interval: DefaultInterval,
		log:      logrus.StandardLogger(),
		logged:   logonce.New(maxLogged),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpuscope_hpc_job_mapping_errors_total",
			Help: "Failed reads of the HPC job mapping directory or its files.",
		}),
		upDesc: prometheus.NewDesc("gpuscope_hpc_job_mapping_up",
			"1 while the HPC job mapping directory can be read.", nil, nil),
		gpuDesc: prometheus.NewDesc("gpuscope_hpc_job_mapping_files",
			"GPU or MIG instance files with at least one job in the mapping directory.", nil, nil),
	}
	for _, o := range opts {
		o(e)
	}
	if e.interval < 100*time.Millisecond {
		return nil, fmt.Errorf("hpc job mapping refresh interval %s is below 100ms", e.interval)
	}
	e.log = e.log.WithField("component", "hpcjob")
	empty := map[string][]string{}
	e.jobs.Store(&empty)
	return e, nil
}

// LabelNames implements enrich.Enricher.
func (e *Enricher) LabelNames() []string { return []string{LabelJob} }

// Generation implements enrich.Enricher.
func (e *Enricher) Generation() uint64 { return e.gen.Load() }

// jobsOf returns the jobs holding an entity, in file order. A MIG instance
// reads the file "<gpu>.<gpu instance>", as dcgm-exporter does
// (internal/pkg/transformation/hpc.go); without one it takes its GPU's jobs: a
// job that holds the whole GPU holds its instances. NvSwitch links have none.
func (e *Enricher) jobsOf(ent *source.Entity) []string {
	m := *e.jobs.Load()
	if len(m) == 0 || ent == nil || ent.GPU < 0 {
		return nil
	}
	switch ent.Kind {
	case source.GPU, source.NVLink:
		if ent.Kind == source.NVLink && ent.Switch >= 0 {
			return nil
		}
		return m[strconv.Itoa(ent.GPU)]
	case source.GPUInstance, source.ComputeInstance:
		if v, ok := m[strconv.Itoa(ent.GPU)+"."+strconv.Itoa(ent.GPUInstanceID)]; ok {
			return v
		}
		return m[strconv.Itoa(ent.GPU)]
	}
	return nil
}

// Values implements enrich.Enricher: the first job holding the entity.
func (e *Enricher) Values(ent *source.Entity) []string {
	jobs := e.jobsOf(ent)
	if len(jobs) == 0 {
		return nil
	}
	return jobs[:1]
}

// ValueRows implements enrich.RowValuer: one row per job, so that a GPU
// shared by several jobs has one copy of each series per job, as
// dcgm-exporter's hpcMapper copies each metric per job.
func (e *Enricher) ValueRows(ent *source.Entity) [][]string {
	jobs := e.jobsOf(ent)
	if len(jobs) < 2 {
		return nil
	}
	rows := make([][]string, len(jobs))
	for i := range jobs {
		rows[i] = jobs[i : i+1]
	}
	return rows
}

// Run refreshes until ctx ends.
func (e *Enricher) Run(ctx context.Context) error {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		_ = e.Refresh()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads the directory once and publishes the mapping. A directory
// that cannot be read clears the labels: stale job IDs would be wrong.
func (e *Enricher) Refresh() error {
	next, err := e.read()
	if err != nil {
		e.errors.Inc()
		e.up.Store(false)
		e.logOnce("dir", func() {
			e.log.WithError(err).Warn("cannot read the HPC job mapping directory; series go without hpc_job (logged once)")
		})
		next = map[string][]string{}
	} else {
		e.up.Store(true)
	}
	old := e.jobs.Swap(&next)
	if !same(*old, next) {
		e.gen.Add(1)
	}
	return err
}

func (e *Enricher) read() (map[string][]string, error) {
	d, err := os.Open(e.dir)
	if err != nil {
		return nil, fmt.Errorf("job mapping directory %s: %w", e.dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(maxFiles)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("job mapping directory %s: %w", e.dir, err)
	}
	out := make(map[string][]string, len(names))
	for _, n := range names {
		if !fileNameRe.MatchString(n) {
			continue
		}
		jobs, err := readJobs(filepath.Join(e.dir, n))
		if err != nil {
			e.errors.Inc()
			e.logOnce("file/"+n, func() { e.log.WithError(err).Warn("cannot read an HPC job mapping file (logged once per file)") })
			continue
		}
		if len(jobs) > 0 {
			out[n] = jobs
		}
	}
	return out, nil
}

// readJobs reads the job IDs of one file: one per line, blank lines and
// surrounding space ignored, at most maxJobsPerFile.
func readJobs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hpc job file: %w", err)
	}
	defer f.Close()
	return parseJobs(path, f)
}

// parseJobs reads the job IDs of the file at path from r.
func parseJobs(path string, r io.Reader) ([]string, error) {
	var jobs []string
	sc := bufio.NewScanner(io.LimitReader(r, maxFileBytes))
	line := 0
	for sc.Scan() {
		line++
		id := strings.TrimSpace(sc.Text())
		if id == "" {
			continue
		}
		if len(id) > maxJobIDLen || strings.ContainsAny(id, ", \t") {
			return nil, fmt.Errorf("%s:%d: job ID %.40q is longer than %d bytes or holds ',' or spaces", path, line, id, maxJobIDLen)
		}
		if len(jobs) == maxJobsPerFile {
			return nil, fmt.Errorf("%s:%d: more than %d job IDs", path, line, maxJobsPerFile)
		}
		jobs = append(jobs, id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return jobs, nil
}

func (e *Enricher) logOnce(key string, f func()) { e.logged.Do(key, f) }

func same(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || len(w) != len(v) || (len(v) > 0 && v[0] != w[0]) {
			return false
		}
	}
	return true
}

// Describe implements prometheus.Collector.
func (e *Enricher) Describe(ch chan<- *prometheus.Desc) {
	ch <- e.upDesc
	ch <- e.gpuDesc
	e.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (e *Enricher) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if e.up.Load() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(e.upDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(e.gpuDesc, prometheus.GaugeValue, float64(len(*e.jobs.Load())))
	e.errors.Collect(ch)
}

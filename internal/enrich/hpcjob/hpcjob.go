// Package hpcjob labels GPU series with the HPC job running on them, read
// from a mapping directory that the batch system's prolog and epilog
// scripts maintain (the dcgm-exporter convention): one file per GPU, named
// after the GPU index ("0") or, for a MIG instance, "<index>.<GPU instance>"
// ("0.3"), holding job IDs one per line.
package hpcjob

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/internal/logonce"
	"github.com/gpuscope/gpuscope/source"
)

// LabelJob is the label added to GPU series.
const LabelJob = "hpc_job"

// Bounds on what is read, so a stray file in the directory cannot make a
// refresh allocate without limit. Every entry of the directory is looked
// at; maxFiles bounds the GPU and MIG files kept.
const (
	maxFiles       = 4096
	dirBatch       = 1024
	maxFileBytes   = 64 << 10
	maxJobsPerFile = 64
	maxJobIDLen    = 128
	maxLogged      = 256
	// maxGPUIndex bounds the GPU index of a file read before the node's
	// entity list is known: no node has more GPUs.
	maxGPUIndex = 63
)

// DefaultInterval is the period of the background refresh.
const DefaultInterval = 5 * time.Second

// DefaultReadTimeout bounds one read of the directory and its files: a
// local directory reads in milliseconds, one that takes seconds is a hung
// network mount.
const DefaultReadTimeout = 5 * time.Second

// settleTime is how long after its last change a file that reads empty or
// unparsable keeps the jobs last read from it: a prolog that rewrites it
// in place leaves it empty between truncating and writing.
const settleTime = time.Second

var fileNameRe = regexp.MustCompile(`^(\d+)(?:\.(\d+))?$`)

// Option changes a default of New.
type Option func(*Enricher)

// WithInterval sets the refresh period.
func WithInterval(d time.Duration) Option { return func(e *Enricher) { e.interval = d } }

// WithReadTimeout bounds each read of the directory.
func WithReadTimeout(d time.Duration) Option { return func(e *Enricher) { e.readTimeout = d } }

// WithEntities gives the node's entities: files naming a GPU or MIG
// instance not among them are neither read nor held. An empty list (not
// known yet) reads GPU indexes up to maxGPUIndex.
func WithEntities(f func() []*source.Entity) Option { return func(e *Enricher) { e.entities = f } }

// WithLogger sets the logger.
func WithLogger(l logrus.FieldLogger) Option { return func(e *Enricher) { e.log = l } }

// Enricher implements enrich.Enricher with the hpc_job label.
type Enricher struct {
	dir         string
	interval    time.Duration
	readTimeout time.Duration
	log         logrus.FieldLogger
	now         func() time.Time
	entities    func() []*source.Entity
	// open opens a mapping file for reading; openRegular.
	open func(path string) (io.ReadCloser, error)
	// inflight is closed when a read that outlived its timeout returns;
	// no other read starts before it has.
	inflight chan struct{}

	jobs atomic.Pointer[map[string][]string]
	gen  atomic.Uint64

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
		dir:         dir,
		interval:    DefaultInterval,
		readTimeout: DefaultReadTimeout,
		log:         logrus.StandardLogger(),
		now:         time.Now,
		open:        openRegular,
		logged:      logonce.New(maxLogged),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpuscope_hpc_job_mapping_errors_total",
			Help: "Failed reads of the HPC job mapping directory or its files.",
		}),
		upDesc: prometheus.NewDesc("gpuscope_hpc_job_mapping_up",
			"1 while the HPC job mapping directory can be read within the read timeout; 0 when it cannot and series go without hpc_job.", nil, nil),
		gpuDesc: prometheus.NewDesc("gpuscope_hpc_job_mapping_files",
			"GPU or MIG instance files with at least one job in the mapping directory.", nil, nil),
	}
	for _, o := range opts {
		o(e)
	}
	if e.interval < 100*time.Millisecond {
		return nil, fmt.Errorf("hpc job mapping refresh interval %s is below 100ms", e.interval)
	}
	if e.readTimeout <= 0 {
		return nil, fmt.Errorf("hpc job mapping read timeout %s: must be above 0", e.readTimeout)
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
// that cannot be read, or not within the read timeout, clears the labels:
// stale job IDs would be wrong.
func (e *Enricher) Refresh() error {
	prev := *e.jobs.Load()
	next, err := e.readBounded(prev)
	if err != nil {
		e.errors.Inc()
		e.up.Store(false)
		e.logOnce("dir/"+err.Error(), func() {
			e.log.WithError(err).Warn("cannot read the HPC job mapping directory; series go without hpc_job (logged once per problem)")
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

// readBounded reads the directory within the read timeout. A read past it
// is left to finish on its own, and no other starts until it has: at most
// one goroutine is ever stuck on the directory.
func (e *Enricher) readBounded(prev map[string][]string) (map[string][]string, error) {
	if e.inflight != nil {
		select {
		case <-e.inflight:
			e.inflight = nil
		default:
			return nil, fmt.Errorf("job mapping directory %s: an earlier read has not returned after %s (no answer)", e.dir, e.readTimeout)
		}
	}
	type result struct {
		m   map[string][]string
		err error
	}
	done := make(chan struct{})
	res := make(chan result, 1)
	go func() {
		defer close(done)
		m, err := e.read(prev)
		res <- result{m, err}
	}()
	timer := time.NewTimer(e.readTimeout)
	defer timer.Stop()
	select {
	case r := <-res:
		return r.m, r.err
	case <-timer.C:
		e.inflight = done
		return nil, fmt.Errorf("job mapping directory %s: no answer after %s", e.dir, e.readTimeout)
	}
}

// names returns the GPU and MIG file names of the directory, looking at
// every entry, at most maxFiles of them.
func (e *Enricher) names() ([]string, error) {
	keep := e.wanted()
	d, err := os.Open(e.dir)
	if err != nil {
		return nil, fmt.Errorf("job mapping directory %s: %w", e.dir, err)
	}
	defer d.Close()
	var out []string
	for {
		batch, err := d.Readdirnames(dirBatch)
		for _, n := range batch {
			if !keep(n) {
				continue
			}
			if len(out) == maxFiles {
				e.logOnce("too-many", func() {
					e.log.WithField("max", maxFiles).Warn("the HPC job mapping directory has more GPU files than are read; the others are left out (logged once)")
				})
				return out, nil
			}
			out = append(out, n)
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("job mapping directory %s: %w", e.dir, err)
		}
	}
}

// wanted returns the test a file name passes to be read: a GPU or MIG
// instance of the node, or, while the node's entities are not known, a GPU
// index up to maxGPUIndex. A directory of files naming GPUs that do not
// exist then costs a listing, not a parse and a copy of each.
func (e *Enricher) wanted() func(string) bool {
	var ents []*source.Entity
	if e.entities != nil {
		ents = e.entities()
	}
	if len(ents) == 0 {
		return func(n string) bool {
			m := fileNameRe.FindStringSubmatch(n)
			if m == nil {
				return false
			}
			idx, err := strconv.Atoi(m[1])
			return err == nil && idx <= maxGPUIndex
		}
	}
	known := make(map[string]bool, len(ents))
	for _, ent := range ents {
		if ent == nil || ent.GPU < 0 {
			continue
		}
		switch ent.Kind {
		case source.GPU:
			known[strconv.Itoa(ent.GPU)] = true
		case source.GPUInstance, source.ComputeInstance:
			known[strconv.Itoa(ent.GPU)] = true
			known[strconv.Itoa(ent.GPU)+"."+strconv.Itoa(ent.GPUInstanceID)] = true
		}
	}
	return func(n string) bool { return known[n] }
}

func (e *Enricher) read(prev map[string][]string) (map[string][]string, error) {
	names, err := e.names()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(names))
	for _, n := range names {
		path := filepath.Join(e.dir, n)
		jobs, err := e.readJobs(path)
		if (err != nil || len(jobs) == 0) && len(prev[n]) > 0 && e.midWrite(path) {
			out[n] = prev[n]
			continue
		}
		if err != nil {
			e.errors.Inc()
			e.logOnce("file/"+n+"/"+err.Error(), func() {
				e.log.WithError(err).Warn("cannot read an HPC job mapping file (logged once per file and problem)")
			})
			continue
		}
		if len(jobs) > 0 {
			out[n] = jobs
		}
	}
	return out, nil
}

// midWrite says whether the file changed within the settle time: read
// empty or cut, it is being rewritten.
func (e *Enricher) midWrite(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && e.now().Sub(fi.ModTime()) < settleTime
}

// errNotRegular is a mapping entry that is not a regular file.
var errNotRegular = errors.New("not a regular file; skipped")

// errLink is a mapping entry that is a symbolic or hard link.
var errLink = errors.New("a link (symbolic, or hard with more than one name); refused, the scheduler writes plain files")

// openRegular opens path without blocking (a FIFO would block an open for
// reading until a writer comes) and refuses anything but a regular file.
// Links are refused: every line read becomes a label on an endpoint that
// may be unauthenticated, so an entry must not lead to a file the
// exporter's user can read but the directory's writers cannot (a private
// key, /proc/self/cmdline).
func openRegular(path string) (io.ReadCloser, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("hpc job file %s: %w", path, errLink)
	}
	if err != nil {
		return nil, fmt.Errorf("hpc job file: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("hpc job file %s: %w", path, errNotRegular)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); err == nil && ok && st.Nlink > 1 {
		err = fmt.Errorf("hpc job file %s: %w", path, errLink)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readJobs reads the job IDs of one file: one per line, blank lines and
// surrounding space ignored, a repeated ID once, at most maxJobsPerFile.
func (e *Enricher) readJobs(path string) ([]string, error) {
	f, err := e.open(path)
	if err != nil {
		return nil, err
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
		if !printable(id) {
			return nil, fmt.Errorf("%s:%d: job ID %.40q holds a control character or is not UTF-8", path, line, id)
		}
		if slices.Contains(jobs, id) {
			// Twice the same job would be the same series twice.
			continue
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

// printable says whether a job ID can go into a label as it is: valid
// UTF-8 with no control character (a terminal escape, CR, NUL, DEL).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func (e *Enricher) logOnce(key string, f func()) { e.logged.Do(key, f) }

func same(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		// Every job counts: each is a copy of the GPU's series.
		if !ok || !slices.Equal(v, w) {
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

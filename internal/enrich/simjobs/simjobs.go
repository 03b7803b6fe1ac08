// Package simjobs attaches simulated HPC job labels (hpc_job, as
// --hpc-job-mapping-dir writes them) to simulated GPUs, so that a scenario
// can show a batch system's GPUs without one. It is used with --source=sim
// only.
package simjobs

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuscope/gpuscope/internal/enrich/hpcjob"
	"github.com/gpuscope/gpuscope/source"
)

// LabelNames are the labels the enricher writes: the one the HPC job
// enricher writes.
var LabelNames = []string{hpcjob.LabelJob}

// Enricher labels GPU series with the job that holds each GPU.
type Enricher struct {
	jobs map[int][]string
}

// New returns the enricher of a node where jobs[gpu] holds each GPU; GPUs
// left out have no job.
func New(jobs map[int]string) *Enricher {
	e := &Enricher{jobs: make(map[int][]string, len(jobs))}
	for gpu, job := range jobs {
		e.jobs[gpu] = []string{job}
	}
	return e
}

// LabelNames implements enrich.Enricher.
func (e *Enricher) LabelNames() []string { return LabelNames }

// Values implements enrich.Enricher: a GPU's job labels the GPU and its
// MIG instances, as a job file named after the GPU index does.
func (e *Enricher) Values(ent *source.Entity) []string { return e.jobs[ent.GPU] }

// Generation implements enrich.Enricher; the jobs never change.
func (e *Enricher) Generation() uint64 { return 1 }

// Describe implements prometheus.Collector; the enricher has no metrics.
func (e *Enricher) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (e *Enricher) Collect(chan<- prometheus.Metric) {}

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/engine/labelbudget"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/hpcjob"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/draslices"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podlabels"
	"github.com/gpuscope/gpuscope/source"
	"github.com/gpuscope/gpuscope/source/auto"
	"github.com/gpuscope/gpuscope/source/sim/simpods"
)

// openAuto serves DCGM when it connects and NVML otherwise, switching as the
// host engine comes and goes.
func openAuto(c *cli.Context, log *logrus.Entry, hostname string) (source.Source, error) {
	s, err := auto.New(
		func() (source.Source, error) { return openDCGM(c, log) },
		func() (source.Source, error) { return openNVML(c, log, hostname) },
		log,
	)
	if err != nil {
		return nil, fmt.Errorf("--source=auto: %w; to try gpuscope without a GPU, use --source=sim", err)
	}
	return s, nil
}

// openClusterEnrichers starts Kubernetes pod attribution and HPC job
// mapping when asked for. Both refresh in the background; a kubelet or a
// directory that goes away is reported in their metrics, never fatal.
func openClusterEnrichers(ctx context.Context, c *cli.Context, set *counters.Set, src source.Source, entities func() []*source.Entity, log *logrus.Entry, reg *prometheus.Registry) ([]enrich.Enricher, error) {
	var out []enrich.Enricher
	if c.Bool(flagKubernetes) {
		cfg := podattr.Config{
			Socket:               c.String(flagPodResources),
			ResourceNames:        c.StringSlice(flagResourceNames),
			RefreshInterval:      c.Duration(flagK8sRefresh),
			LabelGrace:           c.Duration(flagK8sLabelGrace),
			PodUIDLabel:          c.Bool(flagPodUID),
			SharedGPUAttribution: c.Bool(flagSharedAttribution),
			VirtualGPUs:          c.Bool(flagVirtualGPUs),
			ProcRoot:             c.String(flagProcRoot),
			Entities:             entities,
			Logger:               log,
		}
		if pl, ok := src.(source.ProcessLister); ok {
			cfg.Processes = pl.Processes
		}
		if c.Bool(flagDRA) {
			if w := openDRASlices(ctx, c, log); w != nil {
				cfg.DRA = w
			}
		}
		if c.String(flagPodLabels) != "" {
			w, err := openPodLabels(ctx, c, set, log, reg)
			if err != nil {
				return nil, err
			}
			cfg.PodLabels = w
		}
		pa, err := podattr.New(cfg)
		if err != nil {
			return nil, err
		}
		reg.MustRegister(pa)
		go func() {
			if err := pa.Run(ctx); err != nil && ctx.Err() == nil {
				log.WithError(err).Error("Pod attribution stopped")
			}
		}()
		out = append(out, pa)
	}
	if dir := c.String(flagHPCJobDir); dir != "" {
		hj, err := hpcjob.New(dir, hpcjob.WithLogger(log.WithField("component", "hpcjob")))
		if err != nil {
			return nil, fmt.Errorf("--%s %s: %w", flagHPCJobDir, dir, err)
		}
		reg.MustRegister(hj)
		go func() {
			if err := hj.Run(ctx); err != nil && ctx.Err() == nil {
				log.WithError(err).Error("HPC job mapping stopped")
			}
		}()
		out = append(out, hj)
	}
	return out, nil
}

// openDRASlices starts listing the NVIDIA DRA driver's ResourceSlices for
// --kubernetes-enable-dra. As in dcgm-exporter (transformation/kubernetes.go,
// NewPodMapper), a watcher that cannot start is a warning: the other pod
// labels are still served. With the node name given (--hostname or
// NODE_NAME, which the chart sets), only the node's slices are listed.
func openDRASlices(ctx context.Context, c *cli.Context, log *logrus.Entry) *draslices.Watcher {
	cfg := draslices.Config{Logger: log}
	if c.IsSet(flagHostname) {
		cfg.Node = c.String(flagHostname)
	}
	w, err := draslices.New(cfg)
	if err != nil {
		log.WithError(err).Warn("DRA pod labels are not available")
		return nil
	}
	go w.Run(ctx)
	log.WithField("node", cfg.Node).Info("Listing the gpu.nvidia.com ResourceSlices for DRA pod labels")
	return w
}

// checkPodLabels rejects --kubernetes.pod-labels without --kubernetes or
// with a bad regular expression before any source is opened.
func checkPodLabels(c *cli.Context, expr string) error {
	if expr == "" {
		return nil
	}
	if !c.Bool(flagKubernetes) {
		return fmt.Errorf("--%s needs --%s: pod labels go on the series of the pods the kubelet attributes GPUs to", flagPodLabels, flagKubernetes)
	}
	if _, err := podlabels.CompileAllowlist(expr); err != nil {
		return fmt.Errorf("--%s: %w", flagPodLabels, err)
	}
	return nil
}

// openPodLabels starts the watch of this node's pods on the API server. It
// runs until ctx ends; an API server that is away is reported in its
// metrics and retried, never fatal.
func openPodLabels(ctx context.Context, c *cli.Context, set *counters.Set, log *logrus.Entry, reg *prometheus.Registry) (*podlabels.Watcher, error) {
	if err := checkPodLabels(c, c.String(flagPodLabels)); err != nil {
		return nil, err
	}
	allow, err := podlabels.CompileAllowlist(c.String(flagPodLabels))
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagPodLabels, err)
	}
	room, err := podLabelRoom(c, set)
	if err != nil {
		return nil, err
	}
	log.WithFields(logrus.Fields{"max_pod_labels": room, "label_limit": labelbudget.Limit}).
		Info("Pod labels are capped so that no series carries more labels than the limit")
	node := c.String(flagHostname)
	if node == "" {
		if node, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("--%s: the node name is unknown (set --%s or NODE_NAME): %w", flagPodLabels, flagHostname, err)
		}
	}
	w, err := podlabels.New(podlabels.Config{Allowlist: allow, NodeName: node, MaxLabelsPerPod: room, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagPodLabels, err)
	}
	reg.MustRegister(w)
	go func() {
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			log.WithError(err).Error("Pod label watch stopped")
		}
	}()
	return w, nil
}

// podLabelRoom is how many pod labels fit on the widest series beside the
// identity, label-field and enricher labels this configuration puts there,
// under the limit that Mimir and Cortex enforce, counted by the engine's
// own count. An allowlist that names more keys than that, or a
// configuration that leaves no room, is an error at startup rather than
// series refused later by the remote store.
func podLabelRoom(c *cli.Context, set *counters.Set) (int, error) {
	widest := seriesShape(c, set).Widest()
	room := widest.Room()
	expr := c.String(flagPodLabels)
	if room < 1 {
		return 0, fmt.Errorf("--%s %q: no room for pod labels: a series of a %s already carries %d of the %d labels Mimir and Cortex accept (%s); %s",
			flagPodLabels, expr, widest.Kind, widest.Stored(), labelbudget.Limit, widest.Breakdown(), widest.Advice())
	}
	n, finite, err := labelbudget.AllowlistKeys(expr)
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", flagPodLabels, err)
	}
	if finite && n > room {
		return 0, fmt.Errorf("--%s %q matches up to %d label keys but only %d fit: a series of a %s already carries %d of the %d labels Mimir and Cortex accept (%s); name at most %d keys",
			flagPodLabels, expr, n, room, widest.Kind, widest.Stored(), labelbudget.Limit, widest.Breakdown(), room)
	}
	return min(room, podlabels.DefaultMaxLabelsPerPod), nil
}

// seriesShape is what the flags put on the engine's series, before the
// enrichers exist.
func seriesShape(c *cli.Context, set *counters.Set) engine.SeriesShape {
	shape := engine.SeriesShape{Counters: set, ComputeInstances: c.Bool(flagComputeInstances),
		OldNamespace: c.Bool(flagOldNamespace), Insight: c.Bool(flagInsight), Options: labelOptions()}
	if !c.Bool(flagNoHostname) {
		shape.HostnameLabel = c.String(flagHostnameLabel)
	}
	if c.Bool(flagSimPods) {
		shape.EnricherLabels = append(shape.EnricherLabels, simpods.LabelNames...)
	}
	if c.Bool(flagKubernetes) {
		shape.EnricherLabels = append(shape.EnricherLabels, podattr.LabelNames(c.Bool(flagPodUID), c.Bool(flagVirtualGPUs), c.Bool(flagDRA))...)
	}
	if c.String(flagHPCJobDir) != "" {
		shape.EnricherLabels = append(shape.EnricherLabels, hpcjob.LabelJob)
	}
	return shape
}

// labelOptions names the option that adds each label a user can drop, for
// the label-budget errors.
func labelOptions() map[string]string {
	m := map[string]string{
		"GPU_CI_ID":             "--" + flagComputeInstances,
		podattr.LabelPodUID:     "--" + flagPodUID,
		podattr.LabelVGPU:       "--" + flagVirtualGPUs,
		hpcjob.LabelJob:         "--" + flagHPCJobDir,
		labelbudget.ExtraOption: "--" + flagPodLabels,
	}
	for _, l := range podattr.DRALabels {
		m[l] = "--" + flagDRA
	}
	return m
}

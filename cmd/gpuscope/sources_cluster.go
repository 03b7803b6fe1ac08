package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/gpuscope/gpuscope/counters"
	"github.com/gpuscope/gpuscope/internal/config"
	"github.com/gpuscope/gpuscope/internal/engine"
	"github.com/gpuscope/gpuscope/internal/engine/labelbudget"
	"github.com/gpuscope/gpuscope/internal/enrich"
	"github.com/gpuscope/gpuscope/internal/enrich/hpcjob"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/draslices"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podattr"
	"github.com/gpuscope/gpuscope/internal/enrich/kube/podlabels"
	"github.com/gpuscope/gpuscope/source"
)

// openClusterEnrichers starts Kubernetes pod attribution and HPC job
// mapping when asked for. Both refresh in the background; a kubelet or a
// directory that goes away is reported in their metrics, never fatal.
func openClusterEnrichers(ctx context.Context, cfg *config.Config, set *counters.Set, src source.Source, entities func() []*source.Entity,
	log *logrus.Entry, reg *prometheus.Registry) ([]enrich.Enricher, error) {
	var out []enrich.Enricher
	if cfg.Kubernetes.Enabled {
		pa, err := openPodAttribution(ctx, cfg, set, src, entities, log, reg)
		if err != nil {
			return nil, err
		}
		out = append(out, pa)
	}
	if dir := cfg.HPCJobDir; dir != "" {
		hj, err := hpcjob.New(dir, hpcjob.WithLogger(log.WithField("component", "hpcjob")), hpcjob.WithEntities(entities))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cfg.Flag(config.FlagHPCJobDir), dir, err)
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

// openPodAttribution starts the kubelet's pod attribution, with DRA and pod
// labels when asked for.
func openPodAttribution(ctx context.Context, cfg *config.Config, set *counters.Set, src source.Source, entities func() []*source.Entity,
	log *logrus.Entry, reg *prometheus.Registry) (*podattr.Enricher, error) {
	k := cfg.Kubernetes
	// The options flags set as they are come with the configuration.
	pc := k.PodAttr
	pc.Entities, pc.Logger = entities, log
	if pl, ok := src.(source.ProcessLister); ok {
		pc.Processes = pl.Processes
	}
	if k.DRA {
		if w := openDRASlices(ctx, cfg, log); w != nil {
			pc.DRA = w
		}
	}
	if k.PodLabels != nil {
		w, err := openPodLabels(ctx, cfg, set, log, reg)
		if err != nil {
			return nil, err
		}
		pc.PodLabels = w
	}
	pa, err := podattr.New(pc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Flag(config.FlagKubernetes), err)
	}
	reg.MustRegister(pa)
	go func() {
		if err := pa.Run(ctx); err != nil && ctx.Err() == nil {
			log.WithError(err).Error("Pod attribution stopped")
		}
	}()
	return pa, nil
}

// openDRASlices starts listing the NVIDIA DRA driver's ResourceSlices for
// --kubernetes-enable-dra. As in dcgm-exporter (transformation/kubernetes.go,
// NewPodMapper), a watcher that cannot start is a warning: the other pod
// labels are still served. With the node name given (--hostname or
// NODE_NAME, which the chart sets), only the node's slices are listed.
func openDRASlices(ctx context.Context, cfg *config.Config, log *logrus.Entry) *draslices.Watcher {
	dc := draslices.Config{Logger: log}
	if cfg.Labels.HostnameGiven {
		dc.Node = cfg.Labels.Hostname
	}
	w, err := draslices.New(dc)
	if err != nil {
		log.WithError(err).WithField("flag", cfg.Flag(config.FlagDRA)).Warn("DRA pod labels are not available")
		return nil
	}
	go w.Run(ctx)
	log.WithField("node", dc.Node).Info("Listing the gpu.nvidia.com ResourceSlices for DRA pod labels")
	return w
}

// openPodLabels starts the watch of this node's pods on the API server. It
// runs until ctx ends; an API server that is away is reported in its
// metrics and retried, never fatal.
func openPodLabels(ctx context.Context, cfg *config.Config, set *counters.Set, log *logrus.Entry, reg *prometheus.Registry) (*podlabels.Watcher, error) {
	pl := cfg.Kubernetes.PodLabels
	room, err := podLabelRoom(cfg, set)
	if err != nil {
		return nil, err
	}
	log.WithFields(logrus.Fields{"max_pod_labels": room, "label_limit": labelbudget.Limit}).
		Info("Pod labels are capped so that no series carries more labels than the limit")
	w, err := podlabels.New(podlabels.Config{Allowlist: pl.Allowlist, NodeName: cfg.Labels.Hostname, MaxLabelsPerPod: room, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pl.Flag, err)
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
func podLabelRoom(cfg *config.Config, set *counters.Set) (int, error) {
	widest := seriesShape(cfg, set).Widest()
	room := widest.Room()
	flag, expr := cfg.Kubernetes.PodLabels.Flag, cfg.Kubernetes.PodLabels.Expr
	if room < 1 {
		return 0, fmt.Errorf("%s %q: no room for pod labels: a series of a %s already carries %d of the %d labels Mimir and Cortex accept (%s); %s",
			flag, expr, widest.Kind, widest.Stored(), labelbudget.Limit, widest.Breakdown(), widest.Advice())
	}
	n, finite, err := labelbudget.AllowlistKeys(expr)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", flag, err)
	}
	if finite && n > room {
		return 0, fmt.Errorf("%s %q matches up to %d label keys but only %d fit: a series of a %s already carries %d of the %d labels Mimir and Cortex accept (%s); name at most %d keys",
			flag, expr, n, room, widest.Kind, widest.Stored(), labelbudget.Limit, widest.Breakdown(), room)
	}
	return min(room, podlabels.DefaultMaxLabelsPerPod), nil
}

// seriesShape is what the configuration puts on the engine's series,
// before the enrichers exist.
func seriesShape(cfg *config.Config, set *counters.Set) engine.SeriesShape {
	k := cfg.Kubernetes
	shape := engine.SeriesShape{Counters: set, ComputeInstances: cfg.Engine.ComputeInstances,
		OldNamespace: cfg.Engine.OldNamespace, Insight: cfg.Engine.Insight.Enabled, Processes: cfg.Engine.Processes.Enabled, Options: labelOptions(cfg),
		HostnameLabel: cfg.Engine.HostnameLabel}
	shape.EnricherLabels = append(shape.EnricherLabels, simLabelNames(cfg)...)
	if k.Enabled {
		shape.EnricherLabels = append(shape.EnricherLabels, podattr.LabelNames(k.PodAttr.PodUIDLabel, k.PodAttr.VirtualGPUs, k.DRA)...)
	}
	if cfg.HPCJobDir != "" {
		shape.EnricherLabels = append(shape.EnricherLabels, hpcjob.LabelJob)
	}
	return shape
}

// labelOptions names the option that adds each label a user can drop, for
// the label-budget errors, as the user gave it.
func labelOptions(cfg *config.Config) map[string]string {
	podLabels := cfg.Flag(config.FlagPodLabels)
	if pl := cfg.Kubernetes.PodLabels; pl != nil {
		podLabels = pl.Flag
	}
	m := map[string]string{
		"GPU_CI_ID":             cfg.Flag(config.FlagComputeInstances),
		podattr.LabelPodUID:     cfg.Flag(config.FlagPodUID),
		podattr.LabelVGPU:       cfg.Flag(config.FlagVirtualGPUs),
		hpcjob.LabelJob:         cfg.Flag(config.FlagHPCJobDir),
		labelbudget.ExtraOption: podLabels,
	}
	for _, l := range podattr.DRALabels {
		m[l] = cfg.Flag(config.FlagDRA)
	}
	if pa := cfg.Kubernetes.PodAttr; pa.VirtualGPUs && !pa.PodUIDLabel {
		// The per-pod values of virtual GPUs carry pod_uid on their own.
		m[podattr.LabelPodUID] = cfg.Flag(config.FlagVirtualGPUs)
	}
	return m
}

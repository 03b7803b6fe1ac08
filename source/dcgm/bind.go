package dcgm

import (
	"slices"

	"github.com/sirupsen/logrus"
)

// pollGPUs lists the host engine's GPUs when the poll interval has passed
// and, when they differ from the connection's, discovers and watches the
// new set in place of the old one. It says whether the entities changed.
// Called with clientMu held.
//
// dcgm-exporter watches DCGM_FI_BIND_UNBIND_EVENT and answers each event
// with a full restart of DCGM and its collectors (internal/pkg/watcher/gpu.go,
// pkg/cmd/app.go handleGPUTopologyChange). Comparing the GPU list needs no
// DCGM 4.5 field and keeps the connection, the sample cursors and, in the
// engine, the series of the GPUs that stay.
func (s *Source) pollGPUs() bool {
	now := s.cfg.Clock.Now()
	if now.Before(s.nextGPUList) {
		return false
	}
	s.nextGPUList = now.Add(s.cfg.BindUnbindPoll)
	s.mu.Lock()
	up, old := s.up && !s.closed, s.conn
	s.mu.Unlock()
	if !up || old == nil {
		return false
	}
	gpus, err := s.client.GPUs()
	if err != nil {
		s.mu.Lock()
		s.handleErr(err)
		s.mu.Unlock()
		s.log.WithError(err).Debug("cannot list the GPUs for the bind/unbind watch")
		return false
	}
	if slices.Equal(gpus, old.gpus) {
		return false
	}
	conn, err := s.discover()
	if err != nil {
		s.log.WithError(err).Warn("the GPUs changed but cannot be discovered; looking again at the next poll")
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	plans, err := s.plan(conn, s.groups)
	if err != nil {
		s.teardown(conn)
		s.handleErr(err)
		s.log.WithError(err).Warn("the GPUs changed but cannot be watched; looking again at the next poll")
		// Look again at the next poll rather than comparing with a list
		// that was never watched.
		return false
	}
	s.teardown(old)
	s.conn, s.plans = conn, plans
	// A Watch waiting for clientMu sees the new generation and keeps
	// these plans, which were made from its groups.
	s.gen++
	for _, g := range gpus {
		if !slices.ContainsFunc(old.gpus, func(o GPUInfo) bool { return o == g }) {
			s.log.WithFields(logrus.Fields{"gpu": g.ID, "uuid": g.UUID, "model": g.Model}).Info("GPU bound; sampling it")
		}
	}
	for _, o := range old.gpus {
		if !slices.ContainsFunc(gpus, func(g GPUInfo) bool { return o == g }) {
			s.log.WithFields(logrus.Fields{"gpu": o.ID, "uuid": o.UUID}).Info("GPU unbound; its series are dropped")
		}
	}
	return true
}

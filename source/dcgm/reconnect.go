package dcgm

import (
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
)

// handleErr marks the source down when err says the host engine went away,
// and starts reconnecting. Called with mu held.
func (s *Source) handleErr(err error) {
	if !errors.Is(err, ErrConnectionLost) || !s.up {
		return
	}
	s.up = false
	s.err = err
	s.gen++
	s.publishStatusLocked()
	s.log.WithError(err).Warn("lost the DCGM host engine; reconnecting")
	if !s.reconnecting && !s.closed {
		s.reconnecting = true
		s.wg.Add(1)
		go s.reconnectLoop()
	}
}

func (s *Source) reconnectLoop() {
	defer s.wg.Done()
	wait := s.cfg.BackoffInitial
	for attempt := 1; ; attempt++ {
		// Jitter of +-20% keeps many exporters from reconnecting in step
		// after a shared host engine restarts.
		d := time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
		t := s.cfg.Clock.NewTimer(d)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C():
		}
		if s.tryReconnect(attempt) {
			return
		}
		wait = min(2*wait, s.cfg.BackoffMax)
	}
}

func (s *Source) tryReconnect(attempt int) bool {
	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.reconnecting = false
		s.mu.Unlock()
		return true
	}
	groups := slices.Clone(s.groups)
	seq := s.watchSeq
	paused := s.paused
	s.mu.Unlock()

	_ = s.client.Disconnect()
	conn, err := s.connect()
	var plans []*groupPlan
	if err == nil {
		s.mu.Lock()
		plans, err = s.plan(conn, groups)
		s.mu.Unlock()
	}
	if err == nil && paused {
		// A restarted host engine forgot the pause; take it again.
		err = s.client.PauseProfiling()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = err
		s.publishStatusLocked()
		s.log.WithError(err).WithField("attempt", attempt).Debug("reconnect to DCGM failed")
		return false
	}
	if seq != s.watchSeq {
		// Watch was called meanwhile with other groups; plan them now.
		s.teardown(conn)
		if plans, err = s.plan(conn, s.groups); err != nil {
			s.err = err
			return false
		}
	}
	s.conn, s.plans = conn, plans
	s.up, s.err, s.changed, s.reconnecting = true, nil, true, false
	s.gen++
	s.publishStatusLocked()
	s.log.WithFields(logrus.Fields{"attempt": attempt, "gpus": len(conn.gpus)}).Info("reconnected to the DCGM host engine")
	return true
}

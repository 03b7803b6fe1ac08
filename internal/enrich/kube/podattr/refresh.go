package podattr

import (
	"context"
	"time"
)

// RequestRefresh asks the loop for a refresh now, without waiting for it.
func (e *Enricher) RequestRefresh() {
	select {
	case e.trigger <- struct{}{}:
	default:
	}
}

// Run refreshes until ctx ends. It never returns an error for a kubelet
// that is away: that is reported in the metrics and logs and retried.
func (e *Enricher) Run(ctx context.Context) error {
	defer e.closeConn()
	t := time.NewTicker(e.cfg.RefreshInterval)
	defer t.Stop()
	for {
		_ = e.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-e.trigger:
		}
	}
}

// Refresh asks the kubelet once and publishes the result.
func (e *Enricher) Refresh(ctx context.Context) error {
	resp, err := e.list(ctx)
	if err != nil {
		e.refreshErrors.Inc()
		e.markDown(err)
		return err
	}
	s := e.build(resp)
	e.markUp()
	e.publish(s)
	return nil
}

// markDown reports the kubelet away. The last good pod map stays for
// LabelGrace after the last answer: dropping it at the first failed call
// would end every labelled series and start new ones a refresh later.
func (e *Enricher) markDown(err error) {
	e.up.Store(false)
	e.mu.Lock()
	first := !e.downLogd
	e.downLogd = true
	expired := e.lastGood.IsZero() || e.cfg.Now().Sub(e.lastGood) >= e.cfg.LabelGrace
	e.mu.Unlock()
	if expired {
		if old := e.snap.Load(); len(old.values) > 0 {
			e.log.WithField("grace", e.cfg.LabelGrace).Warn("kubelet pod-resources API still away after the grace period; serving GPU series without pod labels until it answers")
		}
		e.publish(&snapshot{})
	}
	if first {
		e.log.WithError(err).WithField("grace", e.cfg.LabelGrace).Warn("kubelet pod-resources API unavailable; keeping the last pod labels for the grace period")
	}
}

func (e *Enricher) markUp() {
	e.up.Store(true)
	e.lastSuccess.Store(time.Now().Unix())
	e.mu.Lock()
	e.lastGood = e.cfg.Now()
	wasDown := e.downLogd
	e.downLogd = false
	e.mu.Unlock()
	if wasDown {
		e.log.Info("kubelet pod-resources API answers again; pod labels restored")
	}
}

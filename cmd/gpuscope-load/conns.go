package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// connStats is what a run of held connections found.
type connStats struct {
	opened, ok, refused, failed int
	// closed counts connections the server closed before the run ended;
	// closeTimes are how long after opening it did.
	closed     int
	closeTimes []time.Duration
	rssHeldKiB uint64 // when every connection was open
	rssEndKiB  uint64 // when the run ended
}

// runConns opens n connections to host (host:port) and holds them until
// the server closes them or ctx ends. idle connections send one GET and
// then nothing (keep-alive clients that went quiet); slow ones send a
// request's headers one line a second and never finish (slowloris).
func runConns(ctx context.Context, host string, n int, slow bool, pid int, procRoot string) (connStats, error) {
	var (
		mu sync.Mutex
		st connStats
		wg sync.WaitGroup
	)
	opened := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
			if err != nil {
				mu.Lock()
				st.failed++
				mu.Unlock()
				opened <- struct{}{}
				return
			}
			defer conn.Close()
			go func() { <-ctx.Done(); conn.Close() }()
			t0 := time.Now()
			closedByServer := holdConn(ctx, conn, slow, &mu, &st, opened)
			if closedByServer {
				mu.Lock()
				st.closed++
				st.closeTimes = append(st.closeTimes, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case <-opened:
		case <-ctx.Done():
			i = n
		}
	}
	if pid > 0 {
		if s, err := readProc(procRoot, pid); err == nil {
			st.rssHeldKiB = s.rssKiB
		}
	}
	wg.Wait()
	if pid > 0 {
		if s, err := readProc(procRoot, pid); err == nil {
			st.rssEndKiB = s.rssKiB
		}
	}
	st.opened = n - st.failed
	return st, nil
}

// holdConn runs one connection; it reports whether the server closed it.
func holdConn(ctx context.Context, conn net.Conn, slow bool, mu *sync.Mutex, st *connStats, opened chan<- struct{}) bool {
	br := bufio.NewReader(conn)
	if !slow {
		_, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: gpuscope\r\n\r\n")
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(br, nil)
		}
		mu.Lock()
		switch {
		case err != nil:
			st.failed++
		case resp.StatusCode == http.StatusServiceUnavailable:
			st.refused++
		default:
			st.ok++
		}
		mu.Unlock()
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		opened <- struct{}{}
		if err != nil {
			return false
		}
		// Idle from here on: the next read ends when the server closes.
		_, err = br.ReadByte()
		return err != nil && ctx.Err() == nil
	}
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: gpuscope\r\n"); err != nil {
		opened <- struct{}{}
		return true
	}
	opened <- struct{}{}
	closed := make(chan struct{})
	go func() {
		_, _ = br.ReadByte() // a 408, an EOF or a reset: the server gave up
		close(closed)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return false
		case <-closed:
			return true
		case <-tick.C:
			if _, err := fmt.Fprintf(conn, "X-Slow-%d: x\r\n", i); err != nil {
				return true
			}
		}
	}
}

func (s connStats) line(mode string) string {
	sort.Slice(s.closeTimes, func(i, j int) bool { return s.closeTimes[i] < s.closeTimes[j] })
	last := 0.0
	if len(s.closeTimes) > 0 {
		last = s.closeTimes[len(s.closeTimes)-1].Seconds()
	}
	return fmt.Sprintf("mode=%s opened=%d answered=%d refused_503=%d failed=%d closed_by_server=%d still_open=%d last_close_s=%.1f rss_held_mib=%.1f rss_end_mib=%.1f",
		mode, s.opened, s.ok, s.refused, s.failed, s.closed, s.opened-s.closed, last,
		float64(s.rssHeldKiB)/1024, float64(s.rssEndKiB)/1024)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// hostileModes are the broken or hostile raw-sample API servers -hostile
// plays, to check that `gpuscope top` and `gpuscope capture` survive them.
var hostileModes = map[string]string{
	"mismatched":    "series whose t and v differ in length",
	"endless-event": "a stream event of endless short data lines",
	"silent":        "accepts connections and never answers",
	"silent-stream": "stream headers, then nothing",
	"escapes":       "terminal escapes in the host name, labels and a 401 body",
	"huge":          "a 1 GB answer",
	"extreme":       "values of ±1.7e308",
	"negative":      "timestamps before 1970",
}

func hostileModeList() string {
	names := make([]string, 0, len(hostileModes))
	for n := range hostileModes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// hostileLimit bounds what one hostile answer writes, however long the
// client reads.
const hostileLimit = int64(1) << 30

const hostileField = "DCGM_FI_PROF_SM_ACTIVE"

func hostileBody(mode string) string {
	t, v := "[1764536400000000000,1764536400100000000]", "[0.5,0.75]"
	host, labels := "node-1", `{"gpu":"0","modelName":"NVIDIA H100"}`
	switch mode {
	case "mismatched":
		t = "[1764536400000000000,1764536400100000000,1764536400200000000]"
	case "extreme":
		v = "[1.7e308,-1.7e308]"
	case "negative":
		t = "[-1000000,-1]"
	case "escapes":
		host = `node\u001b]0;owned\u0007\u001b[?1049l`
		labels = `{"gpu":"0","pod":"p\u001b[2J\u001b[31m","namespace":"ns","modelName":"m\u009b6n"}`
	}
	return `{"now":1764536401000000000,"hostname":"` + host + `","fields":[{"name":"` + hostileField + `","unit":"ratio","interval_ns":100000000}],` +
		`"entities":[{"key":"gpu/0","kind":"gpu","gpu":0,"labels":` + labels + `,"series":[{"field":"` + hostileField + `","t":` + t + `,"v":` + v + `}]}]}`
}

// hostileHandler answers every request the way mode says.
func hostileHandler(mode string, served *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		stream := strings.HasSuffix(r.URL.Path, "/stream")
		if r.URL.Query().Get("since") == "9223372036854775807" && mode != "silent" && mode != "escapes" {
			// gpuscope's clients ask whether a field is served this way.
			_, _ = w.Write([]byte(`{"now":1,"fields":[],"entities":[]}`))
			return
		}
		switch {
		case mode == "silent":
			<-r.Context().Done()
		case mode == "escapes" && stream:
			http.Error(w, "denied\x1b]0;owned\x07\x1b[?1049l", http.StatusUnauthorized)
		case mode == "huge":
			chunk := []byte(strings.Repeat(" ", 1<<20))
			_, _ = w.Write([]byte(`{"now":1,"pad":"`))
			for n := int64(0); n < hostileLimit && r.Context().Err() == nil; n += int64(len(chunk)) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case stream && (mode == "silent-stream" || mode == "endless-event"):
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			if mode == "silent-stream" {
				<-r.Context().Done()
				return
			}
			_, _ = w.Write([]byte("event: samples\n"))
			line := []byte("data: " + strings.Repeat("x", 1000) + "\n")
			for n := int64(0); n < hostileLimit && r.Context().Err() == nil; n += int64(len(line)) {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		case stream:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprintf(w, "event: samples\ndata: %s\n\n", hostileBody(mode))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			_, _ = w.Write([]byte(hostileBody(mode)))
		}
	}
}

// runHostile serves mode on the loopback address of url until ctx ends.
func runHostile(ctx context.Context, url, mode string) (string, error) {
	if _, ok := hostileModes[mode]; !ok {
		return "", fmt.Errorf("-hostile %q: unknown mode", mode)
	}
	u, err := checkLoopback(url)
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		return "", err
	}
	var served atomic.Int64
	srv := &http.Server{Handler: hostileHandler(mode, &served), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return "", err
	}
	return fmt.Sprintf("hostile=%s requests=%d", mode, served.Load()), nil
}

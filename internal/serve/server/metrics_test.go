package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsStreamsOneSnapshotWhileSamplesArrive: a scraper that reads
// slowly gets its body in pieces while the engine keeps sampling (the
// scrape holds no lock the sampling needs), and every value in the body is
// of the moment the scrape began, not a mix of that and later samples.
func TestMetricsStreamsOneSnapshotWhileSamplesArrive(t *testing.T) {
	const gpus = 256
	rig := newAPIRig(t, gpus, Options{})
	rig.collect(t, 5)
	atSnapshot := float64(rig.clk.Now().Sub(rig.start) / time.Millisecond)

	// A client whose socket takes little, reading the first bytes only.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(rig.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: gpuscope\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1024), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	head := make([]byte, 1024)
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)

	// The engine samples on while the scrape waits for its reader.
	sampled := make(chan error, 1)
	go func() {
		for range 5 {
			rig.clk.Add(100 * time.Millisecond)
			if err := rig.eng.CollectAll(context.Background()); err != nil {
				sampled <- err
				return
			}
		}
		sampled <- nil
	}()
	select {
	case err := <-sampled:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the sampling waited for a scrape whose reader was slow")
	}
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	body := append(head, rest...)
	require.Greater(t, len(body), 128<<10, "a body far larger than the sockets take, so the scrape was mid-body while the engine sampled")

	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	power := mfs["DCGM_FI_DEV_POWER_USAGE"].GetMetric()
	require.Len(t, power, gpus)
	for _, m := range power {
		gpu := ""
		for _, l := range m.Label {
			if l.GetName() == "gpu" {
				gpu = l.GetValue()
			}
		}
		var idx float64
		_, err := fmt.Sscan(gpu, &idx)
		require.NoError(t, err)
		assert.Equal(t, idx*1000+atSnapshot, m.GetGauge().GetValue(), "GPU %s: the value of the scrape's moment", gpu)
	}
}

// scriptedEngine returns the snapshots snap makes.
type scriptedEngine struct{ snap func(proto bool) Exposition }

func (e scriptedEngine) Snapshot(_ Exposition, proto bool) Exposition { return e.snap(proto) }
func (scriptedEngine) Ready() (bool, string)                          { return true, "up" }

// brokenSnapshot writes n bytes of series, then panics, as a bug in the
// formatting would.
type brokenSnapshot struct{ n int }

func (b brokenSnapshot) WriteText(w io.Writer) error {
	line := []byte("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n")
	for written := 0; written < b.n; written += len(line) {
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	panic("formatting the exposition failed")
}

func (b brokenSnapshot) WriteProto(w io.Writer) error { return b.WriteText(w) }

// TestMetricsNeverServesAFailedRenderAsWhole: a render that fails before
// the first byte is a 500 for every scrape that waited on it; one that
// fails after (the exposition is written as it is formatted) ends the
// connection without ending the body, so the scraper sees a truncated
// response, never a shorter exposition passed off as complete; with gzip,
// where the body is compressed before it is sent, the scrape that hit the
// failure and every later one of that body get no body at all.
func TestMetricsNeverServesAFailedRenderAsWhole(t *testing.T) {
	tests := []struct {
		name   string
		snap   func(bool) Exposition
		gzip   bool
		second bool // a second scrape of the same body
		code   int  // 0: the connection ends mid-response
	}{
		{"the snapshot fails", func(bool) Exposition { panic("the store is broken") }, false, false, http.StatusInternalServerError},
		{"the snapshot fails, gzip", func(bool) Exposition { panic("the store is broken") }, true, false, http.StatusInternalServerError},
		{"formatting fails after 100 KiB", func(bool) Exposition { return brokenSnapshot{n: 100 << 10} }, false, false, 0},
		{"formatting fails after 100 bytes", func(bool) Exposition { return brokenSnapshot{n: 100} }, false, false, 0},
		{"formatting fails while compressing", func(bool) Exposition { return brokenSnapshot{n: 100 << 10} }, true, false, 0},
		{"the same body again, gzip", func(bool) Exposition { return brokenSnapshot{n: 100 << 10} }, true, true, http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Options{Engine: scriptedEngine{snap: tt.snap}, Gatherer: prometheus.NewRegistry(), Log: quiet()})
			require.NoError(t, err)
			// Scrapes of one moment share a body.
			moment := time.Unix(1_700_000_000, 0)
			s.text.now = func() time.Time { return moment }
			srv := httptest.NewUnstartedServer(s.Handler())
			// net/http logs the panic it recovers.
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.Start()
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			scrape := func() (*http.Response, []byte, error) {
				req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
				require.NoError(t, err)
				if tt.gzip {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				resp, err := client.Do(req)
				if err != nil {
					return nil, nil, err
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				return resp, body, err
			}
			resp, body, err := scrape()
			if tt.second {
				require.Error(t, err, "the first scrape of the body hits the failure")
				resp, body, err = scrape()
			}
			if tt.code == 0 {
				require.Error(t, err, "the scraper must see the response end early; got %d bytes", len(body))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.code, resp.StatusCode)
			assert.Contains(t, string(body), "failed")
		})
	}
}

// TestMetricsContentLength: a body that fits in one write of net/http's
// buffer carries its length, as it always did, and so does a compressed
// body, which is made whole before it is sent; a larger plain body is
// written as it is formatted, chunked, and arrives whole.
func TestMetricsContentLength(t *testing.T) {
	line := "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n"
	tests := []struct {
		name    string
		body    string
		gzip    bool
		length  bool
		chunked bool
	}{
		{"small", line, false, true, false},
		{"large", strings.Repeat(line, 10_000), false, false, true},
		{"small, gzip", line, true, true, false},
		{"large, gzip", strings.Repeat(line, 10_000), true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Options{Engine: &fakeEngine{body: tt.body}, Log: quiet()})
			require.NoError(t, err)
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
			require.NoError(t, err)
			if tt.gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			if tt.length {
				assert.Equal(t, int64(len(raw)), resp.ContentLength)
			} else {
				assert.Equal(t, int64(-1), resp.ContentLength)
			}
			assert.Equal(t, tt.chunked, len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked")
			if tt.gzip {
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				require.NoError(t, err)
				raw, err = io.ReadAll(zr)
				require.NoError(t, err)
			}
			assert.Equal(t, tt.body, string(raw), "the body arrives whole")
		})
	}
}

// countingGatherer counts its gatherings.
type countingGatherer struct {
	prometheus.Gatherer
	n atomic.Int32
}

func (g *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.n.Add(1)
	return g.Gatherer.Gather()
}

// TestSampledFamiliesAreNotGatheredPerScrape: the families of Sampled (the
// Go runtime's and the process's in gpuscope) are in every exposition, in
// both formats, gathered once per period and not for each of the scrapes
// in between, while those of Gatherer are gathered for each exposition.
func TestSampledFamiliesAreNotGatheredPerScrape(t *testing.T) {
	live, sampled := prometheus.NewRegistry(), prometheus.NewRegistry()
	live.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuscope_live", Help: "l"}))
	sampled.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "process_sampled", Help: "s"}))
	lg, sg := &countingGatherer{Gatherer: live}, &countingGatherer{Gatherer: sampled}
	eng := &fakeEngine{body: "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n", fams: fakeFamilies}
	s, err := New(Options{Engine: eng, Gatherer: lg, Sampled: sg, SampleOwnEvery: time.Hour, Protobuf: true, Log: quiet()})
	require.NoError(t, err)
	now := time.Unix(1_700_000_000, 0)
	s.text.now = func() time.Time { return now }
	s.proto.now = s.text.now
	for i := range 10 {
		// Each scrape past the reuse of the last body renders anew.
		now = now.Add(reuseBodyFor)
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if i%2 == 1 {
			req.Header.Set("Accept", prometheusAccept)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		mfs := decodeAny(t, rec)
		assert.Contains(t, mfs, "gpuscope_live")
		assert.Contains(t, mfs, "process_sampled")
	}
	assert.Equal(t, int32(10), lg.n.Load(), "live families are gathered for each exposition")
	assert.Equal(t, int32(1), sg.n.Load(), "sampled families are gathered once a period")
}

// decodeAny reads a /metrics response in the format it declares.
func decodeAny(t *testing.T, rec *httptest.ResponseRecorder) map[string]*dto.MetricFamily {
	t.Helper()
	format := expfmt.ResponseFormat(rec.Header())
	dec := expfmt.NewDecoder(bytes.NewReader(rec.Body.Bytes()), format)
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			return out
		} else {
			require.NoError(t, err, format)
		}
		out[mf.GetName()] = &mf
	}
}

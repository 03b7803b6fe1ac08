package sampleapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Bounds a client holds a server to, so that a broken or hostile server
// can neither hang it nor fill its memory.
const (
	// DefaultMaxEventBytes bounds one answer or stream event: a full
	// answer of MaxFields fields on a large node stays well under it.
	DefaultMaxEventBytes = 64 << 20
	// DefaultDialTimeout bounds connecting, TLS included.
	DefaultDialTimeout = 10 * time.Second
	// DefaultHeaderTimeout bounds the wait for an answer's headers: the
	// server answers at once, a stream's headers included.
	DefaultHeaderTimeout = 15 * time.Second
	// DefaultStreamIdleTimeout is the longest a stream may stay silent:
	// the server sends a keep-alive every 15 s, so two missed in a row mean
	// the values shown are no longer live.
	DefaultStreamIdleTimeout = 32 * time.Second
	// DefaultFetchTimeout bounds a whole /api/v1/samples answer.
	DefaultFetchTimeout = 2 * time.Minute
)

// Client reads the raw-sample API of a running gpuscope.
type Client struct {
	// Base is the server's URL, "http://localhost:9400"; a bare host:port
	// is taken as http.
	Base               string
	Username, Password string
	// InsecureSkipVerify accepts any TLS certificate (a self-signed one
	// behind a port-forward).
	InsecureSkipVerify bool
	// HTTP is the client to use; one with the timeouts below is built when
	// nil (it has no overall timeout: streams last as long as they are
	// read).
	HTTP *http.Client
	// Bounds; 0 means the Default of each.
	MaxEventBytes     int
	DialTimeout       time.Duration
	HeaderTimeout     time.Duration
	StreamIdleTimeout time.Duration
	FetchTimeout      time.Duration
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func (c *Client) maxEvent() int { return orDefault(c.MaxEventBytes, DefaultMaxEventBytes) }
func (c *Client) headerTimeout() time.Duration {
	return orDefault(c.HeaderTimeout, DefaultHeaderTimeout)
}
func (c *Client) streamIdle() time.Duration {
	return orDefault(c.StreamIdleTimeout, DefaultStreamIdleTimeout)
}
func (c *Client) fetchTimeout() time.Duration { return orDefault(c.FetchTimeout, DefaultFetchTimeout) }
func (c *Client) dialTimeout() time.Duration  { return orDefault(c.DialTimeout, DefaultDialTimeout) }

// BaseURL normalises an --address: "host:port" becomes "http://host:port".
func BaseURL(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("no address")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("address %q: use http:// or https://", addr)
	}
	if u.Host == "" {
		return "", fmt.Errorf("address %q: no host", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: c.dialTimeout(), KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = c.dialTimeout()
	// The server's headers come at once; the body may then take long.
	tr.ResponseHeaderTimeout = c.headerTimeout()
	if c.InsecureSkipVerify {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // asked for with --insecure-skip-verify
	}
	c.HTTP = &http.Client{Transport: tr}
	return c.HTTP
}

// Values returns the URL parameters of a query.
func (q Query) Values() url.Values {
	v := url.Values{}
	for _, f := range q.Fields {
		v.Add("field", f)
	}
	for _, g := range q.GPUs {
		v.Add("gpu", strconv.Itoa(g))
	}
	if q.Since > 0 {
		v.Set("since", strconv.FormatInt(q.Since, 10))
	}
	return v
}

func (c *Client) get(ctx context.Context, path string, q Query) (*http.Response, error) {
	base, err := BaseURL(c.Base)
	if err != nil {
		return nil, err
	}
	u := base + path + "?" + q.Values().Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if c.Username != "" {
		req.SetBasicAuth(c.Username, c.Password)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
			return nil, fmt.Errorf("%s: no answer within %s: %w", base+path, c.headerTimeout(), err)
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, &StatusError{Code: resp.StatusCode, URL: base + path, Msg: Printable(msg)}
	}
	return resp, nil
}

// TooLargeAnswerError is an answer or event past the client's bound.
type TooLargeAnswerError struct {
	What string
	Max  int
}

func (e *TooLargeAnswerError) Error() string {
	return fmt.Sprintf("%s too large: more than %d bytes; ask for fewer fields, fewer GPUs or a shorter past", e.What, e.Max)
}

// Permanent says whether asking again the same way would fail the same
// way: an answer too large, or a refusal other than "busy" or "timed out".
// A client retries only the others.
func Permanent(err error) bool {
	var tl *TooLargeAnswerError
	if errors.As(err, &tl) {
		return true
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 400 && se.Code < 500 && se.Code != http.StatusTooManyRequests && se.Code != http.StatusRequestTimeout
	}
	return false
}

// StatusError is an answer other than 200.
type StatusError struct {
	Code int
	URL  string
	Msg  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s answered %d %s: %s", e.URL, e.Code, http.StatusText(e.Code), e.Msg)
}

// Fetch reads /api/v1/samples.
func (c *Client) Fetch(ctx context.Context, q Query) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.fetchTimeout())
	defer cancel()
	resp, err := c.get(ctx, "/api/v1/samples", q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	limit := c.maxEvent()
	if resp.ContentLength > int64(limit) {
		return nil, &TooLargeAnswerError{What: "the answer", Max: limit}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("reading samples: %w", err)
	}
	if len(body) > limit {
		return nil, &TooLargeAnswerError{What: "the answer", Max: limit}
	}
	return Decode(body)
}

// errStreamIdle ends a stream that sent nothing, not even a keep-alive, for
// longer than the client waits.
var errStreamIdle = errors.New("nothing from the stream")

// Stream reads /api/v1/stream and calls fn with each event's samples until
// ctx ends, fn returns an error, or the server ends the stream (an error
// event or a closed connection, returned as an error). Events leave out
// what earlier ones said (StreamDecoder); fn sees whole Results.
func (c *Client) Stream(ctx context.Context, q Query, fn func(*Result) error) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := c.get(sctx, "/api/v1/stream", q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	idle := c.streamIdle()
	watchdog := time.AfterFunc(idle, func() { cancel(errStreamIdle) })
	defer watchdog.Stop()
	err = c.readEvents(resp.Body, func() { watchdog.Reset(idle) }, fn)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(context.Cause(sctx), errStreamIdle) {
		return fmt.Errorf("%w for %s (the server sends a keep-alive every 15 s)", errStreamIdle, idle)
	}
	return err
}

// readEvents splits the stream into events, bounding each (its lines
// together, not only each line), and calls alive after every line.
func (c *Client) readEvents(body io.Reader, alive func(), fn func(*Result) error) error {
	limit := c.maxEvent()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), limit+len("data: ")+1)
	var event string
	var data bytes.Buffer
	var dec StreamDecoder
	for sc.Scan() {
		alive()
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 {
				if err := dispatch(event, data.Bytes(), &dec, fn); err != nil {
					return err
				}
			}
			event = ""
			data.Reset()
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			chunk := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if data.Len()+1+len(chunk) > limit {
				return &TooLargeAnswerError{What: "a stream event", Max: limit}
			}
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(chunk)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &TooLargeAnswerError{What: "a stream event", Max: limit}
		}
		return fmt.Errorf("reading the stream: %w", err)
	}
	return errors.New("the server ended the stream")
}

func dispatch(event string, data []byte, dec *StreamDecoder, fn func(*Result) error) error {
	switch event {
	case "error":
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("stream: %s", Printable(e.Error))
		}
		return fmt.Errorf("stream: %s", Printable(string(data)))
	case "samples", "":
		r, err := Decode(data)
		if err != nil {
			return err
		}
		dec.Expand(r)
		return fn(r)
	}
	return nil
}

// Served checks which of fields the server answers for. A field it refuses
// (not in its counters file, unknown) is in refused with the server's
// reason; any other failure is an error.
func (c *Client) Served(ctx context.Context, fields []string) (served []string, refused map[string]string, err error) {
	refused = map[string]string{}
	for _, f := range fields {
		// A since in the far future validates the field without copying
		// any sample.
		_, err := c.Fetch(ctx, Query{Fields: []string{f}, Since: math.MaxInt64})
		var se *StatusError
		switch {
		case err == nil:
			served = append(served, f)
		case errors.As(err, &se) && se.Code == http.StatusBadRequest:
			refused[f] = se.Msg
		default:
			return nil, nil, err
		}
	}
	return served, refused, nil
}

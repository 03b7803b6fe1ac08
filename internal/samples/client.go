package samples

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
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxEventBytes bounds one event a client accepts: a full answer of
// MaxFields fields on a large node stays well under it.
const maxEventBytes = 64 << 20

// Client reads the raw-sample API of a running gpuscope.
type Client struct {
	// Base is the server's URL, "http://localhost:9400"; a bare host:port
	// is taken as http.
	Base               string
	Username, Password string
	// InsecureSkipVerify accepts any TLS certificate (a self-signed one
	// behind a port-forward).
	InsecureSkipVerify bool
	// HTTP is the client to use; one without a timeout is built when nil
	// (streams last as long as they are read).
	HTTP *http.Client
}

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
		return nil, &StatusError{Code: resp.StatusCode, URL: base + path, Msg: msg}
	}
	return resp, nil
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
	resp, err := c.get(ctx, "/api/v1/samples", q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxEventBytes))
	if err != nil {
		return nil, fmt.Errorf("reading samples: %w", err)
	}
	return Decode(body)
}

// Stream reads /api/v1/stream and calls fn with each event's samples until
// ctx ends, fn returns an error, or the server ends the stream (an error
// event or a closed connection, returned as an error).
func (c *Client) Stream(ctx context.Context, q Query, fn func(*Result) error) error {
	resp, err := c.get(ctx, "/api/v1/stream", q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	var event string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 {
				if err := dispatch(event, data.Bytes(), fn); err != nil {
					return err
				}
			}
			event = ""
			data.Reset()
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(line[len("data:"):], []byte(" ")))
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the stream: %w", err)
	}
	return errors.New("the server ended the stream")
}

func dispatch(event string, data []byte, fn func(*Result) error) error {
	switch event {
	case "error":
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("stream: %s", e.Error)
		}
		return fmt.Errorf("stream: %s", data)
	case "samples", "":
		r, err := Decode(data)
		if err != nil {
			return err
		}
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

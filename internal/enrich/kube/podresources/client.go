// Package podresources is a client of the kubelet's PodResources API (v1):
// one gRPC List call over HTTP/2 without TLS on the kubelet's unix socket,
// its answer decoded from the protobuf wire format.
//
// The API is a single unary call, which net/http's HTTP/2 transport and
// protowire carry in a few hundred lines. gRPC-go and the generated API
// package would add about 1.5 MB of code to an exporter whose resident set
// is mostly its own binary's pages.
package podresources

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// listPath is the List method of the v1 PodResourcesLister service.
const listPath = "/v1.PodResourcesLister/List"

// maxHeaderBytes bounds the headers and trailers of an answer; a gRPC
// answer carries a handful of short ones.
const maxHeaderBytes = 64 << 10

// Client calls the PodResources API on one unix socket. It keeps one
// HTTP/2 connection open between calls, and one transport for its life;
// Close ends every connection.
type Client struct {
	lim    Limits
	onDrop func(error)
	tr     *http.Transport
	hc     *http.Client
	conns  conns
	drops  atomic.Uint64
}

// Options configure a client; zero values take the defaults.
type Options struct {
	Limits
	// OnDrop is called, from the connection's reader, when a connection is
	// dropped for a flood of control frames (a *FloodError).
	OnDrop func(error)
}

// New returns a client of the kubelet listening on socket that accepts
// answers of at most maxMsg bytes, within DefaultLimits otherwise.
func New(socket string, maxMsg int) *Client {
	return NewWithOptions(socket, Options{Limits: Limits{MaxMessageBytes: maxMsg}})
}

// NewWithOptions returns a client of the kubelet listening on socket.
func NewWithOptions(socket string, o Options) *Client {
	c := &Client{lim: o.Limits.withDefaults(), onDrop: o.OnDrop}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		// gRPC without TLS is HTTP/2 with prior knowledge; the host in the
		// URL only names the :authority, the socket is where it goes.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, err
			}
			fc := &frameConn{Conn: nc, client: c, limit: c.lim.MaxControlFrames}
			c.conns.add(fc)
			return fc, nil
		},
		Protocols:              &p,
		MaxResponseHeaderBytes: maxHeaderBytes,
		DisableCompression:     true,
		IdleConnTimeout:        5 * time.Minute,
	}
	hc := &http.Client{
		Transport: tr,
		// A gRPC answer never redirects; one that does is not the kubelet.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c.tr, c.hc = tr, hc
	return c
}

// Close ends every connection to the kubelet, those with a call that never
// got its answer included. A later List dials again on the same transport:
// after a kubelet restart the socket is a new file.
func (c *Client) Close() {
	c.tr.CloseIdleConnections()
	c.conns.each(func(fc *frameConn) { _ = fc.Close() })
}

// Drops is the number of connections dropped for a flood of control frames.
func (c *Client) Drops() uint64 { return c.drops.Load() }

func (c *Client) dropped(err error) {
	c.drops.Add(1)
	if c.onDrop != nil {
		c.onDrop(err)
	}
}

// List asks the kubelet for the resources of every pod on the node. The
// context's deadline bounds the call and is sent to the kubelet.
func (c *Client) List(ctx context.Context) (*ListResponse, error) {
	msg, err := c.call(ctx, listPath)
	if err != nil {
		return nil, err
	}
	resp, err := decodeListWithin(msg, c.lim)
	if err != nil {
		return nil, fmt.Errorf("decoding the List answer: %w", err)
	}
	return resp, nil
}

// call sends an empty request message to path and returns the one answer
// message.
func (c *Client) call(ctx context.Context, path string) ([]byte, error) {
	// An empty request: not compressed, zero bytes long.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+path, bytes.NewReader(make([]byte, 5)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("User-Agent", "gpuscope")
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set("Grpc-Timeout", grpcTimeout(time.Until(dl)))
	}
	// A call may take its handful of control frames anew.
	c.conns.each(func(fc *frameConn) { fc.control.Store(0) })
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the kubelet answered HTTP %d, not a gRPC answer", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/grpc") {
		return nil, fmt.Errorf("the kubelet answered with content type %q, not a gRPC answer", ct)
	}
	// A "trailers-only" answer: an error status in the headers, no body.
	if st := resp.Header.Get("Grpc-Status"); st != "" {
		return nil, statusError(st, resp.Header.Get("Grpc-Message"))
	}
	msg, err := c.readMessage(resp.Body)
	if err != nil {
		return nil, err
	}
	if st := resp.Trailer.Get("Grpc-Status"); st != "0" {
		if st == "" {
			return nil, errors.New("the kubelet's answer ended without a gRPC status")
		}
		return nil, statusError(st, resp.Trailer.Get("Grpc-Message"))
	}
	if msg == nil {
		return nil, errors.New("the kubelet's answer holds no message")
	}
	return msg, nil
}

// readMessage reads the length-prefixed messages of body to its end and
// returns the first, nil when there is none. A unary answer holds one;
// more is an error.
func (c *Client) readMessage(body io.Reader) ([]byte, error) {
	var msg []byte
	for n := 0; ; n++ {
		var hdr [5]byte
		if _, err := io.ReadFull(body, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return msg, nil
			}
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if n > 0 {
			return nil, errors.New("the kubelet sent more than one answer message to a unary call")
		}
		if hdr[0] != 0 {
			return nil, errors.New("the kubelet sent a compressed message, which was not asked for")
		}
		size := binary.BigEndian.Uint32(hdr[1:])
		if uint64(size) > uint64(c.lim.MaxMessageBytes) {
			return nil, &TooLargeError{Size: int64(size), Limit: c.lim.MaxMessageBytes}
		}
		// Read as the bytes arrive rather than allocating what the prefix
		// claims: a peer that announces 64 MB and sends nothing costs nothing.
		var err error
		msg, err = io.ReadAll(io.LimitReader(body, int64(size)))
		if err != nil {
			return nil, fmt.Errorf("reading the answer's %d-byte message: %w", size, err)
		}
		if len(msg) < int(size) {
			return nil, fmt.Errorf("the answer ended after %d of its message's %d bytes", len(msg), size)
		}
	}
}

// TooLargeError is an answer longer than the client accepts.
type TooLargeError struct {
	Size  int64
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the kubelet's answer is %d bytes, more than the limit of %d bytes", e.Size, e.Limit)
}

// StatusError is a gRPC status other than OK that the kubelet answered.
type StatusError struct {
	Code    int
	Message string
}

// codeNames are the gRPC status codes' names, by number.
var codeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

func (e *StatusError) Error() string {
	name := "Code(" + strconv.Itoa(e.Code) + ")"
	if e.Code >= 0 && e.Code < len(codeNames) {
		name = codeNames[e.Code]
	}
	return fmt.Sprintf("rpc error: code = %s desc = %s", name, e.Message)
}

func statusError(code, msg string) error {
	n, err := strconv.Atoi(code)
	if err != nil {
		return fmt.Errorf("the kubelet answered with a gRPC status that is not a number: %q", code)
	}
	// The message is percent-encoded (gRPC over HTTP/2, "Status-Message").
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	return &StatusError{Code: n, Message: msg}
}

// grpcTimeout writes d as a grpc-timeout header value: at most 8 digits
// and a unit.
func grpcTimeout(d time.Duration) string {
	if d < time.Millisecond {
		return "1m"
	}
	ms := d.Milliseconds()
	if ms < 1e8 {
		return strconv.FormatInt(ms, 10) + "m"
	}
	return strconv.FormatInt(min(int64(d/time.Second), 99999999), 10) + "S"
}

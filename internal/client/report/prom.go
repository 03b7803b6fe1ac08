package report

import (
	"bytes"
	"context"
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

	"github.com/gpuscope/gpuscope/internal/client/sameorigin"
	"github.com/gpuscope/gpuscope/internal/sampleapi"
)

// maxAnswerBytes bounds one answer of the Prometheus API; the raw-sample
// reads are split so that each stays well under it (200,000 samples are
// about 5 MiB). Reading and decoding one allocates about seven times its
// size.
const maxAnswerBytes = 64 << 20

// ErrUnreachable says Prometheus did not answer at all: refused, unknown
// host, timed out.
var ErrUnreachable = errors.New("cannot reach Prometheus")

// QueryError is a query Prometheus refused or failed (its API's "error"
// status): the expression, the error type and its message.
type QueryError struct {
	URL, Expr, Type, Msg string
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("Prometheus at %s refused the query %s: %s: %s", e.URL, sampleapi.Printable(e.Expr),
		sampleapi.Printable(e.Type), sampleapi.Printable(e.Msg))
}

// Client reads Prometheus' HTTP API (/api/v1/query) with net/http and
// encoding/json alone.
type Client struct {
	// Base is Prometheus' URL, with any path prefix it is served under
	// (http://prometheus:9090, https://host/prometheus).
	Base *url.URL
	// Username and Password are sent as basic auth when Username is set;
	// BearerToken as an Authorization header when set.
	Username, Password, BearerToken string
	// HTTP is the client; http.DefaultClient's transport with Timeout per
	// request when nil.
	HTTP *http.Client
	// Timeout bounds each request. 2m when 0.
	Timeout time.Duration
}

// ParseURL checks a Prometheus URL given on the command line.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("URL %q: want http://host:port or https://host[:port][/path]", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// sample is one value of a series at a time (Unix milliseconds).
type sample struct {
	ts int64
	v  float64
}

// series is one series of an answer: its labels and its samples (one for
// an instant vector, all of the range for a range vector).
type series struct {
	labels  map[string]string
	samples []sample
}

// apiAnswer is the envelope of every Prometheus API answer. The result is
// decoded in place, samples straight into their final form: an answer near
// the cap took nine times its size through json.RawMessage.
type apiAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string     `json:"resultType"`
		Result     resultList `json:"result"`
	} `json:"data"`
}

// rawSeries is one series of a vector (Value) or a matrix (Values).
type rawSeries struct {
	Metric map[string]string `json:"metric"`
	Value  *sample           `json:"value"`
	Values []sample          `json:"values"`
}

// resultList is a vector's or a matrix's series; other result types
// (scalar, string) leave it empty and are refused by their type.
type resultList []rawSeries

func (r *resultList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '[' {
		return nil
	}
	inner := bytes.TrimSpace(b[1:])
	if len(inner) > 0 && inner[0] != '{' && inner[0] != ']' {
		return nil // a scalar's [ts, "v"]
	}
	return json.Unmarshal(b, (*[]rawSeries)(r))
}

// query runs an instant query at t and returns its vector or matrix.
func (c *Client) query(ctx context.Context, expr string, t time.Time) ([]series, error) {
	form := url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)}}
	ans, err := c.post(ctx, "/api/v1/query", form, expr)
	if err != nil {
		return nil, err
	}
	switch ans.Data.ResultType {
	case "vector", "matrix":
	default:
		return nil, fmt.Errorf("the answer to %s is a %q, not a vector or a matrix", expr, sampleapi.Printable(ans.Data.ResultType))
	}
	out := make([]series, 0, len(ans.Data.Result))
	for _, r := range ans.Data.Result {
		s := series{labels: r.Metric, samples: r.Values}
		if r.Value != nil {
			s.samples = []sample{*r.Value}
		}
		out = append(out, s)
	}
	return out, nil
}

// UnmarshalJSON reads [ts, "value"]: seconds with milliseconds, and the
// value as Prometheus writes it, a string (NaN and ±Inf included).
func (smp *sample) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return fmt.Errorf("a sample %.40q is not [time, \"value\"]", b)
	}
	tsText, valText, ok := bytes.Cut(b[1:len(b)-1], []byte(","))
	if !ok || bytes.IndexByte(valText, ',') >= 0 {
		return fmt.Errorf("a sample %.40q is not of 2 items", b)
	}
	ts, err := strconv.ParseFloat(string(bytes.TrimSpace(tsText)), 64)
	if err != nil {
		return fmt.Errorf("sample time %.40q: %w", tsText, err)
	}
	valText = bytes.TrimSpace(valText)
	if len(valText) < 2 || valText[0] != '"' || valText[len(valText)-1] != '"' {
		return fmt.Errorf("sample value %.40q is not a string", valText)
	}
	v, err := strconv.ParseFloat(string(valText[1:len(valText)-1]), 64)
	if err != nil {
		return fmt.Errorf("sample value %.40q: %w", valText, err)
	}
	*smp = sample{ts: int64(math.Round(ts * 1000)), v: v}
	return nil
}

// post sends one API request and returns its successful answer, or an
// error that says whether Prometheus could not be reached, answered with
// an HTTP error, or refused the query.
func (c *Client) post(ctx context.Context, path string, form url.Values, expr string) (*apiAnswer, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	endpoint := c.Base.String() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if c.Username != "" {
		req.SetBasicAuth(c.Username, c.Password)
	}
	if c.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.BearerToken)
	}
	resp, err := sameorigin.Client(c.HTTP).Do(req)
	if re, ok := sameorigin.AsRedirect(err); ok {
		return nil, fmt.Errorf("querying Prometheus at %s: %w", c.Base.Redacted(), re)
	}
	if err != nil {
		return nil, unreachable(c.Base, err)
	}
	defer resp.Body.Close()
	// The URL that answered, after any redirect within the origin.
	endpoint = resp.Request.URL.Redacted()
	body, err := readAnswer(resp)
	if err != nil {
		return nil, fmt.Errorf("reading Prometheus' answer to %s: %w", expr, err)
	}
	if len(body) > maxAnswerBytes {
		return nil, fmt.Errorf("the answer of Prometheus to %s is over %d MiB", expr, maxAnswerBytes>>20)
	}
	var ans apiAnswer
	jsonErr := json.Unmarshal(body, &ans)
	if jsonErr == nil && ans.Status == "error" {
		return nil, &QueryError{URL: c.Base.Redacted(), Expr: expr, Type: ans.ErrorType, Msg: ans.Error}
	}
	if resp.StatusCode/100 != 2 {
		return nil, httpError(c.Base, endpoint, resp.StatusCode, body)
	}
	if ans.Status == "success" && jsonErr != nil {
		return nil, fmt.Errorf("decoding the answer to %s: %w", expr, jsonErr)
	}
	if jsonErr != nil || ans.Status != "success" {
		return nil, fmt.Errorf("%s answered %s with something that is not a Prometheus API answer (is the URL Prometheus'?)", c.Base.Redacted(), endpoint)
	}
	return &ans, nil
}

// readAnswer reads a body of at most maxAnswerBytes, in one allocation
// where the length is announced.
func readAnswer(resp *http.Response) ([]byte, error) {
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= maxAnswerBytes {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, maxAnswerBytes+1))
	return buf.Bytes(), err
}

// unreachable says Prometheus did not answer, and what to check.
func unreachable(base *url.URL, err error) error {
	var ne net.Error
	hint := "is it running, and is the URL right?"
	if errors.As(err, &ne) && ne.Timeout() {
		hint = "it did not answer in time; a long range on a busy server may need a larger --timeout"
	}
	return fmt.Errorf("%w at %s: %v (%s)", ErrUnreachable, base.Redacted(), err, hint)
}

// httpError names an HTTP error answer, with a hint for the usual causes.
func httpError(base *url.URL, endpoint string, code int, body []byte) error {
	hint := ""
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = " (credentials: --prometheus.username and --prometheus.password, or --prometheus.bearer-token-file)"
	case http.StatusNotFound:
		hint = " (no Prometheus API there: give the URL Prometheus is served under, with its path prefix if any)"
	}
	if len(body) > 200 {
		body = append(body[:200:200], "..."...)
	}
	text := sampleapi.Printable(strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD")))
	return fmt.Errorf("HTTP %d from Prometheus at %s for %s%s: %s", code, base.Redacted(), endpoint, hint, text)
}

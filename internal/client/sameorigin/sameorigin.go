// Package sameorigin keeps a command-line client's credentials with the
// server it was pointed at: redirects are followed only within the same
// scheme, host and port.
package sameorigin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// maxRedirects is net/http's own limit.
const maxRedirects = 10

// RedirectError is a redirect that was not followed: it pointed at
// another origin.
type RedirectError struct {
	From, To string // redacted URLs
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("%s redirected to %s, another scheme, host or port: not followed, so that the credentials are not sent there (give that URL if it is the server meant)", e.From, e.To)
}

// CheckRedirect is an http.Client CheckRedirect that follows redirects
// within the origin of the first request only. Go keeps the Authorization
// header across a redirect to the same host name whatever the port or
// scheme, so https to http on one host would send it in clear.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	first := via[0].URL
	if origin(first) != origin(req.URL) {
		return &RedirectError{From: first.Redacted(), To: req.URL.Redacted()}
	}
	return nil
}

// Client returns a copy of c (http.DefaultClient when nil) that follows
// redirects within the origin only.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cp := *c
	cp.CheckRedirect = CheckRedirect
	return &cp
}

// AsRedirect returns the RedirectError err holds, if any.
func AsRedirect(err error) (*RedirectError, bool) {
	var re *RedirectError
	ok := errors.As(err, &re)
	return re, ok
}

// origin is scheme://host:port with the scheme's default port written out.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port)
}

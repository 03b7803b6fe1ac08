package sameorigin

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckRedirect: only the scheme, host and port of the first request
// may be redirected to (round 4, item 10).
func TestCheckRedirect(t *testing.T) {
	tests := []struct {
		from, to string
		follow   bool
	}{
		{"http://prom:9090/api", "http://prom:9090/prefix/api", true},
		{"http://prom/api", "http://prom:80/x", true},
		{"https://prom/api", "https://prom:443/x", true},
		{"http://prom:9090/api", "http://prom:9091/api", false},
		{"https://prom/api", "http://prom/api", false},
		{"http://prom:9090/api", "http://evil:9090/api", false},
		{"http://u:pw@prom:9090/api", "http://u:pw@other:1/api", false},
	}
	for _, tt := range tests {
		from, _ := url.Parse(tt.from)
		to, _ := url.Parse(tt.to)
		err := CheckRedirect(&http.Request{URL: to}, []*http.Request{{URL: from}})
		if tt.follow {
			assert.NoError(t, err, "%s -> %s", tt.from, tt.to)
			continue
		}
		re, ok := AsRedirect(err)
		if assert.True(t, ok, "%s -> %s", tt.from, tt.to) {
			assert.Equal(t, to.Redacted(), re.To)
			assert.NotContains(t, err.Error(), ":pw@")
		}
	}
	many := make([]*http.Request, maxRedirects)
	for i := range many {
		many[i] = &http.Request{URL: &url.URL{Scheme: "http", Host: "a"}}
	}
	assert.Error(t, CheckRedirect(&http.Request{URL: &url.URL{Scheme: "http", Host: "a"}}, many))
}

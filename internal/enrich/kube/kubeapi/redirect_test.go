package kubeapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuscope/gpuscope/internal/testkit/apiservertest"
)

// TestRedirectsAreFollowedWithTheBearerToken: an API server that answers
// 302 to another server, over plain HTTP, gets an error naming the
// redirect; the other server is never asked, so the service-account token
// does not leave for it and its answer is not taken. Before, the token went
// there in clear text and the plain-HTTP pod list was accepted.
func TestRedirectsAreFollowedWithTheBearerToken(t *testing.T) {
	api := apiservertest.Start(t)
	api.Set(apiservertest.Pod{Namespace: "ml", Name: "train-0", Node: "node-1"})
	var mu sync.Mutex
	var tokens []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"resourceVersion": "1"},
			"items": []any{map[string]any{"metadata": map[string]any{"name": "planted"}}}})
	}))
	t.Cleanup(elsewhere.Close)
	api.RedirectTo(elsewhere.URL)

	c := &Client{Server: api.URL(), TokenFile: api.TokenFile, CAFile: api.CAFile}
	var l podList
	err := c.GetJSON(context.Background(), podsPath, 1<<20, &l)
	require.Error(t, err, "a redirect is refused; the answer was %+v", l)
	assert.Contains(t, err.Error(), "302")
	assert.Contains(t, err.Error(), "redirect")
	assert.Contains(t, err.Error(), elsewhere.URL, "the error names where it pointed")
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, tokens, "the other server was asked, with Authorization %q", tokens)
	assert.Empty(t, l.Items, "nothing of the other server's answer is taken")
}

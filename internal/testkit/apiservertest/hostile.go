package apiservertest

import (
	"net/http"
	"strings"
)

// hostile is how a broken or hostile API server answers instead of
// serving pods, for the tests of what a client does then.
type hostile struct {
	// listCode, when not 0, answers every LIST of pods with this status
	// (410 Gone every time, say, after a watch expired).
	listCode int
	// redirect, when set, answers every request with a 302 to it.
	redirect string
}

// FailLists answers every LIST of pods from now on with a Status of code,
// as a broken API server (or a proxy in front of it) does; 0 serves them
// again. Watches are not changed: Expire ends them.
func (s *Server) FailLists(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bad.listCode = code
}

// RedirectTo answers every request from now on with a 302 Found to the
// same path and query on base (an http:// URL of another server, say);
// "" serves them again.
func (s *Server) RedirectTo(base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bad.redirect = strings.TrimRight(base, "/")
}

// answerHostile answers r as FailLists and RedirectTo ask and reports
// whether it did.
func (s *Server) answerHostile(w http.ResponseWriter, r *http.Request, watch bool) bool {
	s.mu.Lock()
	bad := s.bad
	s.mu.Unlock()
	switch {
	case bad.redirect != "":
		http.Redirect(w, r, bad.redirect+r.URL.RequestURI(), http.StatusFound)
		return true
	case bad.listCode != 0 && !watch && r.URL.Path == "/api/v1/pods":
		writeStatus(w, bad.listCode, http.StatusText(bad.listCode), "the list failed (apiservertest.FailLists)")
		return true
	}
	return false
}

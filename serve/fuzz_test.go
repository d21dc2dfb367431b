package serve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/loop"
)

// No request, however malformed, panics the server or gets a 5xx: a bad
// one is a 4xx with a one-sentence JSON error.
func FuzzRequests(f *testing.F) {
	for _, seed := range []struct{ method, target, body string }{
		{"GET", "/v1/actions?from=1&to=3", ""},
		{"GET", "/v1/actions?run=r1&from=x", ""},
		{"GET", "/v1/actions/2", ""},
		{"GET", "/v1/runs/r1/predicate?expr=(audit.succeeded?%20%22x%22)", ""},
		{"GET", "/v1/runs/r1/history", ""},
		{"GET", "/v1/verify/1", ""},
		{"POST", "/v1/verify", `{"key":"nope"}`},
		{"POST", "/v1/control", `{"do":"approve","iteration":-1}`},
		{"GET", "/v1/prove/1", ""},
		{"GET", "/v1/bundle", ""},
		{"GET", "/v1/bundle?run=r1", ""},
	} {
		f.Add(seed.method, seed.target, seed.body)
	}
	st := openStore(f)
	appendN(f, st, "r1", 5, "x")
	s := &Server{o: Options{Store: st, Runner: &fakeRunner{bus: loop.NewBus(st, "r1"), id: "r1"}, Logger: discard()}, slots: make(chan struct{}, MaxStreams)}
	h := s.routes()
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if strings.Contains(target, "/v1/events") {
			return // a stream that only ends with its client
		}
		req, err := http.NewRequest(method, "http://ralph"+target, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/") {
			return // not a request a client could send
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Errorf("%s %q %q: %d %s", method, target, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && !strings.HasPrefix(rec.Body.String(), `{"error":`) {
			t.Errorf("%s %q: %d without a sentence: %q", method, target, rec.Code, rec.Body)
		}
	})
}

package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/ralphloop/ralph/internal/usage"
)

func contextWith(r *http.Request, in who) context.Context {
	return context.WithValue(r.Context(), whoKey{}, in)
}

// wantsJSON says whether the client asked for JSON.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// fail answers one sentence: a JSON {"error": …} when the client asked for
// JSON, else an error page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if wantsJSON(r) || strings.HasSuffix(r.URL.Path, "/events") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": msg}) // the client may be gone; nothing to do then
		return
	}
	s.render(w, r, code, "error", errorView{Code: code, Status: http.StatusText(code), Msg: msg})
}

type errorView struct {
	Code   int
	Status string
	Msg    string
}

// failErr answers err: the user's (a run that is not there, bad input) as
// 400 or 404, any other as 500, logged.
func (s *Server) failErr(w http.ResponseWriter, r *http.Request, err error) {
	var ue *usage.Error
	switch {
	case strings.HasPrefix(err.Error(), "no run "):
		s.fail(w, r, http.StatusNotFound, err.Error())
	case errors.As(err, &ue):
		s.fail(w, r, http.StatusBadRequest, err.Error())
	default:
		s.o.Log.Warn("ralph web: a read failed", "path", r.URL.Path, "err", err)
		s.fail(w, r, http.StatusInternalServerError, err.Error())
	}
}

package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/ralphloop/ralph/fleet"
)

// pageNames are the templates under templates/, each with base.html.
var pageNames = []string{"runs", "run", "diff", "fleet", "error"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"stateClass": stateClass,
		"inc":        func(n int) int { return n + 1 },
		"dec":        func(n int) int { return n - 1 },
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("base.html").Funcs(funcs).ParseFS(templateFS, "templates/base.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// stateClass is the CSS class of a state: its colour goes with its name,
// never alone.
func stateClass(state string) string {
	switch state {
	case "running", "paused", "queued":
		return "st-live"
	case "succeeded", "completed", "done", "met":
		return "st-ok"
	case "failed", "error", "aborted", "interrupted", fleet.StateHandedBack:
		return "st-bad"
	}
	return "st-other"
}

// page is what base.html gets: the page's own data and the frame's.
type page struct {
	Title   string
	Where   string
	Version string
	Nav     string
	Data    any
	Now     string
}

// render writes page name with data; a template error is logged and
// answered 500 before anything is written.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, data any) {
	var b bytes.Buffer
	p := page{Title: titleOf(name, data), Where: s.o.Where, Version: s.o.Version, Nav: name, Data: data,
		Now: s.o.Now().Format(time.DateTime)}
	if err := s.pages[name].Execute(&b, p); err != nil {
		s.o.Log.Error("ralph web: render a page", "page", name, "err", err)
		http.Error(w, "ralph web could not render this page; its log says why", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(b.Bytes()) // a client gone is nothing to report
}

func titleOf(name string, data any) string {
	switch v := data.(type) {
	case runView:
		return "Run " + v.ID
	case diffView:
		return fmt.Sprintf("Diff of iteration %d of run %s", v.Iteration, v.RunID)
	case errorView:
		return v.Status
	}
	switch name {
	case "runs":
		return "Runs"
	case "fleet":
		return "Fleet"
	}
	return name
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v) // a client gone is nothing to report
}

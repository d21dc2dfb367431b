package web

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// controls are the values of the control form's do button.
var controls = []string{"pause", "resume", "skip", "abort", "approve", "decline"}

// control is POST /runs/{id}/control: do=pause|resume|skip|abort, or
// approve|decline with iteration=N; then back to the run page.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	do := r.PostFormValue("do")
	if !slices.Contains(controls, do) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("do=%q is not a control; use one of %s", do, strings.Join(controls, ", ")))
		return
	}
	it := 0
	if v := r.PostFormValue("iteration"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("iteration=%q is not an iteration; the first is 1", v))
			return
		}
		it = n
	}
	run, err := s.o.Source.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	defer run.Close()
	if err := s.o.Source.Steer(r.Context(), run, do, it); err != nil {
		s.fail(w, r, http.StatusConflict, err.Error())
		return
	}
	done := do + " requested"
	if wantsJSON(r) {
		writeJSON(w, map[string]string{"run_id": run.ID, "done": done})
		return
	}
	http.Redirect(w, r, "/runs/"+run.ID+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// whatIfView is the what-if form and, once sent, its answer.
type whatIfView struct {
	Config  string
	CSRF    string
	Error   string
	Summary string
	Steps   string
	Result  *stop.ReplayResult
}

// whatIfName names the form's text in its errors (what-if:LINE:COL).
const whatIfName = "what-if"

// whatIf is POST /runs/{id}/whatif: config= holds [[stop]] tables in TOML;
// the answer is where they would have stopped the recorded run (replay
// from the chain: no command is run again).
func (s *Server) whatIf(w http.ResponseWriter, r *http.Request) {
	run, acts, ok := s.openRun(w, r)
	if !ok {
		return
	}
	defer run.Close()
	v := s.runView(r, run, acts)
	v.WhatIf.Config = r.PostFormValue("config")
	res, err := s.replay(r, v.WhatIf.Config, acts, run.ID)
	code := http.StatusOK
	if err != nil {
		v.WhatIf.Error, code = err.Error(), http.StatusBadRequest
	} else {
		var b bytes.Buffer
		stop.WriteReplay(&b, res)
		v.WhatIf.Result, v.WhatIf.Summary, v.WhatIf.Steps = res, stop.ReplaySummary(res), b.String()
	}
	if wantsJSON(r) {
		if err != nil {
			s.fail(w, r, code, err.Error())
			return
		}
		writeJSON(w, struct {
			*stop.ReplayResult
			Summary string `json:"summary"`
		}{res, v.WhatIf.Summary})
		return
	}
	s.render(w, r, code, "run", v)
}

// replay replays text's [[stop]] tables against acts, in the run's
// recorded workdir.
func (s *Server) replay(r *http.Request, text string, acts []ledger.Action, id string) (*stop.ReplayResult, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("the what-if form is empty; write the [[stop]] tables to try, such as [[stop]] name = \"iters\" kind = \"max_iterations\" max = 3")
	}
	if len(text) > 64<<10 {
		return nil, errors.New("the what-if configuration is over 64 KiB; send only its [[stop]] tables")
	}
	cfg, err := config.ParseForExec([]byte(text), whatIfName, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	rc, err := loop.ReadCheckpoints(id, acts)
	if err != nil {
		return nil, err
	}
	cfg.Loop.Workdir = rc.Workdir
	res, err := assemble.Replay(r.Context(), cfg, acts, id, assemble.ReplayOptions{})
	var ce *assemble.ConfigError
	if errors.As(err, &ce) {
		return nil, ce.Err
	}
	return res, err
}

// stopTables is the [[stop]] tables of the run's config snapshot, as
// written, for the what-if form to start from.
func stopTables(acts []ledger.Action) string {
	for _, a := range acts {
		if a.Type == ledger.RunStarted {
			return stopSection(a.Metadata["config"].Str())
		}
	}
	return ""
}

// stopSection keeps the lines of src from each [[stop]] (or [[stop.…]],
// [stop.…]) header to the next other table header.
func stopSection(src string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(src) {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			name := strings.Trim(t, "[] \t")
			if i := strings.IndexAny(name, "]#"); i >= 0 {
				name = strings.TrimSpace(name[:i])
			}
			in = name == "stop" || strings.HasPrefix(name, "stop.")
		}
		if in && !zeroLine(t) {
			b.WriteString(strings.TrimLeft(line, " \t"))
		}
	}
	return b.String()
}

// zeroLine says whether a snapshot line sets a key to its zero value (the
// snapshot writes every field), which the form leaves out.
func zeroLine(t string) bool {
	_, v, ok := strings.Cut(t, " = ")
	return ok && slices.Contains([]string{`""`, "0", "0.0", "false", `"0s"`, "[]"}, v)
}

// diffView is one iteration's changes.
type diffView struct {
	RunID     string
	Iteration int
	Last      int
	Files     []gitx.FileStat
	Diff      template.HTML
	Note      string
}

// maxDiff bounds the diff a page shows.
const maxDiff = 512 << 10

// diffPage is /runs/{id}/diff?iteration=N (default the last): what the
// iteration changed, from its checkpoints, or why there is nothing to show.
func (s *Server) diffPage(w http.ResponseWriter, r *http.Request) {
	run, acts, ok := s.openRun(w, r)
	if !ok {
		return
	}
	defer run.Close()
	last := 0
	for _, a := range acts {
		if a.Type == ledger.IterationStarted {
			last = max(last, int(a.Metadata["iteration"].AsInt()))
		}
	}
	it := last
	if q := r.URL.Query().Get("iteration"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > last {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("iteration=%q is not an iteration of run %s; it has %d (the first is 1)", q, run.ID, last))
			return
		}
		it = n
	}
	if it == 0 {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("run %s has no iteration yet, so no diff", run.ID))
		return
	}
	files, diff, note := s.o.Source.Diff(r.Context(), run, acts, it)
	if len(diff) > maxDiff {
		diff = diff[:maxDiff]
		note = fmt.Sprintf("the diff is cut at %d KiB; `ralph diff %s %d` prints it whole", maxDiff>>10, run.ID, it)
	}
	v := diffView{RunID: run.ID, Iteration: it, Last: last, Files: files, Diff: colorDiff(diff), Note: note}
	if wantsJSON(r) {
		writeJSON(w, map[string]any{"run_id": run.ID, "iteration": it, "files": files, "diff": diff, "note": note})
		return
	}
	s.render(w, r, http.StatusOK, "diff", v)
}

// colorDiff marks a unified diff's lines by their kind, escaped.
func colorDiff(diff string) template.HTML {
	var b strings.Builder
	for line := range strings.Lines(diff) {
		class := ""
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"), strings.HasPrefix(line, "diff "):
			class = "file"
		case strings.HasPrefix(line, "@@"):
			class = "hunk"
		case strings.HasPrefix(line, "+"):
			class = "add"
		case strings.HasPrefix(line, "-"):
			class = "del"
		}
		if class != "" {
			b.WriteString(`<span class="` + class + `">` + template.HTMLEscapeString(line) + `</span>`)
		} else {
			b.WriteString(template.HTMLEscapeString(line))
		}
	}
	return template.HTML(b.String()) // every line escaped above
}

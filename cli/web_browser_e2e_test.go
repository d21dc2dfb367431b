package cli_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// ShotsEnv names a directory where WebInTheBrowser writes a PNG of each
// page it opens, 1280 and 375 CSS pixels wide (docs/web/ is made so:
// RALPH_WEB_SHOTS=$PWD/docs/web go test -run 'E2E/WebInTheBrowser$' ./cli/).
const ShotsEnv = "RALPH_WEB_SHOTS"

// gatedAgent is a FAKE_AGENT_EACH command: the agent's call N waits until
// the file $GATE_DIR/N exists, so the test decides when the loop goes on.
const gatedAgent = `n=$(cat "$FAKE_AGENT_STATE/calls"); while [ ! -e "$GATE_DIR/open-$n" ] && [ "$n" -le 2 ]; do sleep 0.02; done; true`

// ralph web in Debian's Chromium, against an agent loop a test steers
// through a gate: the runs page from the printed URL and its token; the
// run page following the live run (its chain grows and its failing
// condition's why line, the failing test's message, appears without a
// reload); pause pressed on the page, shown there and in ralph runs,
// then resume; the run followed to its end; iteration 3's diff; the
// what-if form, saying where an edited stop config would have stopped;
// each page at 375 px wide without a horizontal scroll; and the run with
// JavaScript off.
var _ = suite.Add(e2e.Test{Name: "WebInTheBrowser", Needs: []e2e.Need{e2e.Tool("git"), e2e.Chromium}, Run: func(t *testing.T, e *e2e.E) {
	gates := t.TempDir()
	p := gitProject(t, e, "FAKE_AGENT_DONE_AFTER=3", "FAKE_AGENT_EACH="+gatedAgent, "GATE_DIR="+gates)
	open := func(n int) { writeFile(t, filepath.Join(gates, fmt.Sprintf("open-%d", n)), "") }
	run := p.cmd("run", "--no-tui").Start()
	srv := e.Ralph("web", "--listen", "127.0.0.1:0").In(p.dir).Start()
	first := strings.TrimSpace(srv.WaitLine("http://"))
	u, err := url.Parse(first)
	if err != nil || u.Query().Get("token") == "" || u.Host == "" {
		t.Fatalf("ralph web's first line %q is not its URL with ?token=", first)
	}
	base := "http://" + u.Host
	shots := newShots(t)

	pg := e.Page(1280, 900)
	pg.Go(first)
	if got := pg.URL(); strings.Contains(got, "token=") {
		t.Errorf("the token stays in the address bar: %s", got)
	}
	row := pg.WaitText("#runs tbody tr", "running")
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(row)
	if id == "" {
		t.Fatalf("no run id in the runs page's row:\n%s", row)
	}
	shots.take(pg, "runs")
	pg.Click(`#runs a[href="/runs/` + id + `"]`)
	pg.WaitText("#state", "running")
	if live := e2e.Eval[string](pg, `document.getElementById("run").dataset.live`); live != "true" {
		t.Fatalf("the page of the running run says data-live=%q", live)
	}

	// Live: iteration 1's failing condition, and iteration 2's start, reach
	// the page through its event stream, with no reload of the page.
	e2e.Eval[int](pg, `window.ralphKept = 1`)
	open(1)
	why := pg.WaitText("#conditions", "want 5")
	if !strings.Contains(why, "Add(2, 3) = -1") {
		t.Errorf("the failing condition's why line does not name the failing test's message:\n%s", why)
	}
	pg.WaitJS("iteration 2's start on the chain", `[...document.querySelectorAll("#chain li")].some(li => /\biteration 2\b/i.test(li.textContent))`)
	if kept := e2e.Eval[int](pg, `window.ralphKept || 0`); kept != 1 {
		t.Error("the page reloaded itself to show the live run; want its event stream to update it")
	}

	// Pause, pressed on the page while the agent works on iteration 2.
	pg.Click(`#controls button[value="pause"]`)
	pg.WaitText("#notice", "pause requested")
	open(2)
	pg.WaitText("#state", "paused")
	if s := webRunState(t, p); s != "paused" {
		t.Errorf("the page shows the run paused, ralph runs --json says %s", s)
	}
	shots.take(pg, "run-paused")
	pg.Click(`#controls button[value="resume"]`)
	if err := run.Wait(); err != nil {
		t.Fatalf("ralph run: %v\n%s", err, run.Output())
	}
	final := webRunState(t, p)
	pg.WaitText("#state", final)
	pg.WaitJS("the chain's three iterations", `document.querySelectorAll("#chain li.iteration").length === 3`)
	if bad := e2e.Eval[string](pg, barsJS); bad != "" {
		t.Errorf("a budget bar is not as long as its percent: %s", bad)
	}
	shots.take(pg, "run")

	// Iteration 3's diff: the agent's fix.
	pg.Click(`#it-3 .diff-link`)
	if d := pg.WaitText("#diff", "return a + b"); !strings.Contains(d, "calc.go") {
		t.Errorf("iteration 3's diff does not show calc.go:\n%s", d)
	}
	shots.take(pg, "diff")

	// What if the run had stopped after two iterations?
	pg.Go(base + "/runs/" + id)
	pg.SetValue("#whatif-config", "[[stop]]\nname = \"two\"\nkind = \"max_iterations\"\nmax = 2\n")
	pg.Click(`#whatif button[type="submit"]`)
	pg.WaitJS("the what-if's answer", `!!document.getElementById("whatif-result")`)
	res := e2e.Eval[map[string]string](pg, `Object.assign({}, document.getElementById("whatif-result").dataset)`)
	if res["iteration"] != "2" || res["condition"] != "two" || res["stopped"] != "true" {
		t.Errorf("what-if with max_iterations 2: %v, want stopped at iteration 2 by two", res)
	}
	shots.take(pg, "whatif")
	pg.Go(base + "/fleet")
	shots.take(pg, "fleet")

	// 375 px wide: no page scrolls sideways.
	pg.Resize(375, 800)
	for _, path := range []string{"/", "/runs/" + id, "/runs/" + id + "/diff?iteration=3", "/fleet"} {
		pg.Go(base + path)
		if wide := e2e.Eval[string](pg, overflowJS); wide != "" {
			t.Errorf("%s at 375 px scrolls sideways: %s", path, wide)
		}
	}

	// JavaScript off: the run is all there.
	nojs := e.Page(1280, 900)
	nojs.NoScript(true)
	nojs.Go(first)
	nojs.Go(base + "/runs/" + id)
	if s := nojs.Text("#state"); s != final {
		t.Errorf("without JavaScript the run's state is %q, want %q", s, final)
	}
	if n := e2e.Eval[int](nojs, `document.querySelectorAll("#chain li.iteration").length`); n != 3 {
		t.Errorf("without JavaScript the chain shows %d iterations, want 3", n)
	}
	if s := nojs.Text("#stopped"); !strings.Contains(s, "success") {
		t.Errorf("without JavaScript the run does not say why it stopped: %q", s)
	}
}})

// overflowJS says how wide the page is, and what sticks out, when it is
// wider than the viewport ("" when it is not).
const overflowJS = `(() => {
	const de = document.documentElement;
	if (de.scrollWidth <= de.clientWidth) return "";
	let last = null; // the deepest element whose content is wider than it and shows past it
	for (const el of document.body.querySelectorAll("*")) {
		if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX === "visible") last = el;
	}
	return de.scrollWidth + " px wide; what sticks out: " + (last ? last.outerHTML.slice(0, 300) : "no one element");
})()`

// barsJS names each budget bar whose filled part is not as wide as its
// aria-valuenow says (within 2 points), "" when all are.
const barsJS = `[...document.querySelectorAll("#budgets .bar")].map(bar => {
	const want = Number(bar.getAttribute("aria-valuenow"));
	const got = 100 * bar.querySelector("span").getBoundingClientRect().width / bar.clientWidth;
	return Math.abs(got - want) > 2 ? bar.getAttribute("aria-label") + " shows " + Math.round(got) + "%, says " + want + "%" : "";
}).filter(Boolean).join("; ")`

// webRunState is the state `ralph runs --json` gives the project's run.
func webRunState(t *testing.T, p *agentProject) string {
	t.Helper()
	out, errOut, code := p.ralph("runs", "--json")
	var r struct{ State string }
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.State == "" {
		t.Fatalf("ralph runs --json: exit %d\n%s%s", code, out, errOut)
	}
	return r.State
}

// shots writes a PNG of a page, 1280 and 375 px wide, into ShotsEnv's
// directory, when it is set.
type shots struct {
	t   *testing.T
	dir string
}

func newShots(t *testing.T) *shots { return &shots{t: t, dir: os.Getenv(ShotsEnv)} }

func (s *shots) take(pg *e2e.Page, name string) {
	if s.dir == "" {
		return
	}
	s.t.Helper()
	for _, w := range []int{1280, 375} {
		pg.Resize(w, 900)
		path := filepath.Join(s.dir, fmt.Sprintf("%s-%d.png", name, w))
		if err := os.WriteFile(path, pg.Screenshot(), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	pg.Resize(1280, 900)
}

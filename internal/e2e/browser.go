package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/testenv"
)

// ChromiumPath is where Debian's chromium package puts the browser the
// browser tests drive (.ci/run installs it).
const ChromiumPath = "/usr/bin/chromium"

// Chromium is the need of every test that drives a browser (E.Page):
// Debian's Chromium at ChromiumPath.
var Chromium = Need{"chromium (Debian's chromium package, at " + ChromiumPath + ")", func(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		testenv.Need(t, "chromium", fmt.Sprintf("%v; install Debian's chromium package (apt-get install chromium)", err))
	}
}}

// ChromiumFlags are the flags the browser tests start Chromium with,
// beside chromedp's defaults (headless among them): no GPU, and nothing
// that reaches out to the network, which a test machine may have closed
// (QUIC, background networking, component updates, sync). As root,
// Chromium also needs --no-sandbox (BrowserOptions adds it).
var ChromiumFlags = []string{"disable-gpu", "disable-quic", "no-first-run", "disable-background-networking",
	"disable-component-update", "disable-sync"}

// BrowserOptions are the options of a chromedp allocator that starts
// Debian's Chromium headless as the tests do, with the profile in
// dataDir (a fresh directory). The benchmarks start theirs with them too.
func BrowserOptions(dataDir string) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(ChromiumPath), chromedp.UserDataDir(dataDir))
	for _, f := range ChromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	if os.Geteuid() == 0 {
		// Chromium's own sandbox refuses to start as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	return opts
}

// browser is the one Chromium of a test process, started by the first
// test that opens a page and stopped by Suite.Main once the tests end.
// Each page is a tab in a browser context of its own, so tests share the
// process but no cookie or storage.
type browser struct {
	once   sync.Once
	ctx    context.Context // the browser's: pages are made from it
	stop   func()
	err    error
	errors []string // what chromedp reported of the protocol, for a failing test
	mu     sync.Mutex
}

// start starts the browser with its profile under root.
func (b *browser) start(root string) error {
	b.once.Do(func() {
		dir, err := os.MkdirTemp(root, "chromium-")
		if err != nil {
			b.err = err
			return
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), BrowserOptions(dir)...)
		ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(b.errorf))
		b.ctx, b.stop = ctx, func() { cancel(); acancel() }
		// The first Run starts the process; it must have no deadline of
		// its own, which would stop the browser with it.
		if err := chromedp.Do(ctx); err != nil {
			b.err = fmt.Errorf("start %s: %w", ChromiumPath, err)
		}
	})
	return b.err
}

// errorf keeps what chromedp reports of the protocol (an event it could
// not decode) for the log of a test that fails.
func (b *browser) errorf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, fmt.Sprintf(format, args...))
}

// protocolErrors is what chromedp has reported so far.
func (b *browser) protocolErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errors)
}

// close stops the browser, when it was started.
func (b *browser) close() {
	if b.stop != nil {
		b.stop()
	}
}

// Page is a tab of the test process's Chromium for one test, in a browser
// context of its own (its own cookies), closed at the test's end. Its
// methods fail the test; each is bounded by the hang guard. A script
// error the page does not catch fails the test at its end.
type Page struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	exceptions []string
}

// Page opens a tab width×height CSS pixels wide in the test process's
// Chromium (started by the first page). The test must need Chromium.
func (e *E) Page(width, height int) *Page {
	t := e.t
	t.Helper()
	if !e.needs[Chromium.name] {
		t.Fatal("e2e: E.Page in a test that does not need e2e.Chromium (Test.Needs)")
	}
	if err := e.s.browser.start(e.s.root); err != nil {
		t.Fatal(err)
	}
	p := &Page{t: t}
	ctx, cancel := chromedp.NewContext(e.s.browser.ctx, chromedp.WithNewBrowserContext(), chromedp.WithListener(p.listen))
	p.ctx = ctx
	t.Cleanup(func() {
		cancel()
		if t.Failed() {
			for _, m := range e.s.browser.protocolErrors() {
				t.Logf("chromedp: %s", m)
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, x := range p.exceptions {
			t.Errorf("the page threw and did not catch: %s", x)
		}
	})
	// The tab's first Run makes it; as for the browser, with no deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	p.Resize(width, height)
	return p
}

// listen keeps the page's uncaught exceptions.
func (p *Page) listen(ev any) {
	if ex, ok := ev.(*runtime.EventExceptionThrown); ok && ex.ExceptionDetails != nil {
		d := ex.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		p.mu.Lock()
		p.exceptions = append(p.exceptions, fmt.Sprintf("%s:%d:%d: %s", d.URL, d.LineNumber+1, d.ColumnNumber+1, msg))
		p.mu.Unlock()
	}
}

// Do runs actions on the page in order, failing the test at the first
// error or when they outlast the hang guard.
func (p *Page) Do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, eventually.Bound)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// Eval is what the JavaScript expression js gives on the page, decoded
// into a T (a promise is awaited).
func Eval[T any](p *Page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, eventually.Bound)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("browser: evaluate %s: %v", js, err)
	}
	return v
}

// Resize makes the page's viewport width×height CSS pixels.
func (p *Page) Resize(width, height int) {
	p.t.Helper()
	p.Do(chromedp.EmulateViewport(int64(width), int64(height)))
}

// NoScript turns the page's JavaScript off (or on again), for the pages
// it loads from then on.
func (p *Page) NoScript(off bool) {
	p.t.Helper()
	p.Do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: off})
		return err
	}))
}

// Go loads url and waits until the page has loaded.
func (p *Page) Go(url string) {
	p.t.Helper()
	p.Do(chromedp.Navigate(url))
}

// URL is the page's address now.
func (p *Page) URL() string {
	p.t.Helper()
	return Eval[string](p, "location.href")
}

// Text is the rendered text (innerText) of the first element css selects,
// or "" when none does.
func (p *Page) Text(css string) string {
	p.t.Helper()
	return Eval[string](p, fmt.Sprintf(`(e => e ? e.innerText : "")(document.querySelector(%q))`, css))
}

// WaitText waits until the first element css selects shows want in its
// rendered text, and returns that text. It fails the test with what the
// element showed last when it does not within the hang guard.
func (p *Page) WaitText(css, want string) string {
	p.t.Helper()
	var text string
	if !eventually.Poll(func() bool { text = p.Text(css); return strings.Contains(text, want) }) {
		p.t.Fatalf("browser: %s never showed %q; it showed %q\n%s", css, want, text, p.where())
	}
	return text
}

// WaitJS waits until the JavaScript expression js is true on the page;
// what names the wait in a failure.
func (p *Page) WaitJS(what, js string) {
	p.t.Helper()
	if !eventually.Poll(func() bool { return Eval[bool](p, js) }) {
		p.t.Fatalf("browser: %s: not so within %s (%s)\n%s", what, eventually.Bound, js, p.where())
	}
}

// where is the page's address and the start of its text, for a failure.
func (p *Page) where() string {
	p.t.Helper()
	s := Eval[string](p, `location.href + "\n" + (document.body ? document.body.innerText : "")`)
	return tail(s[:min(len(s), 4<<10)], 4<<10)
}

// Click clicks the first element css selects, once it is visible.
func (p *Page) Click(css string) {
	p.t.Helper()
	p.Do(chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible))
}

// SetValue sets the value of the form field css selects, once it is
// visible.
func (p *Page) SetValue(css, value string) {
	p.t.Helper()
	p.Do(chromedp.SetValue(chromedp.CSS(css), value, chromedp.NodeVisible))
}

// Screenshot is a PNG of the whole page (beyond the viewport, as far as
// it scrolls), at the viewport's width.
func (p *Page) Screenshot() []byte {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, eventually.Bound)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("browser: screenshot: %v", err)
	}
	return b
}

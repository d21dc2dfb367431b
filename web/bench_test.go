package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// bigRun records a run of iterations × perIteration actions (and its run
// record) in an in-memory store.
func bigRun(b testing.TB, iterations, perIteration int) (*ledger.Store, string) {
	b.Helper()
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	const run = "01900000-0000-7000-8000-000000000001"
	ctx := context.Background()
	add := func(a ledger.Action) {
		a.RunID, a.Timestamp = run, time.Unix(1700000000, 0).UTC()
		if _, err := st.Append(ctx, &a); err != nil {
			b.Fatal(err)
		}
	}
	add(ledger.Action{ActionID: "start", Type: ledger.RunStarted, Success: true})
	for it := 1; it <= iterations; it++ {
		itID := fmt.Sprintf("it-%d", it)
		add(ledger.Action{ActionID: itID, Type: ledger.IterationStarted, Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it))}})
		for k := 0; k < perIteration-2; k++ {
			add(ledger.Action{ActionID: fmt.Sprintf("%s-%d", itID, k), ParentActionID: itID, Type: ledger.CapabilityCall, FunctionName: "ccos.echo",
				Arguments: []rtfs.Value{rtfs.String("hello")}, Result: rtfs.String("hello"), Success: true, DurationMS: 3})
		}
		add(ledger.Action{ActionID: itID + "-end", Type: ledger.IterationCompleted, Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it)), "status": rtfs.String("ok")}})
	}
	if err := loop.PutRunRecord(ctx, st, loop.RunRecord{ID: run, State: loop.StateRunning, Iterations: iterations, Started: "2023-11-14T22:13:20Z"}); err != nil {
		b.Fatal(err)
	}
	return st, run
}

// BenchmarkRunPage100k renders the page of a run of 100,000 actions (1,000
// iterations of 100), as a browser asks for it.
func BenchmarkRunPage100k(b *testing.B) {
	st, run := bigRun(b, 1000, 100)
	srv, err := New(Options{Source: &testSource{st: st}, Token: testToken, Addr: "127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	var size int
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/runs/"+run, nil)
		req.Header.Set("Authorization", bearer)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("%d: %s", w.Code, w.Body.String())
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
}

func TestRunPageFoldsOldIterations(t *testing.T) {
	t.Parallel()
	st, run := bigRun(t, 40, 20) // 802 actions
	ts, srv := newTest(t, &testSource{st: st})
	srv.window = 512 // the last 25 iterations: the page shows 21 to 40
	_, body := get(t, ts.URL+"/runs/"+run, "Authorization", bearer)
	for _, w := range []string{`data-folded="20"`, `id="it-21"`, `id="it-40"`, `name="iteration" type="number"`} {
		if !strings.Contains(body, w) {
			t.Errorf("the page of a long run lacks %q", w)
		}
	}
	if strings.Contains(body, `id="it-20"`) {
		t.Error("the page shows iteration 20, which it folds")
	}
	_, body = get(t, ts.URL+"/runs/"+run+"?iteration=5", "Authorization", bearer)
	if !strings.Contains(body, `<li class="iteration" data-iteration="5"`) || !strings.Contains(body, `data-seq="`) || strings.Contains(body, `data-folded=`) {
		t.Error("?iteration=5 does not show iteration 5 of the whole run")
	}
}

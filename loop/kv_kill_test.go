package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// dyingLedger is the store as a process killed at its n-th append sees it:
// appends before the n-th commit, that one and every later one never do.
type dyingLedger struct {
	st *ledger.Store
	mu sync.Mutex
	n  int // appends left before the kill
}

var errKilled = errors.New("killed")

func (d *dyingLedger) Append(ctx context.Context, a *ledger.Action) (ledger.Receipt, error) {
	d.mu.Lock()
	d.n--
	dead := d.n < 0
	d.mu.Unlock()
	if dead {
		return ledger.Receipt{}, errKilled
	}
	return d.st.Append(ctx, a)
}

// TestKVAgreesWithTheChainAfterAKillAnywhere runs plans whose steps write
// to the kv (a kv.put, an idempotent step, a compensation that clears its
// record) with the process "killed" at each of their appends in turn, and
// checks after each that the kv holds exactly what the chain accounts for:
// RebuildKV's reading of the chain, on a store rebuilt from it alone.
func TestKVAgreesWithTheChainAfterAKillAnywhere(t *testing.T) {
	t.Parallel()
	plans := map[string]string{
		"kv.put":          `(do (call :kv.put {:key "c" :value 1}) (call :kv.put {:key "c" :value 2}))`,
		"idempotent step": `(step "Pay" ^{:idempotency {:key "pay" :scope :global}} (call :kv.put {:key "paid" :value true}))`,
		"compensated": `(step.with-compensation
  (step "Debit" ^{:idempotency {:key "debit-1" :scope :global}} (call :kv.put {:key "d" :value 10}))
  (step "Refund" (call :kv.put {:key "d" :value 0}))
  (call :test.fail 1))`,
	}
	for name, src := range plans {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for kill := 0; ; kill++ {
				store, err := ledger.Open(ledger.Options{InMemory: true})
				if err != nil {
					t.Fatal(err)
				}
				fx := newFixture(t, governance.Constitution{}, store, nil)
				dl := &dyingLedger{st: store, n: kill}
				fx.orch.o.Ledger = dl
				_, execErr := fx.exec(t, src, rtfs.Nil)
				got := kvLines(t, store)
				want := rebuiltKV(t, store)
				store.Close()
				if got != want {
					t.Fatalf("killed at append %d: the kv holds\n%s\nbut the chain accounts for\n%s", kill+1, got, want)
				}
				if dl.n >= 0 { // the plan ended before the kill
					if kill == 0 {
						t.Fatalf("the plan recorded nothing: %v", execErr)
					}
					t.Logf("%d kill points", kill)
					return
				}
			}
		})
	}
}

// kvLines lists a store's user and idempotency entries, one a line.
func kvLines(t *testing.T, st *ledger.Store) string {
	t.Helper()
	var out string
	err := st.KV().Scan("", func(k string, v rtfs.Value) bool {
		if !strings.HasPrefix(k, RunKVPrefix) {
			out += fmt.Sprintf("%s = %s\n", k, rtfs.Print(v))
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rebuiltKV is kvLines of a fresh store into which the chain's effects
// were replayed (kvWritten, as RebuildKV does).
func rebuiltKV(t *testing.T, st *ledger.Store) string {
	t.Helper()
	fresh, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	err = st.Range(1, func(a ledger.Action) error {
		if k, v, ok := kvWritten(&a); ok {
			return fresh.KV().Put(context.Background(), k, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return kvLines(t, fresh)
}

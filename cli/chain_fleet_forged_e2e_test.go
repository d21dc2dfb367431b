package cli_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/ledger"
)

// The forged segment: a run's chain re-imported under the forger's
// own key, one shell.exec action added and published on the run's chain
// subject, with a garbage message before it. `chain verify --nats` skips
// the garbage and says so; with the worker's key pinned it refuses the
// forged segment naming its line, its stream message and the forger's key,
// never "the bundle reader stopped".
func TestE2EChainVerifyNatsNamesForgedSegment(t *testing.T) {
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
	t.Parallel()
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	store := filepath.Join(t.TempDir(), "store")
	id := quickstartRun(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := ledger.Open(ledger.Options{Dir: store, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	vkey := st.VerifierKeyString()
	r, err := fleet.Replicate(ctx, fj.js, st, id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil { // a run handed back: no end line yet
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := fleet.PutState(ctx, fj.h.Runs, fleet.RunState{RunID: id, State: fleet.StateHandedBack, Worker: "w1", Deliveries: 1,
		Submitted: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	garbage, err := fj.js.Publish(ctx, fleet.ChainSubject(id), []byte("not a line"))
	if err != nil {
		t.Fatal(err)
	}

	forged, info, err := fleet.RebuildStore(ctx, fj.js, id, ledger.Options{InMemory: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer forged.Close()
	fr, err := fleet.Replicate(ctx, fj.js, forged, id, info.Actions+1, info.LastStreamSeq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := forged.Append(ctx, &ledger.Action{RunID: id, ActionID: id + "-forged", Type: ledger.CapabilityCall,
		FunctionName: "shell.exec", Success: true, Timestamp: now}); err != nil {
		t.Fatal(err)
	}
	if err := fr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	keyMsg, err := fj.h.Chains.GetMsg(ctx, garbage.Sequence+1)
	if err != nil || keyMsg.Header.Get(fleet.HeaderSeq) != strconv.FormatUint(info.Actions+1, 10) {
		t.Fatalf("the forged key line is not the message after the garbage: %v %v", keyMsg, err)
	}

	out, stderr, code := runBinary(t, ralphBin, "", "chain", "verify", "--nats", url, "--run", id)
	skipped := "skipped 1 message on the run's chain subject, not part of its chain:\n  a message in the stream of run " +
		id + " (message " + strconv.FormatUint(garbage.Sequence, 10) + " of stream RALPH_CHAINS): it is not a chain line"
	if code != 0 || !strings.Contains(out, skipped) || !strings.Contains(out, "one per worker that ran it") {
		t.Errorf("chain verify --nats: exit %d, %q %q; want it to name the skipped message", code, out, stderr)
	}
	_, stderr, code = runBinary(t, ralphBin, "", "chain", "verify", "--nats", url, "--run", id, "--key", vkey)
	line := 0 // the forged key's line in the bundle the stream makes
	for i, l := range strings.Split(bundleOf(t, ctx, fj, id), "\n") {
		if l == "key "+forged.VerifierKeyString() {
			line = i + 1
		}
	}
	want := "the chain of run " + id + " in stream RALPH_CHAINS does not verify: line " + strconv.Itoa(line) +
		" (key line of the segment from action " + strconv.FormatUint(info.Actions+1, 10) + ", message " +
		strconv.FormatUint(keyMsg.Sequence, 10) + " of the stream): the checkpoints after this line are signed by key " +
		forged.VerifierKeyString() + ", not by the pinned key " + vkey
	if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "bundle reader stopped") {
		t.Errorf("chain verify --nats --key: exit %d, %q\nwant %s", code, stderr, want)
	}
}

// bundleOf is the run's chain as the fleet's stream holds it, as a bundle.
func bundleOf(t *testing.T, ctx context.Context, fj fleetJobs, id string) string {
	t.Helper()
	var b strings.Builder
	if _, err := fleet.ReadChain(ctx, fj.js, id, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

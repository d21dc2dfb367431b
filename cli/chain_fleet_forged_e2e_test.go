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
	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/ledger"
)

// The forged segment: a run's chain re-imported under the forger's
// own key, one shell.exec action added and published on the run's chain
// subject, with a garbage message before it. Uncertified, `chain verify
// --nats` leaves it out and fails naming its message, the forger's key and
// the fleet key; certified (a compromised worker's key), it is part of the
// chain, and with the worker's key pinned it is refused naming its line,
// its stream message and the forger's key, never "the bundle reader
// stopped".
var _ = suite.Add(e2e.Test{Name: "ChainVerifyNatsNamesForgedSegment", Run: func(t *testing.T, e *e2e.E) {
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	worker := fleettest.Signer(t, url, fleet.RoleWorker)
	store := filepath.Join(t.TempDir(), "store")
	id := quickstartRun(t, e, store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	roster, err := fleet.FetchRoster(ctx, fj.js.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(ledger.Options{Dir: store, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	vkey := st.VerifierKeyString()
	cert, err := fleet.Certify(ctx, fj.js.Conn(), worker, vkey)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fleet.Replicate(ctx, fj.js, st, id, 1, 0, fleet.WithCertificate(cert))
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
	// forge publishes the chain so far, re-imported under a new key, with
	// one forged action, as a segment certified by cert (none: uncertified).
	forge := func(certify bool) (*ledger.Store, fleet.ChainInfo, uint64) {
		forged, info, err := fleet.RebuildStore(ctx, fj.js, id, ledger.Options{InMemory: true}, nil, fleet.WithFleetKey(roster.FleetKey))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { forged.Close() })
		var opts []fleet.ReplicateOption
		if certify {
			c, err := fleet.Certify(ctx, fj.js.Conn(), worker, forged.VerifierKeyString())
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, fleet.WithCertificate(c))
		}
		fr, err := fleet.Replicate(ctx, fj.js, forged, id, info.Actions+1, info.LastStreamSeq, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := forged.Append(ctx, &ledger.Action{RunID: id, ActionID: id + "-forged-" + strconv.FormatBool(certify), Type: ledger.CapabilityCall,
			FunctionName: "shell.exec", Success: true, Timestamp: now}); err != nil {
			t.Fatal(err)
		}
		if err := fr.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return forged, info, info.LastStreamSeq + 1
	}

	uncert, uinfo, uncertMsg := forge(false)
	if uncertMsg != garbage.Sequence+1 {
		t.Fatalf("the forged key line is message %d, not the one after the garbage (%d)", uncertMsg, garbage.Sequence)
	}
	out, stderr, code := e.Ralph("chain", "verify", "--nats", url, "--run", id).Run()
	skipped := "  a message in the stream of run " + id + " (message " + strconv.FormatUint(garbage.Sequence, 10) + " of stream RALPH_CHAINS): it is not a chain line"
	notCert := "key line of the segment from action " + strconv.FormatUint(uinfo.Actions+1, 10) + " in the stream of run " + id + " (message " + strconv.FormatUint(uncertMsg, 10) +
		" of stream RALPH_CHAINS): key " + uncert.VerifierKeyString()[:12] + "… is not certified by fleet key " + roster.FleetKey[:12] + "… (its key line carries no certificate)"
	if code != 1 || !strings.Contains(out, skipped) || !strings.Contains(out, "  "+notCert) ||
		!strings.Contains(stderr, "was written to by a key the fleet did not certify (1 segment(s), left out above): "+notCert) {
		t.Errorf("chain verify --nats of an uncertified segment: exit %d, %q %q\nwant it to name %s", code, out, stderr, notCert)
	}

	forged, info, keySeq := forge(true)
	out, stderr, code = e.Ralph("chain", "verify", "--nats", url, "--run", id).Run()
	if code != 1 || !strings.Contains(out, "one per worker that ran it") {
		t.Errorf("chain verify --nats with a certified forger: exit %d, %q %q", code, out, stderr)
	}
	_, stderr, code = e.Ralph("chain", "verify", "--nats", url, "--run", id, "--key", vkey).Run()
	line := 0 // the forged key's line in the bundle the stream makes
	for i, l := range strings.Split(bundleOf(t, ctx, fj, id, roster.FleetKey), "\n") {
		if l == "key "+forged.VerifierKeyString() {
			line = i + 1
		}
	}
	want := "the chain of run " + id + " in stream RALPH_CHAINS does not verify: line " + strconv.Itoa(line) +
		" (key line of the segment from action " + strconv.FormatUint(info.Actions+1, 10) + ", message " +
		strconv.FormatUint(keySeq, 10) + " of the stream): the checkpoints after this line are signed by key " +
		forged.VerifierKeyString() + ", not by the pinned key " + vkey
	if line == 0 || code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "bundle reader stopped") {
		t.Errorf("chain verify --nats --key: exit %d, %q\nwant %s", code, stderr, want)
	}
}})

// bundleOf is the run's chain as the fleet's stream holds it, as a bundle.
func bundleOf(t *testing.T, ctx context.Context, fj fleetJobs, id, fleetKey string) string {
	t.Helper()
	var b strings.Builder
	if _, err := fleet.ReadChain(ctx, fj.js, id, &b, fleet.WithFleetKey(fleetKey)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
)

// Reader reads a fleet for a command given --nats URL: its runs' states,
// and a run's chain as the fleet's stream holds it, verified on the way
// and accepting only segments under keys the fleet certified, or rebuilt
// into an in-memory store that reads as a local one (RunReader).
type Reader struct {
	URL string
	NC  *nats.Conn
	JS  jetstream.JetStream
}

// OpenReader connects to the fleet at url as Dial does; name names the
// connection.
func OpenReader(ctx context.Context, url, name string, s *SignIn) (*Reader, error) {
	nc, err := Dial(ctx, url, name, s)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Reader{URL: url, NC: nc, JS: js}, nil
}

func (f *Reader) Close() { f.NC.Close() }

// certified is the read option that accepts only segments under keys the
// fleet key certified, the key asked of the fleet's keeper (only the
// keeper answers on its subjects, §17).
func (f *Reader) certified(ctx context.Context) (ReadOption, error) {
	r, err := FetchRoster(ctx, f.NC)
	if err != nil {
		return nil, fmt.Errorf("the fleet at %s: %w", f.URL, err)
	}
	return WithFleetKey(r.FleetKey), nil
}

// States reads every run's state from the runs bucket, oldest submission
// first; a fleet no one has submitted to yet has none.
func (f *Reader) States(ctx context.Context) ([]RunState, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	kv, err := f.JS.KeyValue(ctx, BucketRuns)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return nil, usage.Errorf("the NATS server at %s has no JetStream, so it holds no fleet; pass the --nats URL of the fleet's server", f.URL)
	case err != nil:
		return nil, fmt.Errorf("read the fleet's runs at %s: %w", f.URL, err)
	}
	return ListStates(ctx, kv)
}

// LiveWorkers are the ids of the workers heartbeating now (none when the
// fleet has no workers bucket yet).
func (f *Reader) LiveWorkers(ctx context.Context) (map[string]bool, error) {
	live := map[string]bool{}
	kv, err := f.JS.KeyValue(ctx, BucketWorkers)
	if err != nil {
		return live, nil
	}
	workers, err := ListWorkers(ctx, kv)
	if err != nil {
		return nil, err
	}
	for _, w := range workers {
		live[w.ID] = true
	}
	return live, nil
}

// Resolve finds the run id (a unique prefix of one, or loop.LatestRun: the
// run submitted last) names among the fleet's runs; none is a usage error.
func (f *Reader) Resolve(ctx context.Context, id string) (RunState, error) {
	runs, err := f.States(ctx)
	if err != nil {
		return RunState{}, err
	}
	i, err := loop.MatchRun(runs, func(r RunState) string { return r.RunID }, id, " of the fleet")
	switch {
	case err != nil:
		return RunState{}, err
	case i >= 0:
		return runs[i], nil
	case id == loop.LatestRun:
		return RunState{}, usage.Errorf("the fleet at %s has no runs yet; `ralph submit` queues one", f.URL)
	}
	return RunState{}, usage.Errorf("the fleet at %s has no run %s; `ralph runs --nats %s` lists them", f.URL, id, f.URL)
}

// VerifyChain is VerifyChain of run's chain (its segments' keys pinned
// when pinned names any), with the fleet's certified keys.
func (f *Reader) VerifyChain(ctx context.Context, run string, pinned []string) (ledger.BundleReport, ChainInfo, error) {
	cert, err := f.certified(ctx)
	if err != nil {
		return ledger.BundleReport{}, ChainInfo{}, err
	}
	return VerifyChain(ctx, f.JS, run, pinned, cert)
}

// ReadChain is ReadChain of run's chain, as a bundle on w, with the
// fleet's certified keys.
func (f *Reader) ReadChain(ctx context.Context, run string, w io.Writer) (ChainInfo, error) {
	cert, err := f.certified(ctx)
	if err != nil {
		return ChainInfo{}, err
	}
	return ReadChain(ctx, f.JS, run, w, cert)
}

// RunReader is one run's chain, rebuilt from the fleet's stream into an
// in-memory store: a serve.Reader whose run is resolved already.
type RunReader struct {
	serve.LocalReader
	Fleet *Reader
	Run   RunState
}

// Dir names where the chain came from, for messages.
func (r RunReader) Dir() string {
	return fmt.Sprintf("the chain of run %s in the fleet at %s", r.Run.RunID, r.Fleet.URL)
}

// Close closes the rebuilt store and the connection to the fleet.
func (r RunReader) Close() error {
	err := r.Store.Close()
	r.Fleet.Close()
	return err
}

// ResolvedRun is the run the fleet resolved (serve.ResolveRun takes it).
func (r RunReader) ResolvedRun() (id, started string) {
	if !r.Run.Started.IsZero() {
		started = r.Run.Started.UTC().Format(time.RFC3339)
	}
	return r.Run.RunID, started
}

// Rebuild reads the chain of the run id names (as Resolve finds it) from
// the stream, verifying it (with the pinned keys, when any), into an
// in-memory store. A run queued that has recorded nothing yet is a usage
// error. The RunReader's Close closes f too.
func (f *Reader) Rebuild(ctx context.Context, id string, pinned []string) (RunReader, error) {
	run, err := f.Resolve(ctx, id)
	if err != nil {
		return RunReader{}, err
	}
	cert, err := f.certified(ctx)
	if err != nil {
		return RunReader{}, err
	}
	st, _, err := RebuildStore(ctx, f.JS, run.RunID, ledger.Options{InMemory: true}, pinned, cert)
	if err != nil {
		if run.State == StateQueued {
			return RunReader{}, usage.Errorf("run %s is queued and has recorded nothing yet; `ralph runs --nats %s` shows when a worker takes it", run.RunID, f.URL)
		}
		return RunReader{}, err
	}
	return RunReader{LocalReader: serve.LocalReader{Store: st}, Fleet: f, Run: run}, nil
}

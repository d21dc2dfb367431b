package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// ErrNotServed is Dial's error when no process serves the store: no socket,
// or a socket nothing answers on (its process is gone).
var ErrNotServed = errors.New("no process serves this store")

// Client reads a store another process holds, through its socket. Its
// methods mirror *ledger.Store's reading ones, so code written against an
// interface both satisfy reads a held store as it reads a free one.
type Client struct {
	path string
	hc   *http.Client
	info Info
}

// Dial connects to the process serving the store at dir and reads its
// Info. errors.Is(err, ErrNotServed) when nothing serves it.
func Dial(ctx context.Context, dir string) (*Client, error) {
	path := SocketPath(dir)
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	c, err := DialConn(ctx, path, func(ctx context.Context) (net.Conn, error) {
		return dialer.DialContext(ctx, "unix", path)
	})
	var de *dialError
	switch {
	case errors.As(err, &de) && (errors.Is(de.err, syscall.ENOENT) || errors.Is(de.err, syscall.ECONNREFUSED)):
		return nil, fmt.Errorf("%w (%s)", ErrNotServed, path)
	case errors.As(err, &de):
		return nil, fmt.Errorf("reach the store's socket %s: %w", path, de.err)
	}
	return c, err
}

// DialConn is a Client that speaks to a store's server over the
// connections dial makes (each one a connection to the server, as Dial's
// to its socket are): a tunnel to a run on another machine, for one. name
// names the server in errors. The first connection is made before
// DialConn returns, and its error is returned as dial gave it.
func DialConn(ctx context.Context, name string, dial func(ctx context.Context) (net.Conn, error)) (*Client, error) {
	first, err := dial(ctx)
	if err != nil {
		return nil, &dialError{err}
	}
	h := &handOff{conn: first}
	c := &Client{path: name, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if conn := h.take(); conn != nil {
				return conn, nil
			}
			return dial(ctx)
		},
		MaxIdleConnsPerHost: 4,
	}}}
	err = c.getJSON(ctx, "/v1/info", &c.info)
	if conn := h.take(); conn != nil { // not used: the request failed before it dialed
		conn.Close()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// dialError is DialConn's error when its first dial fails: dial's own.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// handOff holds DialConn's first connection until the transport's first
// dial takes it.
type handOff struct {
	mu   sync.Mutex
	conn net.Conn
}

func (h *handOff) take() net.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conn
	h.conn = nil
	return c
}

// Info is what the server said when Dial connected.
func (c *Client) Info() Info { return c.info }

// Refresh asks the server for its Info again.
func (c *Client) Refresh(ctx context.Context) (Info, error) {
	var in Info
	err := c.getJSON(ctx, "/v1/info", &in)
	if err == nil {
		c.info = in
	}
	return in, err
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// Dir is the served store's directory.
func (c *Client) Dir() string { return c.info.Store }

// Head is the chain's head as of the last Info (Dial or Refresh).
func (c *Client) Head() ledger.Head { return ledger.Head{Seq: c.info.Head} }

// HTTPError is an error answer from the server: its status and sentence.
type HTTPError struct {
	Status int
	Msg    string
}

func (e *HTTPError) Error() string { return e.Msg }

// answerError is the server's sentence for an error the store names with
// a sentinel (ledger.ErrNotFound): the same words, and errors.Is holds.
type answerError struct {
	msg  string
	kind error
}

func (e *answerError) Error() string { return e.msg }
func (e *answerError) Unwrap() error { return e.kind }

func (c *Client) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://ralph"+path, nil)
	if err != nil {
		return nil, err
	}
	return c.do(req)
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the process serving the store (%s) did not answer: %w", c.path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb errorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("the store's server answered %s", resp.Status)
		}
		return nil, &HTTPError{Status: resp.StatusCode, Msg: eb.Error}
	}
	return resp, nil
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("read the store's server's answer to %s: %w", path, err)
	}
	return nil
}

// ListRuns is loop.ListRuns on the served store.
func (c *Client) ListRuns() ([]loop.RunRecord, error) {
	var runs []loop.RunRecord
	err := c.getJSON(context.Background(), "/v1/runs", &runs)
	return runs, err
}

// Select calls fn for every action f selects, in seq order (Store.Select).
func (c *Client) Select(f ledger.Filter, fn func(ledger.Action) error) error {
	q := url.Values{}
	for k, v := range map[string]string{"run": f.RunID, "plan": f.PlanID, "intent": f.IntentID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.FromSeq > 0 {
		q.Set("from", strconv.FormatUint(f.FromSeq, 10))
	}
	return c.stream(context.Background(), "/v1/actions?"+q.Encode(), fn)
}

// Range calls fn for every action from fromSeq on (Store.Range).
func (c *Client) Range(fromSeq uint64, fn func(ledger.Action) error) error {
	return c.Select(ledger.Filter{FromSeq: fromSeq}, fn)
}

// ByRun returns the run's actions in seq order (Store.ByRun).
func (c *Client) ByRun(runID string) ([]ledger.Action, error) {
	var out []ledger.Action
	err := c.Select(ledger.Filter{RunID: runID}, func(a ledger.Action) error {
		out = append(out, a)
		return nil
	})
	return out, err
}

// stream reads an NDJSON action stream. Decoding JSON costs far more than
// reading it, so lines are decoded in batches by one worker per CPU while
// fn still sees the actions in order. A line with only "error" is the
// server's error after the stream began.
func (c *Client) stream(ctx context.Context, path string, fn func(ledger.Action) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	workers := max(1, runtime.GOMAXPROCS(0))
	order := make(chan *lineBatch, 2*workers) // batches in stream order
	work := make(chan *lineBatch, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				b.decode()
			}
		}()
	}
	defer wg.Wait()
	go splitBatches(ctx, resp.Body, order, work)
	return deliverBatches(ctx, order, fn)
}

// splitBatches is stream's reader: it splits body into batches of lines
// and sends each on order (for deliverBatches) and then on work (for a
// decoder), until the body ends or breaks, or ctx ends. It closes both.
func splitBatches(ctx context.Context, body io.Reader, order, work chan<- *lineBatch) {
	defer close(order)
	defer close(work)
	br := bufio.NewReaderSize(body, 256<<10)
	for {
		b, err := readBatch(br)
		select {
		case order <- b:
		case <-ctx.Done():
			return
		}
		select {
		case work <- b:
		case <-ctx.Done():
			close(b.done)
			return
		}
		if err != nil {
			return
		}
	}
}

// readBatch reads up to streamBatch non-blank lines; err is the error that
// ended the batch early (io.EOF at the body's end), which any other than
// io.EOF also sets as the batch's readErr.
func readBatch(br *bufio.Reader) (*lineBatch, error) {
	b := &lineBatch{done: make(chan struct{})}
	var err error
	for len(b.lines) < streamBatch {
		var line []byte
		if line, err = br.ReadBytes('\n'); len(bytes.TrimSpace(line)) > 0 {
			b.lines = append(b.lines, line)
		}
		if err != nil {
			break
		}
	}
	if err != nil && err != io.EOF {
		b.readErr = fmt.Errorf("read actions from the store's server: %w", err)
	}
	return b, err
}

// deliverBatches hands fn the actions of each batch from order, in order,
// once it is decoded; it stops at fn's error, a batch's error, or ctx's.
func deliverBatches(ctx context.Context, order <-chan *lineBatch, fn func(ledger.Action) error) error {
	for b := range order {
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i := range b.acts {
			if err := fn(b.acts[i]); err != nil {
				return err
			}
		}
		if b.err != nil {
			return b.err
		}
		if b.readErr != nil {
			return b.readErr
		}
	}
	return nil
}

// streamBatch is how many NDJSON lines one decoding job holds.
const streamBatch = 256

// lineBatch is a run of NDJSON action lines and what they decode to; done
// closes when acts (and err, at the first bad line) are set.
type lineBatch struct {
	lines   [][]byte
	acts    []ledger.Action
	err     error // a line that is the server's error, or does not decode
	readErr error // the stream broke after lines
	done    chan struct{}
}

func (b *lineBatch) decode() {
	defer close(b.done)
	b.acts = make([]ledger.Action, 0, len(b.lines))
	for _, line := range b.lines {
		if bytes.HasPrefix(line, []byte(`{"error":`)) {
			var eb errorBody
			if json.Unmarshal(line, &eb) == nil {
				b.err = errors.New(eb.Error)
				return
			}
		}
		var a ledger.Action
		if err := a.UnmarshalJSON(bytes.TrimSpace(line)); err != nil {
			b.err = fmt.Errorf("read an action from the store's server: %w", err)
			return
		}
		b.acts = append(b.acts, a)
	}
	b.lines = nil
}

// GetSeq returns the action at seq (Store.GetSeq); ledger.ErrNotFound when
// there is none.
func (c *Client) GetSeq(seq uint64) (ledger.Action, error) {
	return c.action(context.Background(), "/v1/actions/"+strconv.FormatUint(seq, 10))
}

// Get returns the action with actionID (Store.Get).
func (c *Client) Get(actionID string) (ledger.Action, error) {
	return c.action(context.Background(), "/v1/action?id="+url.QueryEscape(actionID))
}

func (c *Client) action(ctx context.Context, path string) (ledger.Action, error) {
	var a ledger.Action
	resp, err := c.get(ctx, path)
	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return a, &answerError{he.Msg, ledger.ErrNotFound}
	}
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, fmt.Errorf("read an action from the store's server: %w", err)
	}
	if err := a.UnmarshalJSON(bytes.TrimSpace(b)); err != nil {
		return a, fmt.Errorf("read an action from the store's server: %w", err)
	}
	return a, nil
}

// Verify verifies the served chain up to a consistent head: the server
// verifies one snapshot while the run goes on appending (Store.Verify;
// progress is not reported).
func (c *Client) Verify(ctx context.Context, _ func(done, total uint64)) (ledger.VerifyReport, error) {
	return c.VerifyWith(ctx, ledger.VerifyOptions{})
}

// VerifyWith is Store.VerifyWith in the serving process (progress is not
// reported).
func (c *Client) VerifyWith(ctx context.Context, opts ledger.VerifyOptions) (ledger.VerifyReport, error) {
	body, err := json.Marshal(verifyRequest{Key: opts.Key, Since: opts.Since})
	if err != nil {
		return ledger.VerifyReport{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ralph/v1/verify", bytes.NewReader(body))
	if err != nil {
		return ledger.VerifyReport{}, err
	}
	resp, err := c.do(req)
	if err != nil {
		return ledger.VerifyReport{}, err
	}
	defer resp.Body.Close()
	var w wireReport
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		return ledger.VerifyReport{}, fmt.Errorf("read the verification from the store's server: %w", err)
	}
	rep := ledger.VerifyReport{Actions: w.Actions, Checkpoints: w.Checkpoints, IndexEntries: w.IndexEntries,
		Head: ledger.Head{Seq: w.HeadSeq, ChainHash: w.HeadChain}, TrustedKey: w.TrustedKey, Pinned: w.Pinned, Root: w.Root,
		Consistent: w.Consistent}
	for _, p := range w.Problems {
		rep.Problems = append(rep.Problems, ledger.Problem{Seq: p.Seq, Reason: p.Reason})
	}
	switch {
	case w.Err != "":
		return rep, errors.New(w.Err)
	case len(rep.Problems) > 0:
		return rep, &ledger.IntegrityError{Seq: rep.Problems[0].Seq, Reason: rep.Problems[0].Reason}
	}
	return rep, nil
}

// ID is the served store's id (Store.ID).
func (c *Client) ID() string { return c.info.StoreID }

// VerifierKeyString is the served store's verifier key.
func (c *Client) VerifierKeyString() string { return c.info.VerifierKey }

// LatestCheckpoint is Store.LatestCheckpoint in the serving process.
func (c *Client) LatestCheckpoint() (ledger.Checkpoint, error) {
	var cp ledger.Checkpoint
	err := c.getJSON(context.Background(), "/v1/checkpoint", &cp)
	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return cp, &answerError{he.Msg, ledger.ErrNoTreeCheckpoint}
	}
	return cp, err
}

// ProveInclusion is Store.ProveInclusion in the serving process.
func (c *Client) ProveInclusion(ctx context.Context, seq uint64) (ledger.InclusionProof, error) {
	var p ledger.InclusionProof
	err := c.getJSON(ctx, "/v1/prove/"+strconv.FormatUint(seq, 10), &p)
	var he *HTTPError
	switch {
	case errors.As(err, &he) && he.Status == http.StatusNotFound:
		return p, &answerError{he.Msg, ledger.ErrNotFound}
	case errors.As(err, &he) && he.Status == http.StatusConflict:
		return p, &answerError{he.Msg, ledger.ErrNoTreeCheckpoint}
	}
	return p, err
}

// VerifyAction proves the action at seq (Store.VerifyAction).
func (c *Client) VerifyAction(ctx context.Context, seq uint64) (ledger.ActionProof, error) {
	var p ledger.ActionProof
	err := c.getJSON(ctx, "/v1/verify/"+strconv.FormatUint(seq, 10), &p)
	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return p, &answerError{he.Msg, ledger.ErrNotFound}
	}
	return p, err
}

// Predicate evaluates src against the run's actions in the serving
// process (EvalPredicate there).
func (c *Client) Predicate(ctx context.Context, runID, src string) (PredicateReport, error) {
	var rep PredicateReport
	err := c.getJSON(ctx, "/v1/runs/"+url.PathEscape(runID)+"/predicate?expr="+url.QueryEscape(src), &rep)
	return rep, err
}

// Events streams the served run's events from the chain's fromSeq until
// ctx ends or the server goes; the channel then closes. ui counts this
// stream as an attached UI.
func (c *Client) Events(ctx context.Context, fromSeq uint64, ui bool) (<-chan loop.Event, error) {
	path := "/v1/events?from=" + strconv.FormatUint(fromSeq, 10)
	if ui {
		path += "&ui=1"
	}
	resp, err := c.get(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make(chan loop.Event, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 1 {
				e, derr := fromWire(line)
				if derr != nil {
					e = loop.Event{Kind: loop.EventLog, Time: time.Now(), Log: loop.LogLine{Level: slog.LevelError, Msg: derr.Error()}}
				}
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return out, nil
}

// Control sends one control: pause, resume, skip, abort, approve or
// decline (with the iteration whose plan is answered).
func (c *Client) Control(ctx context.Context, do string, iteration int) error {
	b, _ := json.Marshal(control{Do: do, Iteration: iteration}) // a string and an int cannot fail
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ralph/v1/control", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// ExportBundle writes the served store as a bundle (Store.ExportBundle),
// as the serving process writes it: the whole store up to a signed
// checkpoint, while appends go on. It returns the number of actions.
func (c *Client) ExportBundle(w io.Writer) (int, error) {
	resp, err := c.get(context.Background(), "/v1/bundle")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return 0, fmt.Errorf("read the bundle from the store's server: %w", err)
	}
	if msg := resp.Trailer.Get(trailerError); msg != "" {
		return 0, errors.New(msg)
	}
	n, err := strconv.Atoi(resp.Trailer.Get(trailerBundleActions))
	if err != nil {
		return 0, fmt.Errorf("the store's server ended the bundle without saying it was whole")
	}
	return n, nil
}

package stop

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// verdict is one success-class condition's answer in the same evaluation,
// as no_progress sees it: met or not, never its evidence (which holds
// timings, addresses and timestamps that change on every run).
type verdict struct {
	name  string
	met   bool
	class Class
}

// verdictReader is a checker that reads the verdicts of the other
// conditions; the evaluator checks it after them.
type verdictReader interface {
	readsVerdicts() bool
}

func readsVerdicts(c *Condition) bool {
	v, ok := c.check.(verdictReader)
	return ok && v.readsVerdicts()
}

// progressFingerprint is the no_progress fingerprint of one iteration: the
// content of the workspace and the success verdicts.
type progressFingerprint struct {
	sum      uint64
	tally    tally
	verdicts []verdict
}

// String is the evidence: it starts "fingerprint %016x", which restore
// reads back.
func (p progressFingerprint) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fingerprint %016x (%d files", p.sum, p.tally.files)
	if p.tally.git {
		b.WriteString(" listed by git")
	}
	b.WriteString(", " + strconv.Itoa(p.tally.read) + " read")
	if p.tally.capped {
		fmt.Fprintf(&b, ", cut at %d", maxProgressFiles)
	}
	for _, v := range p.verdicts {
		b.WriteString("; " + v.name + " " + metWord(v.met))
	}
	b.WriteString(")")
	return b.String()
}

// noProgress counts iterations whose fingerprint equals the previous one.
// It is stateful but idempotent per iteration: evaluating the same
// iteration again returns the same answer.
type noProgress struct {
	n int

	mu        sync.Mutex
	ws        workspace
	iteration int
	have      bool
	last      uint64
	unchanged int
	prev      outcome
}

func (c *noProgress) readsVerdicts() bool { return true }

func (c *noProgress) check(ctx context.Context, in *Input) outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && in.Iteration == c.iteration {
		return c.prev
	}
	p, err := c.fingerprintIteration(ctx, in)
	if err != nil {
		return outcome{err: err, detail: "error", reason: "cannot fingerprint the workdir: " + err.Error()}
	}
	switch {
	case !c.have:
		c.unchanged = 0
	case p.sum == c.last:
		c.unchanged++
	default:
		c.unchanged = 0
	}
	c.have, c.iteration, c.last = true, in.Iteration, p.sum
	o := outcome{met: c.unchanged >= c.n, progress: ratio(float64(c.unchanged), float64(c.n)),
		detail: fmt.Sprintf("no progress %d/%d", c.unchanged, c.n), evidence: p.String()}
	o.reason = fmt.Sprintf("%d unchanged iterations of %d allowed", c.unchanged, c.n)
	if o.met {
		o.reason = fmt.Sprintf("nothing changed for %d iterations", c.unchanged)
	}
	c.prev = o
	return o
}

// fingerprintIteration hashes the workspace's files and the success
// verdicts. Nothing the iteration printed is part of it: output carries
// timings ("ok pkg 0.003s"), addresses and timestamps that differ on every
// run of the same, stuck, work.
func (c *noProgress) fingerprintIteration(ctx context.Context, in *Input) (progressFingerprint, error) {
	f := newFP()
	var p progressFingerprint
	if in.Workspace != "" {
		f.str(in.Workspace)
	} else if in.Workdir != "" {
		t, err := c.ws.hash(ctx, in.Workdir, in.StoreDir, &f)
		if err != nil {
			return p, err
		}
		p.tally = t
	}
	for _, v := range in.verdicts {
		if v.class != ClassSuccess {
			continue
		}
		f.str(v.name)
		f.boolean(v.met)
		p.verdicts = append(p.verdicts, v)
	}
	p.sum = f.sum()
	return p, nil
}

// restore takes the count and the last fingerprint back from a recorded
// result ("no progress 2/3", "fingerprint 89ab…").
func (c *noProgress) restore(iteration int, r Result) {
	var unchanged, n int
	var sum uint64
	if _, err := fmt.Sscanf(r.Detail, "no progress %d/%d", &unchanged, &n); err != nil {
		return
	}
	if _, err := fmt.Sscanf(r.Evidence, "fingerprint %x", &sum); err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.have, c.iteration, c.last, c.unchanged = true, iteration, sum, unchanged
	c.prev = outcome{met: r.Met, progress: r.Progress, detail: r.Detail, evidence: r.Evidence, reason: r.Reason}
}

func (c *noProgress) fingerprint(in *Input, f *fp) bool {
	f.i64(int64(in.Iteration))
	f.u64(in.HeadSeq)
	return false
}

func (c *noProgress) inputs(in *Input) string {
	return fmt.Sprintf("iteration=%d workdir=%s verdicts=%d", in.Iteration, in.Workdir, len(in.verdicts))
}

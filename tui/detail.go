package tui

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// detailView shows every field of one action (enter on a chain row): its
// place in the chain, arguments, result and error, metadata, the links to
// the reasoning behind it (intent, rule, decision, attestation), and its
// verification: the action hash recomputed, the chain link to the previous
// action, and the signed checkpoint that covers it. A row with a closing
// action (a step and its PlanStepCompleted) shows that action too.
type detailView struct {
	st      *styles
	seq     uint64
	msg     *detailMsg // nil while loading
	verify  *verifyState
	offset  int
	h       int
	nLines  int
	loading bool
}

// detailMsg is what the detail command read from the store.
type detailMsg struct {
	seq       uint64
	action    *ledger.Action
	closer    *ledger.Action
	parent    string // summary of the parent action
	decision  string // summary of the delegation decision it names
	prevSeq   uint64
	hashOK    bool // action_hash matches the canonical encoding
	linkOK    bool // chain_hash = SHA-256(prev chain_hash ‖ action_hash ‖ seq)
	cpChain   ledger.Hash
	cpFound   bool
	err       error
	closerErr error
}

// verifyState is the last whole-store verification (ledger.Store.Verify):
// the only way to check checkpoint signatures from outside the ledger.
type verifyState struct {
	running bool
	report  ledger.VerifyReport
	err     error
}

type verifyMsg struct {
	report ledger.VerifyReport
	err    error
}

func newDetailView(st *styles) *detailView { return &detailView{st: st} }

func (d *detailView) open(seq uint64) {
	d.seq, d.msg, d.offset, d.loading = seq, nil, 0, true
}

func (d *detailView) set(msg detailMsg) {
	if msg.seq != d.seq {
		return // an answer for a row no longer shown
	}
	d.msg, d.loading = &msg, false
}

func (d *detailView) scrollBy(n int) {
	d.offset = min(max(d.offset+n, 0), max(0, d.nLines-d.h))
}

// openDetail shows the selected chain row's actions.
func (m *model) openDetail() tea.Cmd {
	idx, ok := m.chain.selected()
	if !ok || m.store == nil {
		return nil
	}
	n := m.tree.at(idx)
	end := uint64(0)
	if n.endDelta > 0 {
		end = n.seq + uint64(n.endDelta)
	}
	m.detail.open(n.seq)
	m.view = viewDetail
	return tea.Batch(fetchDetail(m.store, n.seq, end), m.startVerify(false))
}

// startVerify verifies the whole store in the background, once (or again
// when asked): the detail view names the checkpoint that signs an action
// and whether its signature verified.
func (m *model) startVerify(again bool) tea.Cmd {
	if m.store == nil || (m.verify != nil && (m.verify.running || !again)) {
		return nil
	}
	m.verify = &verifyState{running: true}
	st, ctx := m.store, m.ctx
	return func() tea.Msg {
		rep, err := st.Verify(ctx, nil) // ends with the UI: it holds the store's read lock, which Close waits for
		return verifyMsg{report: rep, err: err}
	}
}

func fetchDetail(st *ledger.Store, seq, end uint64) tea.Cmd {
	return func() tea.Msg {
		msg := detailMsg{seq: seq}
		a, err := st.GetSeq(seq)
		if err != nil {
			msg.err = err
			return msg
		}
		msg.action = &a
		if end > 0 {
			if c, err := st.GetSeq(end); err == nil {
				msg.closer = &c
			} else {
				msg.closerErr = err
			}
		}
		if a.ParentActionID != "" {
			if p, err := st.Get(a.ParentActionID); err == nil {
				msg.parent = ledger.Summary(&p)
			}
		}
		if id := a.Metadata[ledger.MetaDelegationDecisionID].Str(); id != "" {
			if p, err := st.Get(id); err == nil {
				msg.decision = ledger.Summary(&p)
			}
		}
		var prev ledger.Hash
		if seq > 1 {
			p, err := st.GetSeq(seq - 1)
			if err != nil {
				msg.err = fmt.Errorf("read the previous action: %w", err)
				return msg
			}
			prev, msg.prevSeq = p.ChainHash, seq-1
		}
		msg.hashOK = ledger.ComputeActionHash(&a) == a.ActionHash
		msg.linkOK = ledger.ChainLink(prev, a.ActionHash, a.Seq) == a.ChainHash
		if a.CheckpointSeq > 0 {
			if c, err := st.GetSeq(a.CheckpointSeq); err == nil {
				msg.cpChain, msg.cpFound = c.ChainHash, true
			}
		}
		return msg
	}
}

func (d *detailView) Render(width, height int) string {
	return strings.Join(d.lines(width, height), "\n")
}

func (d *detailView) lines(width, height int) []string {
	d.h = max(0, height-2)
	w := width - 3
	var body []string
	title := "Detail"
	switch {
	case d.msg == nil:
		body = []string{d.st.dim.Render("reading seq " + strconv.FormatUint(d.seq, 10) + " from the store…")}
	case d.msg.err != nil:
		body = []string{d.st.fail.Render("✗ " + d.msg.err.Error())}
	default:
		a := d.msg.action
		title = "Detail · #" + strconv.FormatUint(a.Seq, 10) + " " + a.Type.String()
		body = d.content(w)
	}
	d.nLines = len(body)
	d.scrollBy(0)
	rows := make([]string, 0, d.h)
	for _, l := range body[d.offset:min(len(body), d.offset+d.h)] {
		rows = append(rows, " "+l)
	}
	return d.st.frame(title, "esc back · r verify", true, width, height, rows)
}

const fieldW = 16

func (d *detailView) content(w int) []string {
	st, msg, a := d.st, d.msg, d.msg.action
	var out []string
	fieldW := fieldW
	field := func(name, value string) {
		nw := max(fieldW, ansi.StringWidth(name)+2)
		lines := wrap(value, max(10, w-nw))
		if len(lines) == 0 {
			lines = []string{""}
		}
		out = append(out, st.dim.Render(fit(name, nw))+lines[0])
		for _, l := range lines[1:] {
			out = append(out, strings.Repeat(" ", nw)+l)
		}
	}
	section := func(name string) { out = append(out, "", st.bold.Render(name)) }
	verdict := st.ok.Render("✓ succeeded")
	if !a.Success {
		verdict = st.fail.Render("✗ failed")
	}
	out = append(out, spread(st.bold.Render(ledger.Summary(a)), verdict, w), "")
	field("seq", strconv.FormatUint(a.Seq, 10))
	field("action_id", a.ActionID)
	parent := a.ParentActionID
	if msg.parent != "" {
		parent += " — " + msg.parent
	}
	field("parent", orNone(parent))
	field("run_id", a.RunID)
	field("plan_id", orNone(a.PlanID))
	field("intent_id", orNone(a.IntentID))
	field("function", orNone(a.FunctionName))
	field("timestamp", a.Timestamp.UTC().Format(time.RFC3339Nano))
	field("duration", fmtDur(time.Duration(a.DurationMS)*time.Millisecond))
	field("cost", fmt.Sprintf("$%.4f", a.Cost))
	section("verification")
	d.verification(field)
	section("data")
	args := make([]string, len(a.Arguments))
	for i, v := range a.Arguments {
		args[i] = rtfs.Print(v)
	}
	field("arguments", orNone(strings.Join(args, " ")))
	field("result", orNone(printValue(a.Result)))
	field("error", orNone(a.ErrorMessage))
	section("links")
	field("intent", orNone(a.IntentID))
	field("rule", orNone(a.Metadata[ledger.MetaConstitutionalRuleID].Str()))
	dec := a.Metadata[ledger.MetaDelegationDecisionID].Str()
	if msg.decision != "" {
		dec += " — " + msg.decision
	}
	field("decision", orNone(dec))
	field("attestation", orNone(a.Metadata[ledger.MetaCapabilityAttestationID].Str()))
	section("metadata")
	keys := make([]string, 0, len(a.Metadata))
	for k := range a.Metadata {
		keys = append(keys, k)
		fieldW = max(fieldW, min(len(k)+2, w/2))
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := a.Metadata[k]
		s := rtfs.Print(v)
		if v.Kind() == rtfs.KindString {
			s = v.Str()
		}
		field(k, s)
	}
	if len(keys) == 0 {
		out = append(out, st.dim.Render("none"))
	}
	fieldW = 16
	if c := msg.closer; c != nil {
		section("closed by " + ledger.Summary(c))
		field("seq", strconv.FormatUint(c.Seq, 10))
		field("action_id", c.ActionID)
		field("timestamp", c.Timestamp.UTC().Format(time.RFC3339Nano))
		field("duration", fmtDur(time.Duration(c.DurationMS)*time.Millisecond))
		field("result", orNone(printValue(c.Result)))
		field("error", orNone(c.ErrorMessage))
		field("action_hash", c.ActionHash.String())
		field("chain_hash", c.ChainHash.String())
		field("checkpoint", "seq "+strconv.FormatUint(c.CheckpointSeq, 10))
	} else if msg.closerErr != nil {
		out = append(out, "", st.fail.Render("closing action: "+msg.closerErr.Error()))
	}
	return out
}

// verification writes the hash, link and checkpoint checks with field.
func (d *detailView) verification(field func(name, value string)) {
	st, msg, a := d.st, d.msg, d.msg.action
	mark := func(ok bool, yes, no string) string {
		if ok {
			return st.ok.Render("✓ " + yes)
		}
		return st.fail.Render("✗ " + no)
	}
	field("action_hash", a.ActionHash.String())
	field("", mark(msg.hashOK, "recomputed from the canonical encoding", "does not match the canonical encoding"))
	field("chain_hash", a.ChainHash.String())
	link := "links to seq " + strconv.FormatUint(msg.prevSeq, 10)
	if msg.prevSeq == 0 {
		link = "links to the genesis hash (32 zero bytes)"
	}
	field("", mark(msg.linkOK, link, "does not follow from seq "+strconv.FormatUint(msg.prevSeq, 10)))
	cp := "seq " + strconv.FormatUint(a.CheckpointSeq, 10)
	if msg.cpFound {
		cp += " · chain_hash there " + msg.cpChain.String()[:16] + "…"
	}
	field("checkpoint", cp)
	field("signature", d.signature(a))
}

// signature says what the last whole-store verification found about the
// checkpoint that signs a.
func (d *detailView) signature(a *ledger.Action) string {
	st, v := d.st, d.verify
	var ie *ledger.IntegrityError
	switch {
	case v == nil:
		return st.dim.Render("not verified yet")
	case v.running:
		return st.dim.Render("verifying the whole store…")
	case errors.As(v.err, &ie):
		if ie.Seq <= a.CheckpointSeq {
			return st.fail.Render(fmt.Sprintf("✗ store verification failed at seq %d: %s", ie.Seq, ie.Reason))
		}
		return st.ok.Render(fmt.Sprintf("✓ Ed25519 signature verified (the store fails later, at seq %d)", ie.Seq))
	case v.err != nil:
		return st.fail.Render("✗ could not verify: " + v.err.Error())
	case v.report.Head.Seq < a.CheckpointSeq:
		return st.dim.Render(fmt.Sprintf("signed after the last verification (through seq %d); press r", v.report.Head.Seq))
	}
	return st.ok.Render(fmt.Sprintf("✓ Ed25519 signature verified (store verified: %d actions, %d checkpoints)",
		v.report.Actions, v.report.Checkpoints))
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func printValue(v rtfs.Value) string {
	if v.IsNil() {
		return ""
	}
	return rtfs.Print(v)
}

package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// detailView shows every field of one action (enter on a chain row): its
// place in the chain, arguments, result and error, metadata, the links to
// the reasoning behind it (intent, rule, decision, attestation), and its
// proof (ledger.Store.VerifyAction): the action hash recomputed, the chain
// link to the previous action, the checkpoint that signs it, its signature
// and the chain from the action to it — each fact on its own, so a failure
// shows which part broke. r verifies the whole store as well. A row with a
// closing action (a step and its PlanStepCompleted) shows that action too.
type detailView struct {
	fullScreen
	st      *styles
	seq     uint64
	end     uint64     // the closing action's seq; 0 if none
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
	proof     *ledger.ActionProof
	proofErr  error // the proof could not be made
	err       error
	closerErr error
	output    *callOutput // the end of the call's output file, when it recorded one
}

// verifyState is the last whole-store verification (ledger.Store.Verify),
// which r starts: it checks every action, checkpoint and index entry.
type verifyState struct {
	running bool
	report  ledger.VerifyReport
	err     error
}

type verifyMsg struct {
	report ledger.VerifyReport
	err    error
}

func newDetailView(st *styles) *detailView {
	return &detailView{fullScreen: fullScreen{"the detail view"}, st: st}
}

// key: r verifies the store and proves the action again (reverify); the
// rest as in every view.
func (d *detailView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) {
	if key.Matches(k, m.keys.Verify) {
		return true, m.reverify()
	}
	return m.screenKey(d, k)
}

func (d *detailView) body(m *model, width, height int) []string {
	d.verify = m.verify
	return d.lines(width, height)
}

func (*detailView) footer(k *keyMap) []key.Binding {
	return []key.Binding{k.move, k.Verify, k.Back, k.Quit}
}

func (*detailView) keysHelp(k *keyMap) (string, []helpGroup) {
	return "Keys in the detail view", []helpGroup{scrollGroup(k), {"This view", []key.Binding{k.Verify, k.Back, k.Help, k.Quit}}}
}

func (d *detailView) open(seq, end uint64) {
	d.seq, d.end, d.msg, d.offset, d.loading = seq, end, nil, 0, true
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
	m.detail.open(n.seq, end)
	m.show(m.detail)
	return fetchDetail(m.ctx, m.store, m.storeDir, n.seq, end)
}

// reverify (r in the detail view) verifies the whole store in the
// background and proves the shown action again; the action stays on
// screen until the new proof arrives.
func (m *model) reverify() tea.Cmd {
	if m.store == nil || (m.verify != nil && m.verify.running) {
		return nil
	}
	return tea.Batch(fetchDetail(m.ctx, m.store, m.storeDir, m.detail.seq, m.detail.end), m.startVerify(true))
}

// startVerify verifies the whole store in the background, once (or again
// when asked).
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

// fetchDetail reads the action at seq (and its closing action at end, if
// any) and proves it. The proof is made even when the action cannot be
// decoded: it says which stored part is damaged.
func fetchDetail(ctx context.Context, st Reader, storeDir string, seq, end uint64) tea.Cmd {
	return func() tea.Msg {
		msg := detailMsg{seq: seq}
		if p, err := st.VerifyAction(ctx, seq); err != nil {
			msg.proofErr = err
		} else {
			msg.proof = &p
		}
		a, err := st.GetSeq(seq)
		if err != nil {
			msg.err = err
			return msg
		}
		msg.action = &a
		msg.output = readCallOutput(&a, storeDir)
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
		// The action cannot be shown; its proof says what is damaged.
		title = "Detail · #" + strconv.FormatUint(d.seq, 10)
		for _, l := range wrap("✗ "+d.msg.err.Error(), max(10, w)) {
			body = append(body, d.st.fail.Render(l))
		}
		body = append(body, "", d.st.bold.Render("verification"))
		d.verification(d.fieldFunc(&body, w, fieldW))
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

// content is the detail view's lines at width w: the summary, what went
// wrong, the ids, verification, data, links, metadata, output and the
// closing action.
func (d *detailView) content(w int) []string {
	st, msg, a := d.st, d.msg, d.msg.action
	dl := &detailLines{d: d, w: w, fieldW: fieldW}
	// A row with a closing action (a step, an iteration) ended as its
	// closer says: ✗ Iteration 2 is its failed IterationCompleted, not its
	// IterationStarted.
	dl.out = append(dl.out, spread(st.bold.Render(ledger.Summary(a)), d.verdict(a), w))
	if c := msg.closer; c != nil {
		dl.out = append(dl.out, spread(st.bold.Render("closed by "+ledger.Summary(c)), d.verdict(c), w))
	}
	dl.out = append(dl.out, "")
	dl.failures()
	dl.identity()
	dl.section("verification")
	d.verification(dl.field)
	dl.data()
	dl.links()
	dl.metadata()
	dl.fieldW = 16
	if msg.output != nil {
		d.outputSection(msg.output, dl.field, &dl.out)
	}
	dl.closer()
	return dl.out
}

// detailLines is the detail view's content being written at width w,
// with fields' names padded to fieldW.
type detailLines struct {
	d      *detailView
	w      int
	fieldW int
	out    []string
}

// field writes a name and its value, wrapped.
func (dl *detailLines) field(name, value string) {
	dl.d.fieldFunc(&dl.out, dl.w, dl.fieldW)(name, value)
}

// section starts a section after a blank line.
func (dl *detailLines) section(name string) { dl.out = append(dl.out, "", dl.d.st.bold.Render(name)) }

// failures writes what went wrong first, before the ids and hashes.
func (dl *detailLines) failures() {
	msg := dl.d.msg
	fields := failureLines(msg.action, msg.closer)
	if len(fields) == 0 {
		return
	}
	var failed []string
	for _, f := range fields {
		dl.d.fieldFunc(&failed, dl.w, dl.fieldW)(f[0], f[1])
	}
	for _, l := range failed {
		dl.out = append(dl.out, dl.d.st.fail.Render(ansi.Strip(l)))
	}
	dl.out = append(dl.out, "")
}

// identity writes the action's seq, ids, function, time, duration and cost.
func (dl *detailLines) identity() {
	msg, a, field := dl.d.msg, dl.d.msg.action, dl.field
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
}

// data writes the action's arguments, result and error.
func (dl *detailLines) data() {
	a := dl.d.msg.action
	dl.section("data")
	args := make([]string, len(a.Arguments))
	for i, v := range a.Arguments {
		args[i] = rtfs.Print(v)
	}
	dl.field("arguments", orNone(strings.Join(args, " ")))
	dl.field("result", orNone(printValue(a.Result)))
	dl.field("error", orNone(a.ErrorMessage))
}

// links writes the intent, rule, decision and attestation the action
// points to.
func (dl *detailLines) links() {
	msg, a := dl.d.msg, dl.d.msg.action
	dl.section("links")
	dl.field("intent", orNone(a.IntentID))
	dl.field("rule", orNone(a.Metadata[ledger.MetaConstitutionalRuleID].Str()))
	dec := a.Metadata[ledger.MetaDelegationDecisionID].Str()
	if msg.decision != "" {
		dec += " — " + msg.decision
	}
	dl.field("decision", orNone(dec))
	dl.field("attestation", orNone(a.Metadata[ledger.MetaCapabilityAttestationID].Str()))
}

// metadata writes the action's metadata by key, the names padded to the
// longest key (up to half the width).
func (dl *detailLines) metadata() {
	a := dl.d.msg.action
	dl.section("metadata")
	keys := make([]string, 0, len(a.Metadata))
	for k := range a.Metadata {
		keys = append(keys, k)
		dl.fieldW = max(dl.fieldW, min(len(k)+2, dl.w/2))
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := a.Metadata[k]
		s := rtfs.Print(v)
		if v.Kind() == rtfs.KindString {
			s = v.Str()
		}
		dl.field(k, s)
	}
	if len(keys) == 0 {
		dl.out = append(dl.out, dl.d.st.dim.Render("none"))
	}
}

// closer writes the closing action's section, or why it could not be read.
func (dl *detailLines) closer() {
	msg, field := dl.d.msg, dl.field
	c := msg.closer
	if c == nil {
		if msg.closerErr != nil {
			dl.out = append(dl.out, "", dl.d.st.fail.Render("closing action: "+msg.closerErr.Error()))
		}
		return
	}
	dl.section("closed by " + ledger.Summary(c))
	field("seq", strconv.FormatUint(c.Seq, 10))
	field("action_id", c.ActionID)
	field("timestamp", c.Timestamp.UTC().Format(time.RFC3339Nano))
	field("duration", fmtDur(time.Duration(c.DurationMS)*time.Millisecond))
	field("result", orNone(printValue(c.Result)))
	field("error", orNone(c.ErrorMessage))
	field("action_hash", c.ActionHash.String())
	field("chain_hash", c.ChainHash.String())
	field("checkpoint", "seq "+strconv.FormatUint(c.CheckpointSeq, 10))
}

// verdict is how a ended, as the chain row marks it.
func (d *detailView) verdict(a *ledger.Action) string {
	st := d.st
	switch r := a.ReportedFailure(); {
	case r != "":
		return st.fail.Render("! ran, reported " + r)
	case a.Type == ledger.IterationCompleted && a.Metadata["status"].Str() == "skipped":
		return st.dim.Render("↷ skipped" + byWhom(a))
	case cancelled(a):
		return st.warn.Render("⊘ cancelled" + byWhom(a))
	case !a.Success:
		return st.fail.Render("✗ failed")
	case a.Type == ledger.IterationStarted || a.Type == ledger.PlanStepStarted || a.Type == ledger.PlanStarted ||
		a.Type == ledger.CompensationStarted:
		if d.msg != nil && d.msg.closer == nil {
			return st.running.Render("⟳ not closed")
		}
		return st.dim.Render("· opened")
	}
	return st.ok.Render("✓ succeeded")
}

// fieldFunc returns a function that appends a field to *out: its name in
// a column nameW wide (wider for a longer name), its value wrapped to the
// rest of w.
func (d *detailView) fieldFunc(out *[]string, w, nameW int) func(name, value string) {
	return func(name, value string) {
		nw := max(nameW, ansi.StringWidth(name)+2)
		lines := wrap(value, max(10, w-nw))
		if len(lines) == 0 {
			lines = []string{""}
		}
		*out = append(*out, d.st.dim.Render(fit(name, nw))+lines[0])
		for _, l := range lines[1:] {
			*out = append(*out, strings.Repeat(" ", nw)+l)
		}
	}
}

// verification writes the action's proof, one fact a line with ✓ or ✗,
// the problems the proof found, and the last whole-store verification.
func (d *detailView) verification(field func(name, value string)) {
	st, msg := d.st, d.msg
	p := msg.proof
	if p == nil {
		if msg.proofErr != nil {
			field("proof", st.fail.Render("✗ could not prove the action: "+msg.proofErr.Error()))
		}
		field("store", d.store())
		return
	}
	mark := func(ok bool, yes, no string) string {
		if ok {
			return st.ok.Render("✓ " + yes)
		}
		return st.fail.Render("✗ " + no)
	}
	field("action_hash", p.ActionHash.String())
	field("", mark(p.ActionHashOK, "recomputed from the canonical encoding", "does not match the stored content"))
	field("chain_hash", p.ChainHash.String())
	prev := "seq " + strconv.FormatUint(p.PrevSeq, 10)
	if p.PrevSeq == 0 {
		prev = "the genesis hash (32 zero bytes)"
	}
	field("", mark(p.LinkOK, "links to "+prev, "does not link to "+prev))
	if p.CheckpointSeq == 0 {
		field("checkpoint", st.fail.Render("✗ no checkpoint covers this action"))
	} else {
		cp := "seq " + strconv.FormatUint(p.CheckpointSeq, 10)
		if !p.CheckpointTime.IsZero() {
			cp += " · signed " + p.CheckpointTime.UTC().Format(time.RFC3339Nano) +
				" · chain_hash " + p.CheckpointChainHash.String()[:16] + "…"
		}
		field("checkpoint", cp)
		field("", mark(p.CheckpointSeqOK, "the action's checkpoint_seq names it", "the action's checkpoint_seq names another"))
		field("", mark(p.SignatureOK, "Ed25519 signature verified with this store's key", "Ed25519 signature does not verify with this store's key"))
		from := "#" + strconv.FormatUint(p.Seq, 10)
		switch {
		case p.TooFar:
			field("", st.dim.Render(fmt.Sprintf("? %d actions away, too far to walk; r verifies the whole store", p.CheckpointSeq-p.Seq)))
		case p.ReachesCheckpoint && p.Links == 0:
			field("", st.ok.Render("✓ it signs this action's chain_hash"))
		case p.ReachesCheckpoint:
			field("", st.ok.Render(fmt.Sprintf("✓ the chain from %s reaches the chain_hash it signs (%s)", from, links(p.Links))))
		default:
			field("", st.fail.Render("✗ the chain from "+from+" does not reach the chain_hash it signs"))
		}
	}
	for i, pr := range p.Problems {
		name := ""
		if i == 0 {
			name = "problems"
		}
		field(name, st.fail.Render("✗ "+pr))
	}
	field("store", d.store())
}

// store says what the last whole-store verification found.
func (d *detailView) store() string {
	st, v := d.st, d.verify
	var ie *ledger.IntegrityError
	switch {
	case v == nil:
		return st.dim.Render("not verified · r verifies the whole store")
	case v.running:
		return st.dim.Render("verifying the whole store…")
	case errors.As(v.err, &ie):
		return st.fail.Render(fmt.Sprintf("✗ verification failed at seq %d: %s", ie.Seq, ie.Reason))
	case v.err != nil:
		return st.fail.Render("✗ could not verify: " + v.err.Error())
	case v.report.Head.Seq < d.seq:
		return st.dim.Render(fmt.Sprintf("verified through seq %d, before this action; r verifies again", v.report.Head.Seq))
	}
	return st.ok.Render(fmt.Sprintf("✓ whole store verified: %d actions, %d checkpoints", v.report.Actions, v.report.Checkpoints))
}

func links(n uint64) string {
	if n == 1 {
		return "1 link"
	}
	return strconv.FormatUint(n, 10) + " links"
}

// byWhom is " by <who>" for an action cut short, from its cancelled_by.
func byWhom(a *ledger.Action) string {
	if by := a.Metadata["cancelled_by"].Str(); by != "" {
		return " by " + by
	}
	return ""
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

// failureLines are the fields that say why a (or its closing action)
// failed, for the top of its detail: the error, or the failure a call
// reported with the end of what it printed on stderr; none if it did not fail.
func failureLines(a, closer *ledger.Action) [][2]string {
	var out [][2]string
	for _, x := range []*ledger.Action{a, closer} {
		if x == nil {
			continue
		}
		if !x.Success && x.ErrorMessage != "" {
			out = append(out, [2]string{"error", clean(x.ErrorMessage)})
		}
		if r := x.ReportedFailure(); r != "" {
			out = append(out, [2]string{"reported", r})
			if x.Result.Kind() == rtfs.KindMap {
				if s := strings.TrimSpace(x.Result.AsMap().GetKey("stderr").Str()); s != "" {
					out = append(out, [2]string{"stderr", clean(lastLines(s, 8))})
				}
			}
		}
	}
	return out
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

package tui

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// Focusable panes of the main view, in tab order.
const (
	focusChain = iota
	focusConds
	focusPlan
	numFocus
)

// model is the one root tea.Model: it owns routing, focus and layout;
// the panes are plain structs it sizes and draws.
type model struct {
	run      Live // nil for a recorded run
	store    Reader
	scanner  Scanner // store, when it streams the chain: a task's run is read with it (taskRunView)
	storeDir string  // where the calls' output files are (Options.StoreDir)
	// recordedCall: a recorded run made an agent call, whose output o shows
	recordedCall bool
	attached     bool            // following a run another process owns: q detaches
	goesOn       string          // a recorded run still going on elsewhere (Options.GoesOn)
	following    bool            // a recorded batch (or a task's run in it) shown as it goes on records
	batchV       *batchView      // the batch this run is (ralph view BATCH), fed by its events
	inBatch      bool            // a task's run opened from the batch view
	task         string          // its task, as the header names it ("US-002 try 2")
	batchOf      string          // the batch the run is a task of (its RunStarted's batch), which b opens
	recordAsked  bool            // the batch's record is being read
	ctx          context.Context // ends with the UI; bounds the commands that read the store
	approver     *Approver
	now          func() time.Time
	st           *styles
	keys         keyMap
	help         help.Model
	live         bool
	done         <-chan error // the runner's return (Options.Done)
	hasDone      bool

	w, h   int
	bodyH  int
	modes  modeStack // the open views and questions, the top last (modes.go)
	focus  int
	tree   *tree
	chain  *chainPane
	conds  *condPane
	budget stop.Limits // the run's budgets (stop.SpecBudgets of its config)
	plan   *planPane
	output *outputPane
	// outputShown pins the bottom-right pane (o): 0 shows the agent's
	// output while the iteration has some, else the plan; 1 the output; 2 the plan.
	outputShown int
	history     *historyView
	detail      *detailView
	diff        *diffView    // D: an iteration's diff
	checkpoints *checkpoints // the run's checkpoints, for D and the rows' +added −deleted
	condV       *condView
	logs        *logView
	helpV       *helpView
	input       textinput.Model // the filter's (filterMode)

	// The run as the header and status line show it.
	runID     string
	cfg       *config.Config
	state     string
	started   time.Time
	lastTime  time.Time
	iteration int
	cost      float64
	tokens    int64
	provider  string
	modelName string
	sandbox   string // what confines the run's processes (RunStarted's sandbox); "" none
	outcome   *outcome
	loading   bool // a recorded run is still being read
	loaded    int  // actions read so far
	loadErr   error

	// Control of a live run.
	runDone      bool // runner.Run returned
	runErr       error
	quitting     bool      // q pressed while running: abort, then exit
	forced       bool      // q pressed twice: exit now
	detached     bool      // the user left the run going (Run returns ErrDetached)
	aborting     bool      // abort requested
	pauseAsked   bool      // p pressed, the runner has not paused yet
	skipping     int       // s pressed during this iteration, not closed yet
	delayUntil   time.Time // the runner waits for loop.delay until then
	answered     int       // the last iteration whose plan was answered
	wait         *waitInfo
	dropped      int
	lastLog      string
	verify       *verifyState
	helpCache    map[helpKey]string
	ticking      bool
	historyStale bool

	// What the terminal title says (title.go).
	seq          uint64     // the highest chain seq applied
	queued       bool       // the forwarder had more ready than its last batch
	statsAsked   int        // iteration summaries asked for, not yet back
	titleWant    titleState // the title for what is shown now
	titleSet     titleState // the title last set
	titleGen     uint64     // bumped when titleWant changes
	titleTicking bool       // a titleMsg is on its way
}

// outcome is how the run ended, read from its closing action.
type outcome struct {
	state, condition, class, reason, evidence string
	at                                        time.Time
}

type waitInfo struct {
	until  time.Time
	reason string
}

func newModel(o *Options, st *styles) *model {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	t := newTree()
	m := &model{run: o.Run, store: o.Store, attached: o.Attached, goesOn: o.GoesOn, ctx: context.Background(), approver: o.Approver, now: now, st: st, keys: newKeyMap(),
		help: help.New(), live: o.Run != nil, done: o.Done, hasDone: o.Done != nil, tree: t, chain: newChainPane(t, st),
		conds: newCondPane(st), plan: newPlanPane(st), logs: newLogView(st), helpV: newHelpView(st),
		state: loop.StateIdle, cfg: o.Config, helpCache: map[helpKey]string{}}
	m.storeDir = o.StoreDir
	m.scanner, _ = o.Store.(Scanner)
	if d, ok := o.Store.(interface{ Dir() string }); ok && m.storeDir == "" {
		if fi, err := os.Stat(d.Dir()); err == nil && fi.IsDir() { // not a fleet's address
			m.storeDir = d.Dir()
		}
	}
	m.output = newOutputPane(st, now)
	m.history = newHistoryView(st)
	m.history.setReplay(o.Replay, o.ReplayName)
	m.detail = newDetailView(st)
	m.diff, m.checkpoints = newDiffView(st), newCheckpoints()
	m.condV = newCondView(st)
	m.keys.live(m.live)
	m.keys.filtered(false)
	m.keys.Output.SetEnabled(false)
	m.keys.Batch.SetEnabled(false)
	if m.live {
		m.chain.now = now // running rows show their elapsed time
	}
	if m.attached {
		m.keys.Quit.SetHelp("q", "detach")
	}
	m.help.ShortSeparator = "  "
	m.help.Styles.ShortKey, m.help.Styles.ShortDesc, m.help.Styles.ShortSeparator = st.helpKey, st.helpDesc, st.helpSep
	m.help.Styles.FullKey, m.help.Styles.FullDesc, m.help.Styles.FullSeparator = st.helpKey, st.helpDesc, st.helpSep
	m.help.Styles.Ellipsis = st.helpSep
	m.input = textinput.New()
	m.input.Prompt = "/ "
	m.input.Placeholder = "type:call fn:shell is:failed or any text"
	m.input.PromptStyle = st.accent
	m.input.PlaceholderStyle = st.dim
	m.input.TextStyle = st.text
	if o.Run != nil {
		m.runID = o.Run.RunID()
		m.state = o.Run.State()
		if m.store == nil {
			m.store = o.Run
		}
	}
	if o.RunID != "" {
		m.runID = o.RunID
	}
	if !m.live {
		m.loading = true
	}
	m.setConfig(o.Config, configuredConditions(o.Config))
	m.chain.focused = true
	return m
}

// setConfig takes the run's config (given, or read from RunStarted) and
// the conditions it declares (configuredConditions).
func (m *model) setConfig(cfg *config.Config, conds []stop.Result) {
	if cfg == nil {
		return
	}
	m.cfg = cfg
	m.budget = stop.SpecBudgets(cfg.Stop).Within(stop.Limits{Iterations: cfg.Loop.MaxIterations, CostUSD: cfg.Governance.MaxCostUSD})
	if m.provider == "" {
		m.provider, m.modelName = cfg.Model.Provider, cfg.Model.Model
	}
	if m.conds.eval == nil {
		m.conds.configured = conds
	}
}

// canApprove reports whether y/n answer the plan awaiting approval.
func (m *model) canApprove() bool { return m.run != nil && m.run.CanApprove() }

// ended reports whether the run is over.
func (m *model) ended() bool {
	switch {
	case m.live && m.hasDone:
		return m.runDone
	case m.following && m.batchV != nil:
		return m.batchV.b.end != nil
	case m.following:
		return m.outcome != nil
	}
	return m.outcome != nil || m.runDone || (!m.live && !m.loading)
}

// ingest takes one action of the run.
func (m *model) ingest(a *ledger.Action) {
	if a.RunID != m.runID && m.runID != "" {
		return
	}
	m.checkpoints.observe(a, m.tree)
	m.tree.add(a)
	m.lastTime = a.Timestamp
	switch a.Type {
	case ledger.BatchStarted:
		m.openBatch(a)
	case ledger.RunStarted:
		if m.runID == "" {
			m.runID = a.RunID
		}
		m.started = a.Timestamp
		if p := a.Metadata["provider"].Str(); p != "" {
			m.provider, m.modelName = p, a.Metadata["model"].Str()
		}
		if s, ok := a.Metadata["sandbox"]; ok {
			m.sandbox = s.Str()
		}
		m.batchOf = a.Metadata[ledger.MetaBatch].Str()
	case ledger.IterationStarted:
		m.iteration = int(a.Metadata["iteration"].AsInt())
		m.delayUntil = time.Time{}
	case ledger.IterationCompleted:
		if it := int(a.Metadata["iteration"].AsInt()); it == m.skipping {
			m.skipping = 0 // the skip took effect: say so once, as the last news
			m.lastLog = "iteration " + strconv.Itoa(it) + " " + a.Metadata["status"].Str()
		}
	case ledger.CapabilityCall: // model costs are summed in their PlanGenerated
		m.cost += a.Cost // llm.ask's and agent.run's cost and tokens are their call's
		m.tokens += metaInt(a.Metadata["prompt_tokens"]) + metaInt(a.Metadata["completion_tokens"])
		m.output.ended(a)
	case ledger.LlmConsultation:
		m.plan.resetStream() // the next answer (a repair, Mode B) streams from the start
	case ledger.PlanGenerated:
		m.cost += a.Cost
		m.tokens += a.Metadata["prompt_tokens"].AsInt() + a.Metadata["completion_tokens"].AsInt()
		info := loop.PlanInfoFromAction(a)
		info.Iteration = m.iteration
		m.plan.setPlan(&info, false)
	case ledger.StopConditionsEvaluated:
		if ev, err := stop.EvaluationFromAction(a); err == nil {
			m.conds.setEvaluation(&ev)
			m.tree.evaluated(&ev)
			if w := (stop.Brief{Eval: &ev}).Whys(); w != "" {
				m.lastLog = "after iteration " + strconv.Itoa(ev.Iteration) + " · " + w // the news until the next
			}
		}
		m.historyStale = true
	case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
		md := a.Metadata
		m.outcome = &outcome{state: runEndState(a.Type), condition: md["condition"].Str(), class: md["class"].Str(),
			reason: md["reason"].Str(), evidence: md["evidence"].Str(), at: a.Timestamp}
		m.state = m.outcome.state
		drop[*approveMode](&m.modes)
		m.wait = nil
		m.skipping, m.delayUntil = 0, time.Time{}
	}
}

// metaInt reads a count from metadata, an int or the decimal string a
// capability's metadata holds (agent.run records its tokens that way).
func metaInt(v rtfs.Value) int64 {
	switch v.Kind() {
	case rtfs.KindInt:
		return v.AsInt()
	case rtfs.KindString:
		n, _ := strconv.ParseInt(v.Str(), 10, 64) // not a count: nothing to add
		return n
	}
	return 0
}

// showsOutput reports whether the bottom-right pane shows the agent's
// output rather than the plan.
func (m *model) showsOutput() bool {
	switch m.outputShown {
	case 1:
		return true
	case 2:
		return false
	}
	return m.output.shows(m.iteration)
}

func runEndState(t ledger.ActionType) string {
	switch t {
	case ledger.RunCompleted:
		return loop.StateDone
	case ledger.RunFailed:
		return loop.StateFailed
	case ledger.RunStopped:
		return loop.StateStopped
	}
	return loop.StateAborted
}

// event takes one item of the run's event stream.
func (m *model) event(e *loop.Event) {
	switch e.Kind {
	case loop.EventAction:
		m.seq = max(m.seq, e.Action.Seq)
		m.ingest(e.Action)
	case loop.EventState:
		if m.outcome == nil || isEndState(e.State) {
			m.state = e.State
		}
		if e.State == loop.StatePaused {
			m.pauseAsked = false
		}
	case loop.EventApprove:
		if e.Plan != nil {
			m.askApproval(*e.Plan)
		}
	case loop.EventWait:
		m.wait = &waitInfo{until: e.Until, reason: e.Text}
		m.plan.resetStream() // the provider retries: what it streamed so far is void
	case loop.EventAgent:
		if e.Agent != nil {
			m.output.add(e.CallID, e.Iteration, e.Time, e.Agent)
		}
	case loop.EventDelay:
		m.delayUntil = e.Until
	case loop.EventToken:
		if m.plan.plan == nil || m.plan.plan.Iteration < m.iteration {
			m.plan.addStream(e.Text)
		}
	case loop.EventLog:
		m.logs.add(e.Time, e.Log)
		m.lastLog = e.Log.Msg
	case loop.EventDropped:
		m.dropped += e.Dropped
		if e.State != "" {
			m.state = e.State
		}
	}
}

func isEndState(s string) bool {
	switch s {
	case loop.StateDone, loop.StateFailed, loop.StateStopped, loop.StateAborted:
		return true
	}
	return false
}

// Init starts the clock and, for a live run, waits for the runner to return.
func (m *model) Init() tea.Cmd {
	return tea.Batch(m.tick(), waitDone(m.done), waitApproval(m.approver))
}

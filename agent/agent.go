package agent

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/ralphloop/ralph/sandbox"
)

// EventKind says what an Event carries.
type EventKind uint8

const (
	EventText       EventKind = iota + 1 // Text: assistant text (a chunk or a whole message)
	EventToolUse                         // Tool (name), ToolID, Input (short one-line summary of the input, ≤ 200 bytes)
	EventToolResult                      // ToolID, Text (short), IsError
	EventUsage                           // Usage: tokens reported by this line (Total: the call's totals so far)
	EventCost                            // CostUSD: as reported by the CLI (Total: the call's total so far)
	EventSession                         // SessionID
	EventFinal                           // Text: the final answer; Turns when the CLI counts them
	EventError                           // Text: the error; Limit != nil when it is an account/rate limit
	EventRaw                             // Text: a line the parser does not know, kept as text (never fatal)
	EventRetry                           // Retry: the CLI is retrying a failed request (a notice, not an end)
	EventDenied                          // Denial: the CLI refused a tool for want of permission
	// EventProgress: Tool, ToolID, Text (a short line, "Bash running for
	// 30s"; "" for a bare heartbeat): a notice that the CLI, or a tool it
	// runs, is still at work. It is not output: a call that prints nothing
	// else for idle_timeout is idle.
	EventProgress
	// EventSandboxDenied: Refusal: the run's sandbox refused the call (a
	// host its proxy would not reach, a path a tool was refused outside
	// the workdir), with the [sandbox] line that allows it. The run
	// publishes it on the call's stream; no CLI's parser emits it.
	EventSandboxDenied
)

// String is the kind's lower-case name ("text", "tool-use", …).
func (k EventKind) String() string {
	switch k {
	case EventText:
		return "text"
	case EventToolUse:
		return "tool-use"
	case EventToolResult:
		return "tool-result"
	case EventUsage:
		return "usage"
	case EventCost:
		return "cost"
	case EventSession:
		return "session"
	case EventFinal:
		return "final"
	case EventError:
		return "error"
	case EventRaw:
		return "raw"
	case EventRetry:
		return "retry"
	case EventDenied:
		return "denied"
	case EventProgress:
		return "progress"
	case EventSandboxDenied:
		return "sandbox-denied"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Usage counts tokens. Output excludes Reasoning: a parser whose CLI
// counts reasoning inside its output tokens subtracts it, so that no
// token is counted (or priced) twice.
type Usage struct{ Input, Output, CacheRead, CacheWrite, Reasoning int64 }

func (u Usage) add(v Usage) Usage {
	return Usage{u.Input + v.Input, u.Output + v.Output, u.CacheRead + v.CacheRead, u.CacheWrite + v.CacheWrite,
		u.Reasoning + v.Reasoning}
}

// IsZero reports whether no tokens were counted.
func (u Usage) IsZero() bool { return u == Usage{} }

// Limit kinds.
const (
	LimitUsage      = "usage-limit" // the account's usage allowance is spent until Reset
	LimitRate       = "rate-limit"  // too many requests; retry later
	LimitOverloaded = "overloaded"  // the API is overloaded; retry later
)

// Limit: the agent hit an account limit. Kind is "usage-limit", "rate-limit" or "overloaded".
// Reset is when it lifts (zero when the CLI did not say). Exact marks a
// Reset the CLI gave to the second (an epoch such as Claude's
// rate_limit_event.resetsAt, or a delay in seconds), which beats one read
// from a time of day in text ("resets 9:59pm") later in the same call.
type Limit struct {
	Kind    string
	Reset   time.Time
	Exact   bool
	Message string
}

// Retry is a CLI's notice that it retries a failed request: the HTTP
// status when it said one (0: none), the attempt and the most it makes
// (0: not said), and the delay before the next try (0: not said).
type Retry struct {
	Status       int
	Attempt, Max int
	Delay        time.Duration
	Message      string
}

// Denial is a tool the CLI refused to run for want of permission: the
// tool's name, what it would have touched (a path or a command; "" when
// the CLI did not say) and the CLI's own words. Fix, when set, is what
// lets the tool run, which the CLI's words make certain (its own sandbox
// failed: the flag that turns it off); "": the CLI's permissions
// (PermissionsFor) are the fix.
type Denial struct {
	Tool, Target, Message string
	Fix                   string
}

// Event is one thing an agent reported, in stream order.
type Event struct {
	Kind      EventKind
	Text      string
	Tool      string
	ToolID    string
	Input     string
	IsError   bool
	Usage     Usage
	CostUSD   float64
	SessionID string
	Limit     *Limit
	Retry     *Retry          // EventRetry
	Denial    *Denial         // EventDenied
	Refusal   *sandbox.Denial // EventSandboxDenied
	// Total marks an EventUsage or EventCost whose figures are the call's
	// totals so far (they replace what was counted), not an increment.
	Total bool
	// Turns is the number of turns the CLI reports on EventFinal or
	// EventError (0: not reported).
	Turns int
	// Model is the model the CLI says it runs, on any event that names it
	// (e.g. EventSession); the price table is keyed by it.
	Model string
	// Models split an EventUsage's totals by model, when the CLI reports
	// that (Gemini CLI's stats.models: its router's small model beside the
	// main one); each is priced as its own model.
	Models []ModelUsage
}

// ModelUsage is what one model of a call used.
type ModelUsage struct {
	Model string
	Usage Usage
}

// mainModel is the model that used the most tokens.
func mainModel(ms []ModelUsage) string {
	best, most := "", int64(-1)
	for _, m := range ms {
		u := m.Usage
		if n := u.Input + u.Output + u.CacheRead + u.CacheWrite + u.Reasoning; n > most {
			best, most = m.Model, n
		}
	}
	return best
}

// Price is the fallback USD price per million tokens, used when the CLI
// reports no cost. Reasoning tokens are priced as output unless Reasoning
// is set.
type Price struct{ Input, Output, CacheRead, CacheWrite, Reasoning float64 }

// Cost prices u.
func (p Price) Cost(u Usage) float64 {
	reasoning := p.Reasoning
	if reasoning == 0 {
		reasoning = p.Output
	}
	return (float64(u.Input)*p.Input + float64(u.Output)*p.Output +
		float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite + float64(u.Reasoning)*reasoning) / 1e6
}

// Options describe one agent call.
type Options struct {
	CLI         string        // "claude", "codex", "gemini", "opencode", "command", or "auto"
	Command     []string      // argv for CLI "command" (prompt on stdin, plain text out)
	Args        []string      // extra args appended to the backend's argv
	Prompt      string        //
	Dir         string        // working directory
	Env         []string      // environment (nil: os.Environ())
	Timeout     time.Duration // whole call; 0 = none
	IdleTimeout time.Duration // no output for this long kills the process group; 0 = none
	Price       *Price
	LookPath    func(string) (string, error) // nil: exec.LookPath
	OnEvent     func(Event)                  // called in stream order from the reading goroutine; may be nil
	// OutputFile, when set, receives the call's standard output byte for
	// byte as it is read (created 0600, its directory 0700), and its
	// standard error goes to the same name with .err for .out, created at
	// its first byte. Redact's values (8 bytes or longer) are written as
	// [REDACTED].
	OutputFile string
	Redact     []string

	logs     *callLogs // Run's open output files
	spoolDir string    // where standard output is spooled; "" is os.TempDir() (TMPDIR)
}

// Stopped values: how a call ended when it did not end by itself.
const (
	StoppedTimeout     = "timeout"
	StoppedIdleTimeout = "idle-timeout"
	StoppedCancelled   = "cancelled"
	StoppedUsageLimit  = "usage-limit"
)

// Result is what one agent call did.
type Result struct {
	Text       string  // final text (EventFinal, else the concatenated text): its last MaxText bytes
	TextCut    int64   // bytes cut from the front of Text (the output file has them)
	Exit       int     // the CLI's exit code; -1 when a signal ended it
	CostUSD    float64 //
	CostSource string  // "reported" (by the CLI), "price" (from Options.Price), "table" (the built-in prices) or "" (unknown → 0)
	Tokens     Usage   // totals for the call
	SessionID  string
	Turns      int
	ToolUses   int
	Duration   time.Duration
	Stopped    string // "", "timeout", "idle-timeout", "cancelled", "usage-limit"
	Limit      *Limit // set when Stopped == "usage-limit" (or the CLI reported a limit)
	Stderr     string // capped tail
	CLI        string // the backend actually used (resolved from "auto")
	Argv       []string
	// SandboxArgs are the arguments ralph added to Argv because its
	// sandbox confines the call (the CLI's own sandbox off, its traffic to
	// refused hosts off); nil without a sandbox or when the CLI needs none.
	SandboxArgs []string
	// IsError: the CLI reported that the call failed (an error result),
	// whatever its exit code.
	IsError bool
	// Denials are the tools the CLI refused for want of permission, in
	// stream order.
	Denials []Denial
	// Retries are the CLI's retry notices, in stream order.
	Retries []Retry
	// Model is the model the CLI reported (the one that used the most
	// tokens, when it reported several), else the one named in Args
	// (--model X, -m X); "" when neither says.
	Model string
	// PricedAs says, for a cost from the built-in table ("table"), which
	// price a model was given when the table does not name it exactly:
	// "gemini-3.8-flash as gemini-3.5-flash (family)", the models joined
	// by ", "; "" when every model was priced as itself.
	PricedAs string
	// Output and ErrOutput are the files standard output and standard
	// error were written to (zero when Options.OutputFile is empty, and
	// ErrOutput when nothing was printed there).
	Output, ErrOutput Output
	// Containment names how the call's processes were held and killed:
	// "cgroup" or "subreaper+sweep" (Linux), "process-group" elsewhere.
	Containment string
}

// ErrUnknownCLI and ErrNotFound are wrapped by Resolve's errors.
var (
	ErrUnknownCLI = errors.New("unknown agent cli")
	ErrNotFound   = errors.New("agent cli not found")
)

// Auto is the [agent] cli that stands for the first of CLIs on PATH.
const Auto = "auto"

// Known reports the CLI names Resolve accepts (for config validation):
// Auto, then every backend's.
func Known() []string {
	out := []string{Auto}
	for _, mk := range backends {
		out = append(out, mk().Name)
	}
	return out
}

// Resolve names the backend and binary path for cli (Auto: the first of
// CLIs on PATH).
// Unknown cli or a CLI not on PATH: an error whose one sentence names the fix.
// For a backend that TakesCommand the path is empty: the argv comes from
// Options.Command.
// A nil lookPath is exec.LookPath; Run's default instead searches the PATH
// of Options.Env, the environment the CLI will run in.
func Resolve(cli string, lookPath func(string) (string, error)) (name, path string, err error) {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if cli == Auto {
		for _, c := range CLIs() {
			if p, err := lookPath(backendFor(c).bin); err == nil {
				return c, p, nil
			}
		}
		return "", "", fmt.Errorf("%w: cli \"auto\" found none of %s on PATH; install one of them or set [agent] cli to a command",
			ErrNotFound, strings.Join(CLIs(), ", "))
	}
	b := backendFor(cli)
	if b.TakesCommand {
		return cli, "", nil
	}
	if b.Name == "" {
		return "", "", fmt.Errorf("%w %q: use one of %s", ErrUnknownCLI, cli, strings.Join(Known(), ", "))
	}
	p, err := lookPath(b.bin)
	if err != nil {
		return "", "", fmt.Errorf("%w: %q is not on PATH; install it, add its directory to PATH, or choose another [agent] cli",
			ErrNotFound, b.bin)
	}
	return cli, p, nil
}

// RetryLine says what a retry notice said, as the console and the UI show
// it: "retrying after 429 (attempt 3/10, next in 8s)", leaving out what
// the CLI did not say ("retrying", "retrying (attempt 2)").
func RetryLine(r Retry) string {
	s := "retrying"
	switch {
	case r.Status != 0:
		s += fmt.Sprintf(" after %d", r.Status)
	case r.Message != "": // a CLI that names no status (OpenCode's log): its words
		s += ": " + cut(oneLine(r.Message), 120)
	}
	var parts []string
	switch {
	case r.Attempt != 0 && r.Max != 0:
		parts = append(parts, fmt.Sprintf("attempt %d/%d", r.Attempt, r.Max))
	case r.Attempt != 0:
		parts = append(parts, fmt.Sprintf("attempt %d", r.Attempt))
	}
	if r.Delay > 0 {
		d := r.Delay.Round(time.Second)
		if r.Delay < time.Second {
			d = r.Delay.Round(time.Millisecond)
		}
		parts = append(parts, "next in "+d.String())
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

package stop

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
)

// Class says what a met condition means for the run.
type Class string

// Classes, from strongest to weakest: a met abort beats a met failure,
// which beats a met success, which beats a met limit (DESIGN §8).
const (
	ClassAbort   Class = "abort"   // the user asked to stop (user_signal): exit 4
	ClassFailure Class = "failure" // the run failed: exit 1
	ClassSuccess Class = "success" // the goal is reached: exit 0
	ClassLimit   Class = "limit"   // a budget ran out before success: exit 3
)

// rank orders classes for the decision; higher wins.
func (c Class) rank() int {
	switch c {
	case ClassAbort:
		return 4
	case ClassFailure:
		return 3
	case ClassSuccess:
		return 2
	case ClassLimit:
		return 1
	}
	return 0
}

// Input is the snapshot one evaluation reads. Conditions are functions of
// it, plus the outside world for command, file_exists, file_contains and
// no_progress.
type Input struct {
	RunID               string
	Iteration           int       // 1 for the first iteration
	Started, Now        time.Time // when the run started; now (zero Now means time.Now)
	CostUSD             float64
	Tokens              int64
	ConsecutiveFailures int             // iterations in a row that failed
	LastActions         []ledger.Action // the last iteration's actions, in seq order
	Audit               *Index          // the run's audit index (predicates)
	Workdir             string          // where commands run and relative paths start
	StoreDir            string          // the ledger's directory; no_progress never reads it (default .ralph)
	HeadSeq             uint64          // the ledger head when the snapshot was taken
	UserSignal          bool            // the user asked to stop (first Ctrl-C, a stop key)
	// Workspace, when set (a replay), identifies the workdir's content (a
	// checkpoint's tree): no_progress takes it instead of hashing Workdir.
	Workspace string
	// Failed holds, by condition name, the errors of conditions that could
	// not be evaluated since the last evaluation (a completion predicate
	// watched after every action): their result is that error, not a new check.
	Failed map[string]error
	// EchoesStored says which capabilities' results only echo text
	// already stored (their specs' EchoesStored: fs.read, kv.get, …), which
	// output_pattern passes over; nil: none do.
	EchoesStored func(capability string) bool

	// verdicts are the answers of the conditions that do not read them,
	// set by the evaluator before it checks those that do (no_progress).
	verdicts []verdict
}

// Result is one condition's answer in one evaluation.
type Result struct {
	Name     string        `json:"name"`
	Kind     string        `json:"kind"`
	Class    Class         `json:"class"`
	Priority int           `json:"priority"`
	Met      bool          `json:"met"`
	Reason   string        `json:"reason"`
	Progress float64       `json:"progress"` // 0–1
	Detail   string        `json:"detail"`   // "7/20", "$3.10/$5.00", "no progress 2/3"
	Evidence string        `json:"evidence"` // what was looked at
	Duration time.Duration `json:"duration_ns"`
	CacheHit bool          `json:"cache_hit"`
	TimedOut bool          `json:"timed_out"`
	Err      string        `json:"error,omitempty"` // the check could not run
}

// Flags names what is unusual about r, for display: "cached", "timed out"
// and, last, "error" when the check could not run (r.Err says why).
func (r *Result) Flags() []string {
	var flags []string
	if r.CacheHit {
		flags = append(flags, "cached")
	}
	if r.TimedOut {
		flags = append(flags, "timed out")
	}
	if r.Err != "" {
		flags = append(flags, "error")
	}
	return flags
}

// Condition is one configured stop condition.
type Condition struct {
	Name     string
	Kind     string
	Class    Class
	Priority int
	// Timeout bounds one check; 0 takes the evaluator's default (commands:
	// DefaultCommandTimeout).
	Timeout time.Duration
	// TimeoutClass is what a timeout counts as: "" or "not_met" means not
	// met (still reported as timed_out), otherwise the class it is met with.
	TimeoutClass string
	// ErrorClass is what a check that cannot run (a predicate's run-time
	// error, a command that cannot start) counts as: "" means failure,
	// "not_met" lets the run go on; either way the error is in the result.
	ErrorClass string
	File       string // config file, for error positions
	Line       int    // config line of its [[stop]] table, 0 when built in code

	check  checker
	kind   *Kind  // its row
	limits Limits // what it bounds (Kind.Limits of its table)
	runs   string // the program it runs (Kind.Runs of its table)
}

// outcome is what a checker found.
type outcome struct {
	met      bool
	reason   string
	progress float64
	detail   string
	evidence string
	err      error
}

// checker is the behaviour of one kind.
type checker interface {
	check(ctx context.Context, in *Input) outcome
	// fingerprint writes every input check reads into f. It reports
	// external when check also reads something f cannot capture (a
	// command's effect on the world), so a cached result also needs a TTL.
	fingerprint(in *Input, f *fp) (external bool)
	// inputs describes the inputs for debug logs.
	inputs(in *Input) string
}

// FromConfig builds conditions from [[stop]] tables, validating what the
// config package cannot: predicates compile (RTFS) or parse (JSON), regexes
// compile, commands can be found, classes make sense. Every error is a
// *config.Error naming file:line.
func FromConfig(specs []config.Stop, file string) ([]*Condition, error) {
	out := make([]*Condition, 0, len(specs))
	seen := map[string]int{} // name → its line
	for i := range specs {
		c, err := build(&specs[i], file, specs[i].Line)
		if err != nil {
			return nil, err
		}
		c.Name = SpecName(specs, i)
		if first, dup := seen[c.Name]; dup {
			msg := fmt.Sprintf("stop condition name %q is used twice", c.Name)
			if first > 0 {
				msg += fmt.Sprintf(" (first at line %d)", first)
			}
			return nil, &config.Error{File: file, Line: c.Line, Msg: msg}
		}
		seen[c.Name] = c.Line
		out = append(out, c)
	}
	return out, nil
}

// New builds one condition from its config form (line 0, file "<stop>").
func New(s config.Stop) (*Condition, error) {
	c, err := build(&s, "<stop>", s.Line)
	if err != nil {
		return nil, err
	}
	if c.Name == "" {
		c.Name = c.Kind
	}
	return c, nil
}

func build(s *config.Stop, file string, line int) (*Condition, error) {
	if line == 0 {
		line = s.Line
	}
	fail := func(format string, args ...any) error {
		what := fmt.Sprintf("(kind %q)", s.Kind)
		if s.Name != "" {
			what = fmt.Sprintf("%q", s.Name)
		}
		return &config.Error{File: file, Line: line, Msg: "[[stop]] " + what + ": " + fmt.Sprintf(format, args...)}
	}
	kind, ok := Lookup(s.Kind)
	if !ok {
		return nil, fail("%s", unknownKind(s.Kind))
	}
	if err := checkFields(s, kind); err != nil {
		return nil, fail("%v", err)
	}
	c := &Condition{Name: s.Name, Kind: s.Kind, Class: kind.Class, Priority: kind.Priority,
		Timeout: s.Timeout.Duration, TimeoutClass: s.TimeoutClass, ErrorClass: s.ErrorClass, File: file, Line: line, kind: kind}
	if s.Priority != nil {
		c.Priority = *s.Priority
	}
	if s.Class != "" {
		c.Class = Class(s.Class)
	}
	if kind.Limits != nil {
		c.limits = kind.Limits(s)
	}
	if kind.Runs != nil {
		c.runs = kind.Runs(s)
	}
	var err error
	c.check, err = kind.Build(s, file, line)
	if err != nil {
		return nil, fail("%v", err)
	}
	return c, nil
}

func buildOnError(s *config.Stop, _ string, _ int) (checker, error) {
	re, err := compileRe("pattern", s.Pattern, true)
	return onError{re}, err
}

func buildFileContains(s *config.Stop, _ string, _ int) (checker, error) {
	re, err := compileRe("pattern", s.Pattern, true)
	return fileContains{path: s.Path, re: re}, err
}

func buildOutputPattern(s *config.Stop, _ string, _ int) (checker, error) {
	if !s.Regex {
		return outputPattern{text: s.Pattern}, nil
	}
	re, err := compileRe("pattern", s.Pattern, true)
	if err == nil && re.MatchString("") {
		return nil, fmt.Errorf("pattern %q matches empty output, so it would always be met; make it require some text", s.Pattern)
	}
	return outputPattern{text: s.Pattern, re: re}, err
}

// Predicate is the completion predicate of a predicate condition, nil for
// every other kind.
func (c *Condition) Predicate() *Predicate {
	if p, ok := c.check.(*predicate); ok {
		return p.p
	}
	return nil
}

// where is the condition's own position for an error: the file and line of
// its [[stop]] table and its name.
func (c *Condition) where() string {
	switch {
	case c.File != "" && c.Line > 0:
		return fmt.Sprintf("%s:%d: [[stop]] %q", c.File, c.Line, c.Name)
	case c.File != "":
		return fmt.Sprintf("%s: [[stop]] %q", c.File, c.Name)
	}
	return fmt.Sprintf("[[stop]] %q", c.Name)
}

func buildCommand(s *config.Stop) (checker, error) {
	if len(s.Cmd) == 0 || s.Cmd[0] == "" {
		return nil, errors.New(`kind "command" needs cmd, an argv such as ["go", "test", "./..."]`)
	}
	if !strings.ContainsRune(s.Cmd[0], '/') {
		if _, err := exec.LookPath(s.Cmd[0]); err != nil {
			return nil, fmt.Errorf("cmd %q is not on PATH; install it or write its full path", s.Cmd[0])
		}
	}
	c := &command{argv: s.Cmd, expect: 0}
	if s.ExpectExit != nil {
		c.expect = *s.ExpectExit
	}
	var err error
	if c.must, err = compileRe("must_match", s.MustMatch, false); err != nil {
		return nil, err
	}
	if c.mustNot, err = compileRe("must_not_match", s.MustNotMatch, false); err != nil {
		return nil, err
	}
	return c, nil
}

func buildPredicate(s *config.Stop) (checker, error) {
	var p *Predicate
	var err error
	switch {
	case (s.RTFS == "") == (s.JSON == ""):
		return nil, errors.New(`kind "predicate" needs exactly one of rtfs or json`)
	case s.RTFS != "":
		p, err = ParsePredicateRTFS(s.RTFS, "rtfs")
	default:
		p, err = ParsePredicateJSON([]byte(s.JSON), "json rtfs")
	}
	if err != nil {
		return nil, err
	}
	return &predicate{p: p}, nil
}

func buildComposite(s *config.Stop, file string, line int) (checker, error) {
	if len(s.Conditions) == 0 {
		return nil, fmt.Errorf("kind %q needs conditions, a list of stop tables", s.Kind)
	}
	if s.Kind == KindNot && len(s.Conditions) != 1 {
		return nil, errors.New(`kind "not" takes exactly one condition`)
	}
	kids := make([]*Condition, len(s.Conditions))
	for i := range s.Conditions {
		k, err := build(&s.Conditions[i], file, line)
		if err != nil {
			var ce *config.Error
			if errors.As(err, &ce) {
				return nil, fmt.Errorf("conditions[%d]: %s", i, ce.Msg)
			}
			return nil, err
		}
		if k.Name == "" {
			k.Name = fmt.Sprintf("%s[%d]", s.Kind, i)
		}
		kids[i] = k
	}
	return &composite{op: s.Kind, kids: kids}, nil
}

// Percent is progress (0–1) as a whole percentage for display: rounded
// down, and below 100 until the condition is met, so "199/200" never shows
// as 100% before it fires.
func Percent(progress float64, met bool) int {
	if met {
		return 100
	}
	return min(max(int(progress*100), 0), 99)
}

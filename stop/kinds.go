package stop

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/config"
)

// The [[stop]] kinds ralph knows. Code that means one names it by its
// constant; code outside this package asks a kind's row (Lookup) or a
// built Condition, never compares a name.
const (
	KindOnError             = "on_error"
	KindUserSignal          = "user_signal"
	KindMaxIterations       = "max_iterations"
	KindMaxDuration         = "max_duration"
	KindMaxCost             = "max_cost"
	KindMaxTokens           = "max_tokens"
	KindConsecutiveFailures = "consecutive_failures"
	KindNoProgress          = "no_progress"
	KindCommand             = "command"
	KindPredicate           = "predicate"
	KindOutputPattern       = "output_pattern"
	KindFileExists          = "file_exists"
	KindFileContains        = "file_contains"
	KindAll                 = "all"
	KindAny                 = "any"
	KindNot                 = "not"
	KindNever               = "never"
)

// Kind is one [[stop]] kind: every fact ralph needs about it, in one row
// (DESIGN §21). FromConfig checks a table against its row (Fields), builds
// its checker (Build); replay, the why line, the runner's budgets and
// deadline, notifications and a worker's policy read the other fields.
type Kind struct {
	Name string
	// Fields are the [[stop]] fields it needs (each set, a number
	// positive) and those it may also take, beyond those every kind takes
	// (name, kind, class, priority, timeout, timeout_class, error_class).
	Required, Optional []string
	// Priority and Class are its defaults (DESIGN §8).
	Priority int
	Class    Class
	// FixedClass, when set, says why its class cannot be changed
	// ("always aborts the run (exit 4)").
	FixedClass string
	// Build makes its checker from a table checked against the fields.
	Build func(s *config.Stop, file string, line int) (checker, error)
	// Reads says where its answer comes from, and every row must say it:
	// FromInput (the run as the chain records it) or FromWorld (files or a
	// command), which a replay answers with the recorded verdict or a rerun
	// against a checkpoint, never with today's working directory.
	Reads Source
	// Why picks the line that says why a result of it stands where it
	// does; nil takes the result's reason (see Why).
	Why func(r *Result) string
	// Limits is what a table of it bounds, for the runner's budgets and
	// deadline and the UI's bars; nil bounds nothing.
	Limits func(s *config.Stop) Limits
	// Runs is the program a table of it runs (a worker's policy checks
	// it); nil runs none.
	Runs func(s *config.Stop) string
	// Streak: its detail reads "no progress K/N", a count of iterations
	// toward stopping, which notify warns of one iteration before.
	Streak bool
	// Spend: its progress is the share of a money budget spent, which
	// notify reports at 50, 80 and 100%.
	Spend bool
	// Fingerprints: its evidence is the working directory's fingerprint
	// ("fingerprint %x"), which a replay reads back as that iteration's
	// workspace.
	Fingerprints bool
	// DefaultTimeout bounds one check when the table sets none (0: the
	// check is in-process and needs no bound of its own).
	DefaultTimeout time.Duration
}

// Source is where a kind's answer comes from (Kind.Reads). Its zero value
// is no answer: a row must choose.
type Source int

const (
	// FromInput: the Input snapshot alone (the chain: iterations, cost,
	// actions, the audit index; no_progress's workspace fingerprint, which
	// a replay takes from the checkpoint).
	FromInput Source = iota + 1
	// FromWorld: files or a command outside the chain.
	FromWorld
)

// Limits is what a condition bounds: the run's iterations, spend, tokens
// and time. Zero fields bound nothing.
type Limits struct {
	Iterations int
	CostUSD    float64
	Tokens     int64
	Duration   time.Duration
}

// builtinKinds is the one table of stop-condition kinds. To add a kind:
// a row here and its checker (a type with check, fingerprint and inputs,
// in conditions_*.go); TestAKindIsOneRow shows that is all it takes.
func builtinKinds() []Kind {
	return []Kind{
		{Name: KindOnError, Required: []string{"pattern"}, Priority: 100, Class: ClassFailure, Reads: FromInput, Build: buildOnError, Why: evidenceWhy},
		{Name: KindUserSignal, Priority: 90, Class: ClassAbort, Reads: FromInput, FixedClass: "always aborts the run (exit 4)",
			Build: func(*config.Stop, string, int) (checker, error) { return userSignal{}, nil }},
		{Name: KindMaxIterations, Required: []string{"max"}, Priority: 80, Class: ClassLimit, Reads: FromInput,
			Build:  func(s *config.Stop, _ string, _ int) (checker, error) { return maxIterations{s.Max}, nil },
			Limits: func(s *config.Stop) Limits { return Limits{Iterations: s.Max} }},
		{Name: KindMaxDuration, Required: []string{"duration"}, Priority: 80, Class: ClassLimit, Reads: FromInput,
			Build:  func(s *config.Stop, _ string, _ int) (checker, error) { return maxDuration{s.Duration.Duration}, nil },
			Limits: func(s *config.Stop) Limits { return Limits{Duration: s.Duration.Duration} }},
		{Name: KindMaxCost, Required: []string{"usd"}, Priority: 80, Class: ClassLimit, Reads: FromInput, Spend: true,
			Build:  func(s *config.Stop, _ string, _ int) (checker, error) { return maxCost{s.USD}, nil },
			Limits: func(s *config.Stop) Limits { return Limits{CostUSD: s.USD} }},
		{Name: KindMaxTokens, Required: []string{"tokens"}, Priority: 80, Class: ClassLimit, Reads: FromInput,
			Build:  func(s *config.Stop, _ string, _ int) (checker, error) { return maxTokens{s.Tokens}, nil },
			Limits: func(s *config.Stop) Limits { return Limits{Tokens: s.Tokens} }},
		{Name: KindConsecutiveFailures, Required: []string{"count"}, Priority: 70, Class: ClassFailure, Reads: FromInput,
			Build: func(s *config.Stop, _ string, _ int) (checker, error) { return consecutiveFailures{s.Count}, nil }},
		{Name: KindNoProgress, Required: []string{"iterations"}, Priority: 70, Class: ClassFailure, Reads: FromInput, Streak: true, Fingerprints: true,
			Build: func(s *config.Stop, _ string, _ int) (checker, error) { return &noProgress{n: s.Iterations}, nil }},
		{Name: KindCommand, Required: []string{"cmd"}, Optional: []string{"expect_exit", "must_match", "must_not_match"},
			Priority: 60, Class: ClassSuccess, Reads: FromWorld, Why: commandWhy, DefaultTimeout: DefaultCommandTimeout,
			Build: func(s *config.Stop, _ string, _ int) (checker, error) { return buildCommand(s) },
			Runs:  func(s *config.Stop) string { return first(s.Cmd) }},
		{Name: KindPredicate, Optional: []string{"rtfs", "json"}, Priority: 55, Class: ClassSuccess, Reads: FromInput,
			Build: func(s *config.Stop, _ string, _ int) (checker, error) { return buildPredicate(s) },
			Why:   func(r *Result) string { return predicateWhy(r.Evidence, r.Met) }},
		{Name: KindOutputPattern, Required: []string{"pattern"}, Optional: []string{"regex"}, Priority: 50, Class: ClassSuccess, Reads: FromInput,
			Build: buildOutputPattern, Why: evidenceWhy},
		{Name: KindFileExists, Required: []string{"path"}, Priority: 40, Class: ClassSuccess, Reads: FromWorld, Why: evidenceWhy,
			Build: func(s *config.Stop, _ string, _ int) (checker, error) { return fileExists{s.Path}, nil }},
		{Name: KindFileContains, Required: []string{"path", "pattern"}, Priority: 40, Class: ClassSuccess, Reads: FromWorld, Why: evidenceWhy,
			Build: buildFileContains},
		{Name: KindAll, Required: []string{"conditions"}, Priority: 20, Class: ClassSuccess, Reads: FromInput, Build: buildComposite},
		{Name: KindAny, Required: []string{"conditions"}, Priority: 20, Class: ClassSuccess, Reads: FromInput, Build: buildComposite},
		{Name: KindNot, Required: []string{"conditions"}, Priority: 10, Class: ClassSuccess, Reads: FromInput, Build: buildComposite},
		{Name: KindNever, Priority: 0, Class: ClassSuccess, Reads: FromInput,
			Build: func(*config.Stop, string, int) (checker, error) { return never{}, nil }},
	}
}

// first is argv's program, or "".
func first(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

// kinds are the rows by name. It is filled in init: a composite's Build
// builds its parts through it.
var (
	kindsMu sync.RWMutex
	kinds   map[string]*Kind
)

func init() {
	kinds = map[string]*Kind{}
	for _, k := range builtinKinds() {
		kinds[k.Name] = &k
	}
}

// register adds kind k (a test of the extension point adds one). It
// refuses a name already taken, a field no [[stop]] has, or no Build.
func register(k Kind) error {
	for _, f := range append(slices.Clone(k.Required), k.Optional...) {
		if !slices.Contains(stopFields, f) {
			return fmt.Errorf("stop kind %q: %q is not a [[stop]] field", k.Name, f)
		}
	}
	if k.Class.rank() == 0 || k.Build == nil || k.Reads == 0 {
		return fmt.Errorf("stop kind %q needs a class, a Build and where it reads (Reads)", k.Name)
	}
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, ok := kinds[k.Name]; ok || k.Name == "" {
		return fmt.Errorf("stop kind %q is taken", k.Name)
	}
	kinds[k.Name] = &k
	return nil
}

// unregister removes a kind register added.
func unregister(name string) {
	kindsMu.Lock()
	delete(kinds, name)
	kindsMu.Unlock()
}

// Lookup is kind name's row.
func Lookup(name string) (*Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// KindNames returns every stop condition kind, sorted.
func KindNames() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// unknownKind is the sentence for a kind no row declares.
func unknownKind(kind string) string {
	return fmt.Sprintf("kind %q is unknown; use one of %s", kind, strings.Join(KindNames(), ", "))
}

// SpecLimits is what the table s bounds, by its kind's row, before it is
// built (a worker's policy reads a job's tables); zero for a kind that
// bounds nothing or is unknown.
func SpecLimits(s *config.Stop) Limits {
	if k, ok := Lookup(s.Kind); ok && k.Limits != nil {
		return k.Limits(s)
	}
	return Limits{}
}

// SpecRuns is the program the table s runs, by its kind's row, or "".
func SpecRuns(s *config.Stop) string {
	if k, ok := Lookup(s.Kind); ok && k.Runs != nil {
		return k.Runs(s)
	}
	return ""
}

// SpecName is the name of specs[i]: its own, else the one FromConfig gives
// it (KIND-N, N counting from 1).
func SpecName(specs []config.Stop, i int) string {
	if specs[i].Name != "" {
		return specs[i].Name
	}
	return fmt.Sprintf("%s-%d", specs[i].Kind, i+1)
}

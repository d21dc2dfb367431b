package config

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// The [[stop]] kinds ralph knows. Code that means one names it by its
// constant.
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

// StopKind declares one [[stop]] kind: what config checks of it (the
// fields it needs and those it may also take, beyond those every kind
// takes: name, kind, class, priority, timeout, timeout_class,
// error_class) and its defaults (DESIGN §8). Package stop builds the
// condition's checker; a kind is one entry here and one builder there
// (stop/doc.go says how to add one).
type StopKind struct {
	Name     string
	Required []string // each must be set (positive, non-empty)
	Optional []string
	Priority int    // the default priority: the higher decides first within a class
	Class    string // the default class: success, failure, limit or abort
}

// builtinStopKinds is the one table of stop-condition kinds.
var builtinStopKinds = []StopKind{
	{Name: KindOnError, Required: []string{"pattern"}, Priority: 100, Class: "failure"},
	{Name: KindUserSignal, Priority: 90, Class: "abort"},
	{Name: KindMaxIterations, Required: []string{"max"}, Priority: 80, Class: "limit"},
	{Name: KindMaxDuration, Required: []string{"duration"}, Priority: 80, Class: "limit"},
	{Name: KindMaxCost, Required: []string{"usd"}, Priority: 80, Class: "limit"},
	{Name: KindMaxTokens, Required: []string{"tokens"}, Priority: 80, Class: "limit"},
	{Name: KindConsecutiveFailures, Required: []string{"count"}, Priority: 70, Class: "failure"},
	{Name: KindNoProgress, Required: []string{"iterations"}, Priority: 70, Class: "failure"},
	{Name: KindCommand, Required: []string{"cmd"}, Optional: []string{"expect_exit", "must_match", "must_not_match"}, Priority: 60, Class: "success"},
	{Name: KindPredicate, Optional: []string{"rtfs", "json"}, Priority: 55, Class: "success"},
	{Name: KindOutputPattern, Required: []string{"pattern"}, Optional: []string{"regex"}, Priority: 50, Class: "success"},
	{Name: KindFileExists, Required: []string{"path"}, Priority: 40, Class: "success"},
	{Name: KindFileContains, Required: []string{"path", "pattern"}, Priority: 40, Class: "success"},
	{Name: KindAll, Required: []string{"conditions"}, Priority: 20, Class: "success"},
	{Name: KindAny, Required: []string{"conditions"}, Priority: 20, Class: "success"},
	{Name: KindNot, Required: []string{"conditions"}, Priority: 10, Class: "success"},
	{Name: KindNever, Priority: 0, Class: "success"},
}

var (
	stopKindsMu sync.RWMutex
	stopKinds   = func() map[string]StopKind {
		m := make(map[string]StopKind, len(builtinStopKinds))
		for _, k := range builtinStopKinds {
			m[k.Name] = k
		}
		return m
	}()
)

// stopFields are the fields a kind may require or take.
var stopFields = []string{"max", "duration", "usd", "tokens", "count", "iterations", "cmd", "expect_exit",
	"must_match", "must_not_match", "rtfs", "json", "pattern", "regex", "path", "conditions"}

// DeclareStopKind adds kind k, for a kind built outside this table (a test
// of the extension point). It refuses a name already taken or a field no
// [[stop]] has.
func DeclareStopKind(k StopKind) error {
	for _, f := range append(slices.Clone(k.Required), k.Optional...) {
		if !slices.Contains(stopFields, f) {
			return fmt.Errorf("stop kind %q: %q is not a [[stop]] field", k.Name, f)
		}
	}
	switch k.Class {
	case "success", "failure", "limit", "abort":
	default:
		return fmt.Errorf("stop kind %q: class %q must be success, failure, limit or abort", k.Name, k.Class)
	}
	stopKindsMu.Lock()
	defer stopKindsMu.Unlock()
	if _, ok := stopKinds[k.Name]; ok || k.Name == "" {
		return fmt.Errorf("stop kind %q is taken", k.Name)
	}
	stopKinds[k.Name] = k
	return nil
}

// LookupStopKind is kind name's declaration.
func LookupStopKind(name string) (StopKind, bool) {
	stopKindsMu.RLock()
	defer stopKindsMu.RUnlock()
	k, ok := stopKinds[name]
	return k, ok
}

// StopKinds returns every stop condition kind, sorted.
func StopKinds() []string {
	stopKindsMu.RLock()
	defer stopKindsMu.RUnlock()
	out := make([]string, 0, len(stopKinds))
	for k := range stopKinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// UnknownStopKind is the sentence for a kind no table declares.
func UnknownStopKind(kind string) string {
	return fmt.Sprintf("kind %q is unknown; use one of %s", kind, strings.Join(StopKinds(), ", "))
}

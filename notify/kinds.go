package notify

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/config"
)

// Sink is one [[notify]] kind: every fact ralph needs about it, in one row
// (DESIGN §21). Check holds a table to its row (its fields, its own
// checks, its defaults); New builds its sender with the row's New; ralph
// attach (Attached) and a worker's policy (Runs) read the rest. Code
// outside this package asks a row (Lookup, Runs, Attached), never
// compares a kind's name.
type Sink struct {
	Name string
	// Fields are the [[notify]] fields it takes beyond those every sink
	// takes (name, kind, on, timeout, retries). A table of another kind
	// that sets one of them is refused, naming the kinds that take it.
	Fields []string
	// Check checks a table of it beyond its fields: what it needs and how
	// its values must read. Its sentence follows "[[notify]] NAME: " and
	// the table's file:line. nil: nothing more to check.
	Check func(n *config.Notify) error
	// Timeout and Retries are its defaults for a table that sets none:
	// the longest one delivery may take, and the attempts after the first.
	Timeout time.Duration
	Retries int
	// Runs is the program a table of it runs, which a worker's policy
	// holds to its shell_allow; nil runs none.
	Runs func(n *config.Notify) string
	// Attached: it reaches the terminal ralph runs in, so a terminal
	// attached to the run (ralph attach) gets its notifications too.
	Attached bool
	// New makes its sender of a checked table; o gives the environment
	// (url_env, TMUX, the session bus) and the workdir.
	New func(n *config.Notify, o *Options) (Sender, error)
}

// Defaults of [[notify]] the built-in sinks share.
const (
	DefaultTimeout = 10 * time.Second
	DefaultRetries = 3
)

// builtinSinks is the one table of sinks, in the order error messages
// list them. To add a sink: a row here and its Sender in a file of its
// own (terminal.go, desktop.go, webhook.go, command.go);
// TestASinkIsOneRow shows that is all it takes.
func builtinSinks() []Sink {
	return []Sink{
		{Name: "terminal", Timeout: DefaultTimeout, Retries: DefaultRetries, Attached: true, New: newTerminal},
		{Name: "desktop", Timeout: DefaultTimeout, Retries: DefaultRetries, New: newDesktop},
		{Name: "webhook", Fields: []string{"url", "url_env", "secret_env"}, Check: checkWebhook,
			Timeout: DefaultTimeout, Retries: DefaultRetries,
			New: func(n *config.Notify, o *Options) (Sender, error) { return newWebhook(*n, o.Env) }},
		{Name: "command", Fields: []string{"cmd"}, Check: checkCommand, Timeout: DefaultTimeout, Retries: DefaultRetries,
			Runs: func(n *config.Notify) string { return first(n.Cmd) }, New: newCommand},
	}
}

// sinks are the rows, in order. They are filled in init; a test of the
// extension point adds one (register).
var (
	sinksMu sync.RWMutex
	sinks   []*Sink
)

func init() {
	for _, s := range builtinSinks() {
		sinks = append(sinks, &s)
	}
}

// register adds sink s (a test of the extension point adds one). It
// refuses a name already taken, a field [[notify]] does not have, no New
// or no default timeout.
func register(s Sink) error {
	for _, f := range s.Fields {
		if !slices.Contains(sinkFields(), f) {
			return fmt.Errorf("notify sink %q: %q is not a [[notify]] field a sink may take", s.Name, f)
		}
	}
	if s.New == nil || s.Timeout <= 0 {
		return fmt.Errorf("notify sink %q needs a New and a default timeout", s.Name)
	}
	sinksMu.Lock()
	defer sinksMu.Unlock()
	if s.Name == "" || slices.ContainsFunc(sinks, func(k *Sink) bool { return k.Name == s.Name }) {
		return fmt.Errorf("notify sink %q is taken", s.Name)
	}
	sinks = append(sinks, &s)
	return nil
}

// unregister removes a sink register added.
func unregister(name string) {
	sinksMu.Lock()
	defer sinksMu.Unlock()
	sinks = slices.DeleteFunc(sinks, func(k *Sink) bool { return k.Name == name })
}

// Lookup is sink kind name's row.
func Lookup(name string) (*Sink, bool) {
	sinksMu.RLock()
	defer sinksMu.RUnlock()
	for _, s := range sinks {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

// SinkNames are the sink kinds, in the table's order.
func SinkNames() []string {
	sinksMu.RLock()
	defer sinksMu.RUnlock()
	out := make([]string, len(sinks))
	for i, s := range sinks {
		out[i] = s.Name
	}
	return out
}

// Events are the event names a [[notify]] table's on may list.
func Events() []string {
	return []string{RunEnded, ApprovalNeeded, RateLimitWait, RateLimitOver, NoProgressWarning, Budget}
}

// Runs is the program the table n runs, by its kind's row, or "" (a kind
// that runs none, or an unknown one).
func Runs(n *config.Notify) string {
	if s, ok := Lookup(n.Kind); ok && s.Runs != nil {
		return s.Runs(n)
	}
	return ""
}

// Name is the name of tables[i]: its own, else the one Check gives it
// (KIND-N, N counting from 1).
func Name(tables []config.Notify, i int) string {
	if tables[i].Name != "" {
		return tables[i].Name
	}
	return defaultName(tables[i].Kind, i)
}

func defaultName(kind string, i int) string { return fmt.Sprintf("%s-%d", kind, i+1) }

// Attached says whether the table n reaches the terminal ralph runs in,
// by its kind's row: a terminal attached to the run gets it too.
func Attached(n *config.Notify) bool {
	s, ok := Lookup(n.Kind)
	return ok && s.Attached
}

// commonFields are the [[notify]] fields every sink takes.
var commonFields = []string{"name", "kind", "on", "timeout", "retries"}

// sinkFields are the [[notify]] fields a row may take (Sink.Fields): every
// field config.Notify decodes but the common ones, in its order.
func sinkFields() []string {
	var out []string
	t := reflect.TypeFor[config.Notify]()
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("toml"); tag != "" && tag != "-" && !slices.Contains(commonFields, tag) {
			out = append(out, tag)
		}
	}
	return out
}

// setFields are the sink fields n sets (a list: when it is not empty), in
// config.Notify's order.
func setFields(n *config.Notify) []string {
	var out []string
	v := reflect.ValueOf(n).Elem()
	for i := range v.NumField() {
		tag := v.Type().Field(i).Tag.Get("toml")
		if tag == "" || tag == "-" || slices.Contains(commonFields, tag) {
			continue
		}
		if f := v.Field(i); (f.Kind() == reflect.Slice && f.Len() > 0) || (f.Kind() != reflect.Slice && !f.IsZero()) {
			out = append(out, tag)
		}
	}
	return out
}

// Check holds each [[notify]] table to its kind's row and fills in its
// defaults (name KIND-N, the row's timeout and retries): the part of the
// one config check (assemble.Check) that is notify's. An error is a
// *config.Error naming file and the table's line.
func Check(tables []config.Notify, file string) error {
	for i := range tables {
		if err := check(&tables[i], file, i); err != nil {
			return err
		}
	}
	return nil
}

// check holds n, the i-th table, to its row.
func check(n *config.Notify, file string, i int) error {
	if n.Name == "" {
		n.Name = defaultName(n.Kind, i)
	}
	bad := func(format string, args ...any) error {
		return &config.Error{File: file, Line: n.Line, Msg: "[[notify]] " + n.Name + ": " + fmt.Sprintf(format, args...)}
	}
	s, ok := Lookup(n.Kind)
	if !ok {
		return bad("kind %q is not one of %s", n.Kind, strings.Join(SinkNames(), ", "))
	}
	for _, e := range n.On {
		if !slices.Contains(Events(), e) {
			return bad("on names %q, which is not one of %s", e, strings.Join(Events(), ", "))
		}
	}
	if n.Timeout.Duration == 0 {
		n.Timeout.Duration = s.Timeout
	}
	if n.Retries == nil {
		r := s.Retries
		n.Retries = &r
	} else if *n.Retries < 0 || *n.Retries > 10 {
		return bad("retries must be between 0 and 10")
	}
	if s.Check != nil {
		if err := s.Check(n); err != nil {
			return bad("%v", err)
		}
	}
	for _, f := range setFields(n) {
		if !slices.Contains(s.Fields, f) {
			return bad("%s", strayField(f))
		}
	}
	return nil
}

// strayField says which kinds take field f, for a table of another kind
// that sets it: `url, url_env and secret_env are for kind = "webhook"`.
func strayField(f string) string {
	sinksMu.RLock()
	defer sinksMu.RUnlock()
	var takers []*Sink
	for _, s := range sinks {
		if slices.Contains(s.Fields, f) {
			takers = append(takers, s)
		}
	}
	if len(takers) == 0 {
		return fmt.Sprintf("%s is for no kind of sink; remove it", f)
	}
	if len(takers) > 1 {
		names := make([]string, len(takers))
		for i, s := range takers {
			names[i] = fmt.Sprintf("%q", s.Name)
		}
		return fmt.Sprintf("%s is for kind = %s", f, strings.Join(names, " or "))
	}
	fields := takers[0].Fields
	if len(fields) == 1 {
		return fmt.Sprintf("%s is for kind = %q", fields[0], takers[0].Name)
	}
	return fmt.Sprintf("%s and %s are for kind = %q", strings.Join(fields[:len(fields)-1], ", "), fields[len(fields)-1], takers[0].Name)
}

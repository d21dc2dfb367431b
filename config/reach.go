package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Notify is one [[notify]] sink (DESIGN §20): where the events a person
// cares about are sent, decoded with its line. Which fields apply, their
// checks and defaults are its kind's row's (notify.Sink), which
// notify.Check holds it to.
type Notify struct {
	Name      string   `toml:"name"`
	Kind      string   `toml:"kind"` // a notify.Sink's name
	On        []string `toml:"on"`   // event names (notify.Events); empty: all of them
	URL       string   `toml:"url"`  // webhook: a URL with no secret in it (else url_env)
	URLEnv    string   `toml:"url_env"`
	SecretEnv string   `toml:"secret_env"` // webhook: the HMAC-SHA256 key's variable
	Cmd       []string `toml:"cmd"`        // command: argv, the event as JSON on stdin
	Timeout   Duration `toml:"timeout"`    // per call (default: the sink's row's)
	Retries   *int     `toml:"retries"`    // webhook: attempts after the first (default: the row's)

	Line int `toml:"-"`
}

// Hook is one [[hook]]: a command run at a point of the loop's life.
type Hook struct {
	Name      string   `toml:"name"`
	At        string   `toml:"at"`
	Cmd       []string `toml:"cmd"`
	OnFailure string   `toml:"on_failure"` // warn | fail_iteration | pause (default warn)
	Timeout   Duration `toml:"timeout"`    // default 60s

	Line int `toml:"-"`
}

// HookPoints are where a [[hook]] may run, in the order of an iteration.
var HookPoints = []string{"before_iteration", "after_iteration", "before_stop_check", "on_stop", "on_error"}

// HookFailures are the on_failure modes.
var HookFailures = []string{"warn", "fail_iteration", "pause"}

// DefaultHookTimeout bounds a [[hook]] that sets no timeout.
const DefaultHookTimeout = 60 * time.Second

// validateReach checks [[hook]] and fills its defaults. [[notify]] is
// only decoded here, with its lines (Parse): its kinds' rows check it
// (notify.Check, from assemble.Check).
func (c *Config) validateReach(file string) error {
	for i := range c.Hook {
		h := &c.Hook[i]
		h.Line = c.lines.arrayLine("hook", i)
		if err := validateHook(h, file, i); err != nil {
			return err
		}
	}
	return nil
}

func validateHook(h *Hook, file string, i int) error {
	if h.Name == "" {
		h.Name = fmt.Sprintf("%s-%d", h.At, i+1)
	}
	bad := func(format string, args ...any) error {
		return &Error{File: file, Line: h.Line, Msg: "[[hook]] " + h.Name + ": " + fmt.Sprintf(format, args...)}
	}
	if !slices.Contains(HookPoints, h.At) {
		return bad("at %q is not one of %s", h.At, strings.Join(HookPoints, ", "))
	}
	if len(h.Cmd) == 0 || h.Cmd[0] == "" {
		return bad("cmd is required: the argv to run, e.g. [\"./notify.sh\"]")
	}
	if h.OnFailure == "" {
		h.OnFailure = "warn"
	}
	if !slices.Contains(HookFailures, h.OnFailure) {
		return bad("on_failure %q is not one of %s", h.OnFailure, strings.Join(HookFailures, ", "))
	}
	switch {
	case h.OnFailure == "fail_iteration" && h.At != "before_iteration" && h.At != "after_iteration":
		return bad("on_failure = \"fail_iteration\" applies at before_iteration and after_iteration only (at %s the iteration is already closed); use warn or pause", h.At)
	case h.OnFailure == "pause" && h.At == "on_stop":
		return bad("on_failure = \"pause\" cannot apply at on_stop (the run is ending); use warn")
	}
	if h.Timeout.Duration == 0 {
		h.Timeout.Duration = DefaultHookTimeout
	}
	return nil
}

// FileName is the config's file as the user named it (else its absolute
// path), as config's own errors name it: what the checks of the tables
// config only decodes (notify.Check) put before the line.
func (c *Config) FileName() string { return c.displayName() }

package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Notify is one [[notify]] sink (DESIGN §20): where the events a person
// cares about are sent. Which fields apply depends on Kind.
type Notify struct {
	Name      string   `toml:"name"`
	Kind      string   `toml:"kind"` // terminal | desktop | webhook | command
	On        []string `toml:"on"`   // event names; empty: all of NotifyEvents
	URL       string   `toml:"url"`  // webhook: a URL with no secret in it (else url_env)
	URLEnv    string   `toml:"url_env"`
	SecretEnv string   `toml:"secret_env"` // webhook: the HMAC-SHA256 key's variable
	Cmd       []string `toml:"cmd"`        // command: argv, the event as JSON on stdin
	Timeout   Duration `toml:"timeout"`    // per call (default 10s)
	Retries   *int     `toml:"retries"`    // webhook: attempts after the first (default 3)

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

// The events a [[notify]] sink can take.
var NotifyEvents = []string{"run_ended", "approval_needed", "rate_limit_wait", "rate_limit_over", "no_progress_warning", "budget"}

// NotifyKinds are the sinks.
var NotifyKinds = []string{"terminal", "desktop", "webhook", "command"}

// HookPoints are where a [[hook]] may run, in the order of an iteration.
var HookPoints = []string{"before_iteration", "after_iteration", "before_stop_check", "on_stop", "on_error"}

// HookFailures are the on_failure modes.
var HookFailures = []string{"warn", "fail_iteration", "pause"}

// Defaults of [[notify]] and [[hook]].
const (
	DefaultNotifyTimeout = 10 * time.Second
	DefaultNotifyRetries = 3
	DefaultHookTimeout   = 60 * time.Second
)

// validateReach checks [[notify]] and [[hook]] and fills their defaults.
func (c *Config) validateReach(file string) error {
	for i := range c.Notify {
		n := &c.Notify[i]
		n.Line = c.lines.arrayLine("notify", i)
		if err := validateNotify(n, file, i); err != nil {
			return err
		}
	}
	for i := range c.Hook {
		h := &c.Hook[i]
		h.Line = c.lines.arrayLine("hook", i)
		if err := validateHook(h, file, i); err != nil {
			return err
		}
	}
	return nil
}

func validateNotify(n *Notify, file string, i int) error {
	if n.Name == "" {
		n.Name = fmt.Sprintf("%s-%d", n.Kind, i+1)
	}
	bad := func(format string, args ...any) error {
		return &Error{File: file, Line: n.Line, Msg: "[[notify]] " + n.Name + ": " + fmt.Sprintf(format, args...)}
	}
	if !slices.Contains(NotifyKinds, n.Kind) {
		return bad("kind %q is not one of %s", n.Kind, strings.Join(NotifyKinds, ", "))
	}
	for _, e := range n.On {
		if !slices.Contains(NotifyEvents, e) {
			return bad("on names %q, which is not one of %s", e, strings.Join(NotifyEvents, ", "))
		}
	}
	if n.Timeout.Duration == 0 {
		n.Timeout.Duration = DefaultNotifyTimeout
	}
	if n.Retries == nil {
		r := DefaultNotifyRetries
		n.Retries = &r
	} else if *n.Retries < 0 || *n.Retries > 10 {
		return bad("retries must be between 0 and 10")
	}
	switch n.Kind {
	case "webhook":
		switch {
		case n.URL == "" && n.URLEnv == "":
			return bad("a webhook needs url_env, the environment variable that holds its URL (a Slack webhook URL is itself a secret)")
		case n.URL != "" && n.URLEnv != "":
			return bad("a webhook has url or url_env, not both; keep url_env")
		case n.URL != "":
			if err := CheckWebhookURL(n.URL, true); err != nil {
				return bad("url %v", err)
			}
		}
	case "command":
		if len(n.Cmd) == 0 || n.Cmd[0] == "" {
			return bad("a command sink needs cmd, e.g. [\"notify-send-wrapper\"]: it gets the event as JSON on stdin")
		}
	}
	if n.Kind != "webhook" && (n.URL != "" || n.URLEnv != "" || n.SecretEnv != "") {
		return bad("url, url_env and secret_env are for kind = \"webhook\"")
	}
	if n.Kind != "command" && len(n.Cmd) > 0 {
		return bad("cmd is for kind = \"command\"")
	}
	return nil
}

// CheckWebhookURL refuses a webhook URL that does not parse as http(s) or,
// when inConfig, carries a credential a config file would show in clear:
// a user or password, or a secret-looking query parameter, or a Slack
// webhook path (whose path is the secret).
func CheckWebhookURL(raw string, inConfig bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL; write it like https://example.com/hook", RedactURL(raw))
	}
	if !inConfig {
		return nil
	}
	fix := "; put the URL in an environment variable and name it with url_env instead"
	if u.User != nil {
		return fmt.Errorf("%s carries a credential in clear%s", RedactURL(raw), fix)
	}
	for k := range u.Query() {
		if IsSecretQueryKey(k) {
			return fmt.Errorf("%s://%s%s carries a credential in clear (query parameter %s)%s", u.Scheme, u.Host, u.Path, k, fix)
		}
	}
	if strings.EqualFold(u.Hostname(), "hooks.slack.com") {
		return fmt.Errorf("%s://%s/… is a Slack webhook URL, which is itself a credential in clear%s", u.Scheme, u.Host, fix)
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

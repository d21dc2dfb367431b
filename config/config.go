package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is a parsed ralph.toml (DESIGN §4). Paths are absolute once loaded.
type Config struct {
	File       string     `toml:"-"` // the file it was read from ("" for defaults)
	Intent     Intent     `toml:"intent"`
	Model      Model      `toml:"model"`
	Plan       Plan       `toml:"plan"`
	Loop       Loop       `toml:"loop"`
	Stop       []Stop     `toml:"stop"`
	Governance Governance `toml:"governance"`
	Store      Store      `toml:"store"`
	Agent      *Agent     `toml:"agent"` // nil without an [agent] section
	Notify     []Notify   `toml:"notify"`
	Hook       []Hook     `toml:"hook"`
	Sandbox    *Sandbox   `toml:"sandbox"` // nil without a [sandbox] section
	Tasks      *Tasks     `toml:"tasks"`   // nil without a [tasks] section

	lines    *lineIndex
	name     string // the path as given, for messages
	modelErr error  // what is wrong with [model], for LoadForExec
}

// Intent is what the loop is asked to achieve.
type Intent struct {
	Goal       string         `toml:"goal"`
	PromptFile string         `toml:"prompt_file"`
	Params     map[string]any `toml:"params"`
}

// Model selects the plan provider.
type Model struct {
	Provider    string   `toml:"provider"` // openai | static | script | command | agent
	Model       string   `toml:"model"`
	BaseURL     string   `toml:"base_url"`
	APIKeyEnv   string   `toml:"api_key_env"`
	MaxRepairs  int      `toml:"max_repairs"`
	Command     []string `toml:"command"`
	Script      string   `toml:"script"`
	Temperature *float64 `toml:"temperature"`
	MaxTokens   int      `toml:"max_tokens"`
	Timeout     Duration `toml:"timeout"`
	Price       Price    `toml:"price"`
}

// Price converts token usage to dollars.
type Price struct {
	InputPerMTok  float64 `toml:"input_per_mtok"`
	OutputPerMTok float64 `toml:"output_per_mtok"`
}

// Plan is the static plan (provider = "static").
type Plan struct {
	RTFS string `toml:"rtfs"`
	File string `toml:"file"`
}

// Loop configures iterations.
type Loop struct {
	Delay         Duration `toml:"delay"`
	Workdir       string   `toml:"workdir"`
	Approve       bool     `toml:"approve"`
	MaxIterations int      `toml:"max_iterations"`
	// Checkpoints, on by default, commits the work tree after every
	// iteration on hidden refs when the workdir is in a git work tree
	// (DESIGN §19); false turns it off.
	Checkpoints *bool `toml:"checkpoints"`
}

// CheckpointsOn reports whether [loop] checkpoints is on (the default).
func (l Loop) CheckpointsOn() bool { return l.Checkpoints == nil || *l.Checkpoints }

// Stop is one [[stop]] condition; which fields apply depends on Kind.
type Stop struct {
	Name     string `toml:"name"`
	Kind     string `toml:"kind"`
	Class    string `toml:"class"`
	Priority *int   `toml:"priority"`

	Max          int      `toml:"max"`
	Duration     Duration `toml:"duration"`
	USD          float64  `toml:"usd"`
	Tokens       int64    `toml:"tokens"`
	Count        int      `toml:"count"`
	Iterations   int      `toml:"iterations"`
	Cmd          []string `toml:"cmd"`
	ExpectExit   *int     `toml:"expect_exit"`
	MustMatch    string   `toml:"must_match"`
	MustNotMatch string   `toml:"must_not_match"`
	Timeout      Duration `toml:"timeout"`
	TimeoutClass string   `toml:"timeout_class"`
	ErrorClass   string   `toml:"error_class"` // what a check that cannot run counts as (default failure)
	RTFS         string   `toml:"rtfs"`
	JSON         string   `toml:"json"`
	Pattern      string   `toml:"pattern"`
	Regex        bool     `toml:"regex"`
	Path         string   `toml:"path"`
	Conditions   []Stop   `toml:"conditions"`

	Line int `toml:"-"` // where it was written, for error messages
}

// Governance is the constitution.
type Governance struct {
	Allow                         []string `toml:"allow"`
	Deny                          []string `toml:"deny"`
	ShellAllow                    []string `toml:"shell_allow"`
	RequireContracts              []string `toml:"require_contracts"`
	RequireCompensationForEffects []string `toml:"require_compensation_for_effects"`
	MaxCostUSD                    float64  `toml:"max_cost_usd"`
	MaxSteps                      int      `toml:"max_steps"`
	AgentAllow                    []string `toml:"agent_allow"` // agent CLIs agent.run may run; default [agent].cli
}

// Store configures the ledger.
type Store struct {
	Dir        string `toml:"dir"`
	SyncWrites *bool  `toml:"sync_writes"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration struct{ time.Duration }

// UnmarshalText parses "1m30s" and friends.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration; write it like \"30s\" or \"5m\"", string(b))
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", string(b))
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration back in Go form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Error is a config problem with its place: "ralph.toml:12: message".
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Env is the environment a config reads overrides from.
type Env func(string) string

// Default returns the configuration used with no file: a static plan that
// greets, computes and finishes, bounded by max_iterations.
func Default() *Config {
	c := &Config{}
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	if c.Model.Provider == "" {
		c.Model.Provider = "static"
		if c.Agent != nil && c.Plan.RTFS == "" && c.Plan.File == "" {
			c.Model.Provider = "agent" // [agent] and no [plan]: the agent loop
		}
	}
	if c.Model.APIKeyEnv == "" {
		c.Model.APIKeyEnv = "OPENAI_API_KEY"
	}
	if c.Model.MaxRepairs == 0 {
		c.Model.MaxRepairs = 2
	}
	if c.Loop.Workdir == "" {
		c.Loop.Workdir = "."
	}
	if c.Store.Dir == "" {
		c.Store.Dir = ".ralph"
	}
	if c.Store.SyncWrites == nil {
		t := true
		c.Store.SyncWrites = &t
	}
}

// Load reads, checks and completes a config file. env supplies RALPH_STORE
// and OPENAI_BASE_URL overrides (nil means os.Getenv).
func Load(path string, env Env) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config %s does not exist; create one with `ralph init`", path)
		}
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			return nil, fmt.Errorf("config %s is a directory; pass the ralph.toml in it (%s)", path, filepath.Join(path, "ralph.toml"))
		}
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return Parse(data, path, env)
}

// LoadForExec is Load for a command that runs a plan it is given (ralph
// exec): it uses governance, the workdir and the store but never plans,
// so a [model] that could not plan (provider "static" without a [plan]) is
// no error. ModelError says what is wrong with [model], if anything.
func LoadForExec(path string, env Env) (*Config, error) {
	return forExec(Load(path, env))
}

// ParseForExec is LoadForExec on bytes (a stop configuration a user edits
// in ralph web's what-if form); path names it in errors.
func ParseForExec(data []byte, path string, env Env) (*Config, error) {
	return forExec(Parse(data, path, env))
}

// forExec keeps the config an error in [model] or [plan] was found in.
func forExec(c *Config, err error) (*Config, error) {
	var me *modelError
	if errors.As(err, &me) {
		if me.rest != nil {
			return nil, me.rest
		}
		return me.cfg, nil
	}
	return c, err
}

// ModelError is the error Load would give for the [model] table of a
// config read with LoadForExec, or nil.
func (c *Config) ModelError() error { return c.modelErr }

// modelError is a validation error in [model] or [plan]: fatal for every
// command but exec, which keeps the config it was found in.
type modelError struct {
	err  error
	cfg  *Config
	rest error // the first error outside [model] and [plan], if any
}

func (e *modelError) Error() string { return e.err.Error() }
func (e *modelError) Unwrap() error { return e.err }

// Parse is Load on bytes; path names the file and anchors relative paths.
func Parse(data []byte, path string, env Env) (*Config, error) {
	if env == nil {
		env = os.Getenv
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	c := &Config{File: abs, lines: indexLines(data), name: path}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: path, Line: pe.Position.Line, Col: pe.Position.Col, Msg: parseMessage(pe, data)}
		}
		if te := c.typeError(path, err); te != nil {
			return nil, te
		}
		return nil, &Error{File: path, Msg: decodeMessage(err)}
	}
	if t := md.Type("intent", "params"); t != "" && t != "Hash" { // the decoder drops it silently
		return nil, c.errAt(path, "intent.params", "intent.params must be a table, such as { name = \"value\" }, not %s", tomlTypeName(t))
	}
	und := slices.DeleteFunc(md.Undecoded(), func(k toml.Key) bool {
		return strings.HasPrefix(k.String(), "intent.params.") // params are free-form
	})
	if len(und) > 0 {
		msg := fmt.Sprintf("unknown key %s; check the spelling against the commented ralph.toml that `ralph init` writes", und[0])
		if near := nearestKey(knownKeys(reflect.TypeFor[Config]()), und[0].String()); near != "" {
			msg = fmt.Sprintf("unknown key %s; did you mean %s?", und[0], near)
		}
		return nil, &Error{File: path, Line: c.lines.find(und[0]), Msg: msg}
	}
	repairs := c.Model.MaxRepairs
	c.applyDefaults()
	c.agentDefaults(md)
	if md.IsDefined("model", "max_repairs") { // 0 is a choice (no repairs), not "unset"
		c.Model.MaxRepairs = repairs
	}
	dir := filepath.Dir(abs)
	for i := range c.Stop {
		c.Stop[i].Line = c.lines.stopLine(i)
	}
	for i := range c.Notify { // notify's rows check them (notify.Check)
		c.Notify[i].Line = c.lines.arrayLine("notify", i)
	}
	if v := env("RALPH_STORE"); v != "" {
		c.Store.Dir = v
	}
	if v := env("OPENAI_BASE_URL"); v != "" && c.Model.BaseURL == "" {
		c.Model.BaseURL = v
	}
	c.resolvePaths(dir)
	if err := c.validate(path); err != nil {
		return nil, err
	}
	return c, nil
}

// parseMessage says what a TOML syntax error means for a ralph.toml, with
// the fix, where the library's words alone do not.
func parseMessage(pe toml.ParseError, data []byte) string {
	var key string
	if n, _ := fmt.Sscanf(pe.Message, "Key '%s", &key); n == 1 && strings.HasSuffix(pe.Message, "has already been defined.") {
		key = strings.TrimSuffix(key, "'")
		lines := strings.Split(string(data), "\n")
		if l := pe.Position.Line; l >= 1 && l <= len(lines) && strings.HasPrefix(strings.TrimSpace(lines[l-1]), "[") {
			return fmt.Sprintf("[%s] is defined twice; merge the two tables into one", key)
		}
		return fmt.Sprintf("%s is set twice; keep one of the two", key)
	}
	return pe.Message
}

func decodeMessage(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "toml: ")
	return msg
}

func (c *Config) resolvePaths(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	c.Intent.PromptFile = abs(c.Intent.PromptFile)
	if c.Agent != nil {
		c.Agent.PromptFile = abs(c.Agent.PromptFile)
	}
	c.Plan.File = abs(c.Plan.File)
	c.Model.Script = abs(c.Model.Script)
	c.Loop.Workdir = abs(c.Loop.Workdir)
	c.Store.Dir = abs(c.Store.Dir)
	c.Sandbox.resolvePaths(dir)
}

func (c *Config) errAt(file string, key string, format string, args ...any) error {
	line := 0
	if c.lines != nil {
		line = c.lines.findPath(key)
	}
	return &Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

var providers = []string{"openai", "static", "script", "command", "agent"}

func (c *Config) validate(file string) error {
	switch {
	case c.Loop.MaxIterations < 0:
		return c.errAt(file, "loop.max_iterations", "loop.max_iterations must not be negative")
	case c.Governance.MaxCostUSD < 0:
		return c.errAt(file, "governance.max_cost_usd", "governance.max_cost_usd must not be negative")
	}
	if err := c.validateRecord(file); err != nil {
		return err
	}
	if err := c.validateModel(file); err != nil {
		c.modelErr = err
		return &modelError{err: err, cfg: c, rest: c.validateRest(file)}
	}
	if err := c.validateRest(file); err != nil {
		return err
	}
	if err := c.validateTasks(file); err != nil {
		return err
	}
	return c.validateReach(file)
}

// validateModel checks [model] and [plan], what planning needs.
func (c *Config) validateModel(file string) error {
	m := c.Model
	switch {
	case !slices.Contains(providers, m.Provider):
		return c.errAt(file, "model.provider", "model.provider %q is not one of %s", m.Provider, strings.Join(providers, ", "))
	case m.Provider == "static" && c.Plan.RTFS == "" && c.Plan.File == "":
		return c.errAt(file, "model.provider", "provider \"static\" needs [plan].rtfs or [plan].file")
	case c.Plan.RTFS != "" && c.Plan.File != "":
		return c.errAt(file, "plan.file", "[plan] has both rtfs and file; keep one")
	case m.Provider == "script" && m.Script == "":
		return c.errAt(file, "model.provider", "provider \"script\" needs model.script, a JSONL file of answers")
	case m.Provider == "command" && len(m.Command) == 0:
		return c.errAt(file, "model.provider", "provider \"command\" needs model.command, e.g. [\"claude\", \"-p\"]")
	case m.Provider == "openai" && m.Model == "":
		return c.errAt(file, "model.provider", "provider \"openai\" needs model.model, e.g. \"gpt-4o-mini\"")
	case m.MaxRepairs < 0 || m.MaxRepairs > 10:
		return c.errAt(file, "model.max_repairs", "model.max_repairs must be between 0 and 10")
	case m.MaxTokens < 0:
		return c.errAt(file, "model.max_tokens", "model.max_tokens must not be negative")
	}
	if err := c.validateAgent(file); err != nil {
		return err
	}
	if m.BaseURL != "" {
		if u, err := url.Parse(m.BaseURL); err != nil || u.Scheme == "" || u.Host == "" {
			return c.errAt(file, "model.base_url", "model.base_url %q is not an http(s) URL", RedactURL(m.BaseURL))
		}
	}
	return nil
}

// validateRest checks governance globs ([[stop]] tables are checked by
// their kinds' rows: stop.FromConfig).
func (c *Config) validateRest(file string) error {
	for _, g := range append(append(slices.Clone(c.Governance.Allow), c.Governance.Deny...), c.Governance.RequireContracts...) {
		if _, err := filepathMatch(g); err != nil {
			return c.errAt(file, "governance", "bad glob %q in [governance]: %v", g, err)
		}
	}
	return nil
}

// ErrorAt is an error about key, naming the config's file and the line
// that sets key.
func (c *Config) ErrorAt(key, msg string) error {
	return c.errAt(c.displayName(), key, "%s", msg)
}

// displayName is the file as the user named it, or its absolute path.
func (c *Config) displayName() string {
	if c.name != "" {
		return c.name
	}
	return c.File
}

// CheckPaths checks that the files and the directory the config names
// exist, so a run is refused before it starts (and before its store is
// created) with the key's file:line rather than failing half-way.
func (c *Config) CheckPaths() error {
	name := c.displayName()
	for _, k := range c.PathKeys() {
		fi, err := os.Stat(*k.Path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return c.errAt(name, k.Key, "%s %s does not exist; create it or fix the path", k.Key, *k.Path)
		case err != nil:
			return c.errAt(name, k.Key, "%s %s cannot be read (%v); fix the path or its permissions", k.Key, *k.Path, err)
		case k.Dir && !fi.IsDir():
			return c.errAt(name, k.Key, "%s %s is not a directory; fix the path", k.Key, *k.Path)
		case !k.Dir && fi.IsDir():
			return c.errAt(name, k.Key, "%s %s is a directory, not a file; fix the path", k.Key, *k.Path)
		}
	}
	return nil
}

// PathKey is a key of the config that names a file or directory the run
// reads: its key, where its value lives (so a caller may rewrite it, as
// submit does into the run's workspace), and whether it is a directory.
type PathKey struct {
	Key  string
	Path *string
	Dir  bool
}

// PathKeys lists, once, every path the config names that the run will
// read, as set (an empty one is left out): the workdir, the prompt files,
// and the plan file or script its provider reads.
func (c *Config) PathKeys() []PathKey {
	keys := []PathKey{{"loop.workdir", &c.Loop.Workdir, true}, {"intent.prompt_file", &c.Intent.PromptFile, false}}
	if c.Agent != nil {
		keys = append(keys, PathKey{"agent.prompt_file", &c.Agent.PromptFile, false})
	}
	switch c.Model.Provider {
	case "static":
		keys = append(keys, PathKey{"plan.file", &c.Plan.File, false})
	case "script":
		keys = append(keys, PathKey{"model.script", &c.Model.Script, false})
	}
	return slices.DeleteFunc(keys, func(k PathKey) bool { return *k.Path == "" })
}

func filepathMatch(glob string) (bool, error) { return filepath.Match(glob, "") }

// Snapshot renders the config as TOML for the run record. Secrets never
// appear: the API key is read from the environment and is not part of the
// config, and credentials in base_url are redacted.
func (c *Config) Snapshot() string {
	cp := *c
	cp.Model.BaseURL = RedactURL(cp.Model.BaseURL)
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(cp); err != nil {
		return "# snapshot failed: " + err.Error()
	}
	return buf.String()
}

// APIKey reads the model's API key from the environment named by api_key_env.
func (c *Config) APIKey(env Env) string {
	if env == nil {
		env = os.Getenv
	}
	return env(c.Model.APIKeyEnv)
}

package governance

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// Rule ids. Every decision names the rules that produced it.
const (
	RuleKnownCapability   = "gov.known-capability"
	RuleLiteralCapability = "gov.literal-capability"
	RuleAllow             = "gov.allow"
	RuleDeny              = "gov.deny"
	RuleShellAllow        = "gov.shell-allow"
	RuleRequireContracts  = "gov.require-contracts"
	RuleRequireCompensate = "gov.require-compensation"
	RuleContractPurity    = "gov.contract-purity"
	RuleCompiles          = "gov.compiles"
	RuleMaxSteps          = "gov.max-steps"
	RuleArguments         = "gov.arguments"
	RuleAgentAllow        = "gov.agent-allow"
	DefaultMaxSteps       = 1000
)

// Constitution is the [governance] section of the config: the rules every
// plan and every call must pass.
type Constitution struct {
	Allow                         []string // capability id globs; empty allows every registered capability
	Deny                          []string // globs; deny beats allow
	ShellAllow                    []string // commands shell.exec may run
	RequireContracts              []string // capability globs whose steps need :pre or :post
	RequireCompensationForEffects []string // effect kinds whose steps need step.with-compensation
	MaxSteps                      int      // static steps in one plan (loop passes count :max); 0 = DefaultMaxSteps
	AgentAllow                    []string // agent CLIs agent.run may run ([governance].agent_allow)
	AgentCLI                      string   // the CLI an agent.run call without :cli runs ([agent].cli, resolved)
	MaxCostUSD                    float64  // not enforced: max_cost_usd is reserved (docs/config.md); a max_cost stop condition bounds cost
}

// Decision is the outcome of an admission or a per-call check.
type Decision struct {
	Allowed      bool
	RuleIDs      []string // rules that were applied and decided (the failing ones when refused)
	Reasons      []string // one sentence each, with file:line:col where it applies
	Capabilities []string // capability ids the plan requires, sorted
	Effects      []string // effect kinds those capabilities declare, sorted
	Steps        int      // static step count
}

// Err returns nil for an allowed decision, else an error listing the reasons.
func (d *Decision) Err() error {
	if d.Allowed {
		return nil
	}
	return &DeniedError{Decision: d}
}

// DeniedError is a refused decision as an error.
type DeniedError struct{ Decision *Decision }

func (e *DeniedError) Error() string {
	return "governance refused: " + strings.Join(e.Decision.Reasons, "; ")
}

// RTFSType names the error in RTFS catch maps.
func (e *DeniedError) RTFSType() string { return "governance/denied" }

// Kernel applies a constitution to plans and calls.
type Kernel struct {
	c   Constitution
	reg *capability.Registry
	env *rtfs.Env
}

// New returns a kernel enforcing c over the capabilities in reg. env holds
// any extra pure builtins plans may name (nil for the core library).
func New(c Constitution, reg *capability.Registry, env *rtfs.Env) *Kernel {
	if c.MaxSteps <= 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	return &Kernel{c: c, reg: reg, env: env}
}

// Constitution returns the rules in force.
func (k *Kernel) Constitution() Constitution { return k.c }

func matchAny(globs []string, id string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, id); ok || g == id {
			return true
		}
	}
	return false
}

// permitted checks allow/deny for capability c, and that one that runs an
// agent CLI (its spec's AgentCLI) may run one at all.
func (k *Kernel) permitted(c *capability.Capability) (string, string, bool) {
	id := c.Spec.ID
	if matchAny(k.c.Deny, id) {
		return RuleDeny, fmt.Sprintf("capability %s is denied by [governance].deny %v", id, k.c.Deny), false
	}
	if len(k.c.Allow) > 0 && !matchAny(k.c.Allow, id) {
		return RuleAllow, fmt.Sprintf("capability %s is not in [governance].allow %v; add it to allow", id, k.c.Allow), false
	}
	if c.Spec.AgentCLI != nil && len(k.c.AgentAllow) == 0 {
		return RuleAgentAllow, id + " may run no agent CLI: [governance].agent_allow is empty; add an [agent] section with cli = \"claude\" (or list the CLI in agent_allow)", false
	}
	return RuleAllow, "", true
}

// Permits reports whether plans may call capability id at all: it is
// registered, and allow/deny let it through. (shell.exec's commands are
// judged per call.)
func (k *Kernel) Permits(id string) bool {
	c := k.reg.Get(id)
	if c == nil {
		return false
	}
	_, _, ok := k.permitted(c)
	return ok
}

// CheckCall is the run-time check of one call with its shaped input:
// allow/deny and, for a capability that runs a program or an agent CLI
// (its spec's Program, AgentCLI), the shell or agent allowlist.
func (k *Kernel) CheckCall(id string, input rtfs.Value) *Decision {
	d := &Decision{Allowed: true, Capabilities: []string{id}}
	c := k.reg.Get(id)
	if c == nil {
		return refuse(d, RuleKnownCapability, fmt.Sprintf("unknown capability %s", id))
	}
	rule, reason, ok := k.permitted(c)
	d.RuleIDs = append(d.RuleIDs, rule)
	if !ok {
		return refuse(d, rule, reason)
	}
	if c.Spec.Program != nil {
		d.RuleIDs = append(d.RuleIDs, RuleShellAllow)
		if reason := k.shellRefusal(c.Spec.Program(input)); reason != "" {
			return refuse(d, RuleShellAllow, reason)
		}
	}
	if c.Spec.AgentCLI != nil {
		d.RuleIDs = append(d.RuleIDs, RuleAgentAllow)
		if reason := k.agentRefusal(c.Spec, input); reason != "" {
			return refuse(d, RuleAgentAllow, reason)
		}
	}
	return d
}

// agentRefusal says why the agent CLI a call of s runs (its shaped
// input's, by s.AgentCLI, else the configured one) is outside
// [governance].agent_allow, or returns "" when it is allowed.
func (k *Kernel) agentRefusal(s *capability.Spec, input rtfs.Value) string {
	cli := s.AgentCLI(input)
	if cli == "" {
		cli = k.c.AgentCLI
	}
	if cli == "" {
		return s.ID + " names no :cli and no [agent] section sets one; add [agent] with cli = \"claude\" or pass :cli"
	}
	if slices.Contains(k.c.AgentAllow, cli) {
		return ""
	}
	return fmt.Sprintf("agent CLI %q is not in [governance].agent_allow %v; add it there to permit it", cli, k.c.AgentAllow)
}

// shellRefusal says why cmd, the program a call runs (its spec's
// Program), is outside [governance].shell_allow, or returns "" when the
// command is allowed.
func (k *Kernel) shellRefusal(cmd string) string {
	if capability.CommandAllowed(cmd, k.c.ShellAllow) {
		return ""
	}
	return fmt.Sprintf("command %q is not in [governance].shell_allow %v; add it there to permit it", cmd, k.c.ShellAllow)
}

// CheckPlacement is the run-time half of require_contracts and
// require_compensation_for_effects: admission judges a call by where it is
// written, but a function can carry a call elsewhere, so the orchestrator
// also says where the call actually runs — inside a step with a contract,
// inside the primary step of a saga — and this decides.
func (k *Kernel) CheckPlacement(id string, contracted, compensated bool) *Decision {
	d := &Decision{Allowed: true, Capabilities: []string{id}}
	if matchAny(k.c.RequireContracts, id) {
		d.RuleIDs = append(d.RuleIDs, RuleRequireContracts)
		if !contracted {
			refuse(d, RuleRequireContracts, fmt.Sprintf("capability %s ran outside a step with a :pre or :post contract ([governance].require_contracts)", id))
		}
	}
	if c := k.reg.Get(id); c != nil {
		for _, kind := range c.Spec.EffectKinds() {
			if slices.Contains(k.c.RequireCompensationForEffects, kind) {
				d.RuleIDs = append(d.RuleIDs, RuleRequireCompensate)
				if !compensated {
					refuse(d, RuleRequireCompensate, fmt.Sprintf("capability %s has effect :%s and ran outside the primary step of a step.with-compensation ([governance].require_compensation_for_effects)", id, kind))
				}
			}
		}
	}
	return d
}

// refuse marks d refused by rule; the reason names the rule so a user can
// find it in the constitution.
func refuse(d *Decision, rule, reason string) *Decision {
	d.Allowed = false
	if !slices.Contains(d.RuleIDs, rule) {
		d.RuleIDs = append(d.RuleIDs, rule)
	}
	d.Reasons = append(d.Reasons, reason+" (rule "+rule+")")
	return d
}

// Admit decides whether a parsed plan may run. It compiles the plan in plan
// mode (which refuses impure contracts with their position), derives the
// capabilities and effects it requires from the AST, and applies every rule.
// file names the plan in positions.
func (k *Kernel) Admit(file string, forms []*rtfs.Node) *Decision {
	d := &Decision{Allowed: true}
	if _, err := rtfs.Compile(forms, rtfs.Options{File: file, Mode: rtfs.PlanMode, Env: k.env}); err != nil {
		rule := RuleCompiles
		if errors.Is(err, rtfs.ErrPlanFormInPureCode) {
			rule = RuleContractPurity
		}
		refuse(d, rule, err.Error())
	}
	w := &walker{k: k, d: d, file: file}
	for _, f := range forms {
		w.walk(f, nil, false, false)
	}
	slices.Sort(d.Capabilities)
	d.Capabilities = slices.Compact(d.Capabilities)
	slices.Sort(d.Effects)
	d.Effects = slices.Compact(d.Effects)
	if w.steps > k.c.MaxSteps {
		refuse(d, RuleMaxSteps, fmt.Sprintf("plan has %d steps, over the limit of %d", w.steps, k.c.MaxSteps))
	}
	d.Steps = w.steps
	for _, r := range []string{RuleKnownCapability, RuleAllow, RuleShellAllow, RuleRequireContracts, RuleRequireCompensate, RuleContractPurity, RuleMaxSteps} {
		if !slices.Contains(d.RuleIDs, r) && d.Allowed {
			d.RuleIDs = append(d.RuleIDs, r)
		}
	}
	return d
}

type walker struct {
	k     *Kernel
	d     *Decision
	file  string
	steps int
}

func (w *walker) at(n *rtfs.Node) string {
	return fmt.Sprintf("%s:%d:%d", w.file, n.Pos.Line, n.Pos.Col)
}

// walk visits n; step is the innermost enclosing step node and
// compensated says whether that step is the primary of a saga. primary is
// true only for the first step of a step.with-compensation form.
func (w *walker) walk(n *rtfs.Node, step *rtfs.Node, compensated, primary bool) {
	if n == nil || n.Kind == rtfs.NodeQuote { // quoted forms are data: they never run
		return
	}
	switch n.Head() {
	case "quote":
		return
	case rtfs.FormStep:
		w.steps++
		step, compensated = n, primary
	case rtfs.FormStepLoop:
		w.steps++
		if len(n.Items) > 2 {
			if mx := n.Items[2].Value().AsMap().GetKey("max"); mx.Kind() == rtfs.KindInt {
				w.steps += int(mx.AsInt())
			}
		}
		step, compensated = n, false
	case rtfs.FormWithCompensation:
		if len(n.Items) == 3 {
			w.walk(n.Items[1], step, compensated, true)
			w.walk(n.Items[2], step, compensated, false)
			return
		}
	case "call":
		w.call(n, step, compensated)
	}
	if n.Meta != nil {
		w.walk(n.Meta, step, compensated, false)
	}
	for _, it := range n.Items {
		w.walk(it, step, compensated, false)
	}
}

func (w *walker) call(n, step *rtfs.Node, compensated bool) {
	d := w.d
	id := rtfs.CapabilityID(n)
	if id == "" {
		refuse(d, RuleLiteralCapability, fmt.Sprintf("%s: call needs a literal capability id such as :ccos.echo", w.at(n)))
		return
	}
	c := w.k.reg.Get(id)
	if c == nil {
		refuse(d, RuleKnownCapability, fmt.Sprintf("%s: unknown capability :%s; use one of %s", w.at(n), id, strings.Join(w.ids(), " ")))
		return
	}
	d.Capabilities = append(d.Capabilities, id)
	d.Effects = append(d.Effects, c.Spec.EffectKinds()...)
	if rule, reason, ok := w.k.permitted(c); !ok {
		refuse(d, rule, w.at(n)+": "+reason)
	}
	// Literal arguments are checked now; others when the call runs.
	args := n.Items[2:]
	literal := true
	for _, a := range args {
		if !a.IsLiteral() {
			literal = false
		}
	}
	if literal {
		vals := make([]rtfs.Value, len(args))
		for i, a := range args {
			vals[i] = a.Value()
		}
		input, err := c.Spec.InputFrom(vals)
		if err != nil {
			refuse(d, RuleArguments, fmt.Sprintf("%s: %v", w.at(n), err))
		} else if c.Spec.Program != nil {
			if reason := w.k.shellRefusal(c.Spec.Program(input)); reason != "" {
				refuse(d, RuleShellAllow, w.at(n)+": "+reason)
			}
		} else if c.Spec.AgentCLI != nil {
			if reason := w.k.agentRefusal(c.Spec, input); reason != "" {
				refuse(d, RuleAgentAllow, w.at(n)+": "+reason)
			}
		}
	}
	if matchAny(w.k.c.RequireContracts, id) {
		meta := (*rtfs.Node)(nil)
		if step != nil {
			meta = rtfs.StepMeta(step)
		}
		if !hasKey(meta, "pre") && !hasKey(meta, "post") {
			refuse(d, RuleRequireContracts, fmt.Sprintf("%s: capability %s must run inside a step with a :pre or :post contract ([governance].require_contracts)", w.at(n), id))
		}
	}
	for _, kind := range c.Spec.EffectKinds() {
		if slices.Contains(w.k.c.RequireCompensationForEffects, kind) && !compensated {
			refuse(d, RuleRequireCompensate, fmt.Sprintf("%s: capability %s has effect :%s and must be the primary of a step.with-compensation ([governance].require_compensation_for_effects)", w.at(n), id, kind))
		}
	}
}

func (w *walker) ids() []string {
	var out []string
	for _, s := range w.k.reg.Specs() {
		out = append(out, ":"+s.ID)
	}
	return out
}

func hasKey(meta *rtfs.Node, key string) bool {
	if meta == nil {
		return false
	}
	for i := 0; i+1 < len(meta.Items); i += 2 {
		if k := meta.Items[i]; k.Kind == rtfs.NodeAtom && k.Val.Kind() == rtfs.KindKeyword && k.Val.Str() == key {
			v := meta.Items[i+1] // ^{:pre nil} or ^{:pre false} is no contract
			return v.Kind != rtfs.NodeAtom || v.Val.Truthy()
		}
	}
	return false
}

// ErrRefused is matched by errors.Is for any refused decision.
var ErrRefused = errors.New("governance refused")

// Is makes errors.Is(err, ErrRefused) true for DeniedError.
func (e *DeniedError) Is(target error) bool { return target == ErrRefused }

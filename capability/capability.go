package capability

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/rtfs"
)

// Risk is a capability's declared risk tier. It is declared by the spec,
// never guessed from the capability's name.
type Risk string

// Risk tiers, lowest first.
const (
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium"
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

// Effect is one declared effect: a kind (:network, :fs, :process, :llm,
// :kv) and its parameters, written [:fs {:write true}] in RTFS.
type Effect struct {
	Kind   string
	Params *rtfs.Map
}

// Value renders the effect as RTFS data.
func (e Effect) Value() rtfs.Value {
	if e.Params == nil || e.Params.Len() == 0 {
		return rtfs.Vector([]rtfs.Value{rtfs.Keyword(e.Kind)})
	}
	return rtfs.Vector([]rtfs.Value{rtfs.Keyword(e.Kind), rtfs.MapValue(e.Params)})
}

// Spec describes a capability: what it takes, returns and touches, and
// every fact other packages ask of it (DESIGN §21), so that no code
// outside its owner compares its id.
type Spec struct {
	ID          string // e.g. "shell.exec", without the colon
	Version     string
	Description string
	Input       *rtfs.Type
	Output      *rtfs.Type
	Effects     []Effect
	Risk        Risk
	Examples    []string // RTFS call forms, e.g. (call :ccos.echo {:message "hi"})

	// The fields below are what the rest of ralph asks of a capability.
	// They are not part of its attestation (Value), which predates them.

	// Program, when set, is the program a call runs, read from its shaped
	// input: governance holds it to [governance].shell_allow when a plan
	// is admitted (literal arguments) and before each call, and the
	// prompt lists the commands allowed beside the capability.
	Program func(input rtfs.Value) string
	// AgentCLI, when set, is the agent CLI a call runs, read from its
	// shaped input ("" when the call names none: the configured one):
	// governance holds it to [governance].agent_allow, and refuses the
	// capability altogether while agent_allow is empty.
	AgentCLI func(input rtfs.Value) string
	// EchoesStored: its result only echoes text already stored (a file, a
	// kv value), so an output_pattern stop condition does not take it for
	// output the run produced.
	EchoesStored bool
	// StoresResult: a successful call stores its result in the kv under
	// its input's :key, so the kv can be rebuilt from the chain alone
	// (loop.RebuildKV).
	StoresResult bool
	// Printout: a call prints what an agent says and does, live
	// (Reporter.Stream) and into the output file it records (metadata
	// output_file and cli), which a view of a recorded run shows again.
	Printout bool
	// Reports are the metadata keys its calls record (Result.Metadata),
	// which displays and ledger.ReportedFailure read off the chain.
	Reports []string
}

// Value renders the spec as an RTFS map; its canonical text is what the
// attestation id hashes.
func (s *Spec) Value() rtfs.Value {
	effects := make([]rtfs.Value, len(s.Effects))
	for i, e := range s.Effects {
		effects[i] = e.Value()
	}
	examples := make([]rtfs.Value, len(s.Examples))
	for i, e := range s.Examples {
		examples[i] = rtfs.String(e)
	}
	return rtfs.MapValue(rtfs.NewMap(
		rtfs.Keyword("id"), rtfs.Keyword(s.ID),
		rtfs.Keyword("version"), rtfs.String(s.Version),
		rtfs.Keyword("description"), rtfs.String(s.Description),
		rtfs.Keyword("input"), typeValue(s.Input),
		rtfs.Keyword("output"), typeValue(s.Output),
		rtfs.Keyword("effects"), rtfs.Vector(effects),
		rtfs.Keyword("risk"), rtfs.Keyword(string(s.Risk)),
		rtfs.Keyword("examples"), rtfs.Vector(examples),
	))
}

func typeValue(t *rtfs.Type) rtfs.Value {
	if t == nil {
		return rtfs.Keyword("any")
	}
	return t.Value()
}

// Attestation is the SHA-256 (hex) of the spec's canonical text: a change
// to anything the spec promises changes it.
func (s *Spec) Attestation() string {
	sum := sha256.Sum256([]byte(rtfs.Print(s.Value())))
	return hex.EncodeToString(sum[:])
}

// EffectKinds lists the distinct effect kinds the spec declares.
func (s *Spec) EffectKinds() []string {
	var out []string
	for _, e := range s.Effects {
		if !slices.Contains(out, e.Kind) {
			out = append(out, e.Kind)
		}
	}
	return out
}

// Result is what a handler returns: the value, string metadata for the
// ledger (shell.exec records "exit" and "cmd"), and a cost in USD.
type Result struct {
	Value    rtfs.Value
	Metadata map[string]string
	Cost     float64
}

// Handler runs a capability on validated input.
type Handler func(ctx context.Context, input rtfs.Value) (Result, error)

// Capability pairs a spec with its implementation.
type Capability struct {
	Spec    *Spec
	Handler Handler
}

// Registry holds capabilities by id. It is filled before use and then
// read concurrently.
type Registry struct {
	caps map[string]*Capability
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{caps: map[string]*Capability{}} }

// Register adds a capability; ids are unique.
func (r *Registry) Register(c *Capability) error {
	switch {
	case c == nil || c.Spec == nil || c.Handler == nil:
		return errors.New("register capability: spec and handler are required")
	case c.Spec.ID == "" || strings.HasPrefix(c.Spec.ID, ":"):
		return fmt.Errorf("register capability %q: id must be non-empty, without a colon", c.Spec.ID)
	case r.caps[c.Spec.ID] != nil:
		return fmt.Errorf("register capability %s: already registered", c.Spec.ID)
	}
	r.caps[c.Spec.ID] = c
	return nil
}

// Get returns the capability with id, or nil.
func (r *Registry) Get(id string) *Capability { return r.caps[strings.TrimPrefix(id, ":")] }

// Specs returns every spec, sorted by id.
func (r *Registry) Specs() []*Spec {
	out := make([]*Spec, 0, len(r.caps))
	for _, c := range r.caps {
		out = append(out, c.Spec)
	}
	slices.SortFunc(out, func(a, b *Spec) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// InputFrom shapes call arguments for the spec and validates them:
// (call :x {:k v}) passes the map; positional arguments become a map in
// field order when the schema is a [:map …], a vector for [:tuple …], and
// the single argument otherwise. The error names the exact path.
func (s *Spec) InputFrom(args []rtfs.Value) (rtfs.Value, error) {
	in := s.Input
	var v rtfs.Value
	switch {
	case in != nil && in.IsMap():
		if len(args) == 1 && args[0].Kind() == rtfs.KindMap {
			v = args[0]
			break
		}
		keys := in.FieldKeys()
		if len(args) > len(keys) {
			return rtfs.Nil, fmt.Errorf("%s takes at most %d positional arguments (%s), got %d", s.ID, len(keys), rtfs.Print(rtfs.Vector(keys)), len(args))
		}
		b := rtfs.NewMapBuilder(len(args))
		for i, a := range args {
			b.Set(keys[i], a)
		}
		v = rtfs.MapValue(b.Map())
	case len(args) == 1 && (in == nil || in.Kind() != "tuple"):
		v = args[0]
	default:
		v = rtfs.Vector(slices.Clone(args))
	}
	if in != nil {
		if err := in.Check(v); err != nil {
			return rtfs.Nil, fmt.Errorf("%s: %w", s.ID, err)
		}
	}
	return v, nil
}

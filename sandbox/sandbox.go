// Package sandbox confines every process ralph starts for a run (agent
// calls, shell.exec, command stop conditions and providers, hooks, notify
// commands) to what the run's [sandbox] allows: the workdir and a private
// TMPDIR to write, the system and the toolchains to read, nothing of
// ralph's store, keys or the user's secrets to see, and only the model's
// hosts to reach, through a proxy of the run's own (DESIGN §22).
//
// A run builds one *Sandbox (New) and puts it on its context (With);
// every process is started through Start or RunContained, which apply it.
// A nil *Sandbox is "off": the process starts as it did before there was a
// sandbox, contained by internal/procgroup alone.
package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// Mode is [sandbox] mode (or --sandbox): how processes are confined.
type Mode string

const (
	Off      Mode = "off"      // not confined (containment only)
	Auto     Mode = "auto"     // the strongest mechanism the machine has
	Landlock Mode = "landlock" // the kernel's Landlock LSM, applied in the child
	Bwrap    Mode = "bwrap"    // bubblewrap's namespaces, with Landlock's TCP rule
)

// Network is [sandbox] network: what the processes may reach.
type Network string

const (
	NetModel Network = "model" // the CLI's hosts, base_url's and [sandbox] hosts, through the proxy
	NetNone  Network = "none"  // nothing
	NetAll   Network = "all"   // anything (files are still confined)
)

// Spec is a run's [sandbox] as configured (after --sandbox).
type Spec struct {
	Mode    Mode
	Network Network  // "" is NetModel
	Read    []string // more read-only paths
	Write   []string // more read-write paths (each must exist and not hold the store)
	Hide    []string // more paths never visible
	Hosts   []string // more hosts the proxy allows
}

// Bounds is what the run itself adds to a Spec.
type Bounds struct {
	Workdir   string   // read-write: the workdir or the run's worktree
	Hidden    []string // never visible: the store, ralph's keys and witness
	StateDirs []string // read-write: the agent CLI's own state (its descriptor's)
	Hosts     []string // reachable: the CLI's API hosts and base_url's host
	CacheRoot string   // per-project GOCACHE, GOMODCACHE and npm cache live under it
}

// Denial is one thing the sandbox refused that ralph saw.
type Denial struct {
	What  string // "connect api.example.com:443", "read /root/.ssh/id_ed25519"
	Allow string // the [sandbox] line that would allow it: `hosts = ["api.example.com"]`
}

// Sandbox is a run's resolved sandbox: the mechanism chosen and its proxy.
type Sandbox struct {
	spec      Spec
	bounds    Bounds
	mechanism string
	onDenied  func(Denial)
}

// Mechanism names what confines the processes ("bwrap+landlock",
// "landlock", "bwrap"; "off" for a nil Sandbox), as RunStarted's
// :sandbox records it.
func (s *Sandbox) Mechanism() string {
	if s == nil {
		return string(Off)
	}
	return s.mechanism
}

type ctxKey struct{}

// With returns ctx carrying s: the processes started with it are confined
// by s.
func With(ctx context.Context, s *Sandbox) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// From is the Sandbox ctx carries (nil: off).
func From(ctx context.Context) *Sandbox {
	s, _ := ctx.Value(ctxKey{}).(*Sandbox)
	return s
}

// Start starts cmd as procgroup.Start does, confined by the Sandbox ctx
// carries.
func Start(ctx context.Context, cmd *exec.Cmd, o procgroup.StartOptions) (*procgroup.Proc, error) {
	return procgroup.Start(cmd, o)
}

// RunContained runs cmd as procgroup.RunContained does, confined by the
// Sandbox ctx carries.
func RunContained(ctx context.Context, cmd *exec.Cmd, waitDelay time.Duration, o procgroup.StartOptions) (string, error) {
	return procgroup.RunContained(cmd, waitDelay, o)
}

// ParseMode reads a mode as [sandbox] mode or --sandbox gives it.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Auto, Landlock, Bwrap:
		return m, nil
	}
	return "", fmt.Errorf("sandbox mode %q is not one of auto, landlock, bwrap or off", s)
}

// New resolves spec on this machine with the run's bounds: it picks the
// mechanism (auto: the strongest there is), starts the run's proxy, and
// returns the Sandbox to put on the run's context. A mode the machine
// cannot give is an error saying how to fix it. onDenied is called for
// each refusal ralph sees (a host the proxy refused, …); it may be nil.
// Mode off gives a nil Sandbox.
func New(spec Spec, b Bounds, onDenied func(Denial)) (*Sandbox, error) {
	if spec.Mode == Off || spec.Mode == "" {
		return nil, nil
	}
	return nil, fmt.Errorf("sandbox mode %s is not built yet", spec.Mode)
}

// Close stops the run's proxy and removes what the sandbox made for the
// run. A nil Sandbox closes at once.
func (s *Sandbox) Close() error { return nil }

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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	// StateFiles are the files among StateDirs, each with the document a
	// missing one is made with (the others are made as directories).
	StateFiles map[string]string
	Hosts      []string // reachable: the CLI's API hosts and base_url's host
	CacheRoot  string   // per-project GOCACHE, GOMODCACHE and npm cache live under it
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

	mech    *mechanism
	abi     int    // the kernel's Landlock ABI (0: none)
	view    view   // what every call sees (a call adds its TMPDIR)
	tmpRoot string // the calls' TMPDIRs, and the caches without a CacheRoot
	caches  caches
	proxy   *proxy // nil unless network is "model"
}

// caches are the per-project caches a confined process writes.
type caches struct{ goBuild, goMod, npm string }

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
// carries (none: as procgroup.Start alone). The call's TMPDIR is removed
// once the command has ended.
func Start(ctx context.Context, cmd *exec.Cmd, o procgroup.StartOptions) (*procgroup.Proc, error) {
	s := From(ctx)
	if s == nil {
		return procgroup.Start(cmd, o)
	}
	cleanup, err := s.prepare(cmd, &o)
	if err != nil {
		return nil, err
	}
	p, err := procgroup.Start(cmd, o)
	if err != nil {
		cleanup()
		return nil, err
	}
	go func() { // ends with the command
		<-p.Done()
		cleanup()
	}()
	return p, nil
}

// RunContained runs cmd as procgroup.RunContained does, confined by the
// Sandbox ctx carries (none: as procgroup.RunContained alone).
func RunContained(ctx context.Context, cmd *exec.Cmd, waitDelay time.Duration, o procgroup.StartOptions) (string, error) {
	s := From(ctx)
	if s == nil {
		return procgroup.RunContained(cmd, waitDelay, o)
	}
	cleanup, err := s.prepare(cmd, &o)
	if err != nil {
		return "", err
	}
	defer cleanup()
	return procgroup.RunContained(cmd, waitDelay, o)
}

// ParseMode reads a mode as [sandbox] mode or --sandbox gives it.
func ParseMode(s string) (Mode, error) {
	if row, ok := lookupMode(Mode(s)); ok {
		return row.mode, nil
	}
	return "", fmt.Errorf("sandbox mode %q is not one of %s", s, modeNames())
}

// ParseNetwork reads [sandbox] network ("" is "model").
func ParseNetwork(s string) (Network, error) {
	switch n := Network(s); n {
	case "", NetModel:
		return NetModel, nil
	case NetNone, NetAll:
		return n, nil
	}
	return "", fmt.Errorf("sandbox network %q is not one of model, none or all", s)
}

// New resolves spec on this machine with the run's bounds: it picks the
// mechanism (auto: the strongest there is), starts the run's proxy, and
// returns the Sandbox to put on the run's context. A mode the machine
// cannot give is an error saying how to fix it, and so is a path to hide
// that the mechanism cannot hide. onDenied is called for each refusal
// ralph sees (a host the proxy refused, …), from any goroutine; it may be
// nil. Mode off gives a nil Sandbox.
func New(spec Spec, b Bounds, onDenied func(Denial)) (*Sandbox, error) {
	if spec.Mode == "" {
		spec.Mode = Off
	}
	row, ok := lookupMode(spec.Mode)
	if !ok {
		return nil, fmt.Errorf("sandbox mode %q is not one of %s", spec.Mode, modeNames())
	}
	if row.mechs == nil {
		return nil, nil
	}
	net, err := ParseNetwork(string(spec.Network))
	if err != nil {
		return nil, err
	}
	spec.Network = net
	if b.Workdir == "" {
		return nil, fmt.Errorf("sandbox: the run has no workdir to confine its processes to")
	}
	mech, err := choose(row, spec.Network)
	if err != nil {
		return nil, err
	}
	return newWith(spec, b, onDenied, mech)
}

// newWith is New with the mechanism chosen.
func newWith(spec Spec, b Bounds, onDenied func(Denial), mech *mechanism) (*Sandbox, error) {
	s := &Sandbox{spec: spec, bounds: b, mechanism: mech.name, onDenied: onDenied, mech: mech, abi: landlockABI()}
	if err := s.setup(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// setup makes what the run's calls share: the temp root, the caches,
// the view, the proxy.
func (s *Sandbox) setup() error {
	root, err := os.MkdirTemp("", "ralph-sandbox-")
	if err != nil {
		return fmt.Errorf("sandbox: make the run's temp root: %w", err)
	}
	s.tmpRoot = root
	if err := s.makeCaches(); err != nil {
		return err
	}
	if err := s.makeView(); err != nil {
		return err
	}
	if s.spec.Network != NetModel {
		return nil
	}
	var hosts []hostRule
	for _, h := range append(append([]string(nil), s.bounds.Hosts...), s.spec.Hosts...) {
		r, err := parseHost(h)
		if err != nil {
			return err
		}
		hosts = append(hosts, r)
	}
	s.proxy, err = newProxy(hosts, s.onDenied)
	return err
}

func (s *Sandbox) makeCaches() error {
	base := s.bounds.CacheRoot
	if base == "" {
		base = filepath.Join(s.tmpRoot, "cache")
	}
	s.caches = caches{goBuild: filepath.Join(base, "go-build"), goMod: filepath.Join(base, "go-mod"), npm: filepath.Join(base, "npm")}
	for _, d := range []string{s.caches.goBuild, s.caches.goMod, s.caches.npm} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: make the cache %s: %w", d, err)
		}
	}
	return nil
}

// makeView lists what every call may see, and checks the hidden paths
// against it.
func (s *Sandbox) makeView() error {
	v := &s.view
	for _, p := range systemPaths {
		v.add(p, readExec)
	}
	for _, p := range toolchains() {
		v.add(p, readExec)
	}
	for _, p := range devicePaths {
		v.add(p, device)
	}
	if err := v.mustAdd(s.bounds.Workdir, readWrite, "the workdir", "the run needs one to confine to"); err != nil {
		return err
	}
	for _, d := range s.bounds.StateDirs {
		if err := makeState(d, s.bounds.StateFiles); err != nil {
			return err
		}
		v.add(d, readWrite)
	}
	v.add(filepath.Dir(s.caches.goBuild), readWrite)
	for _, p := range s.spec.Read {
		if err := v.mustAdd(p, readExec, "the read path", "create it or remove it from [sandbox] read"); err != nil {
			return err
		}
	}
	for _, p := range s.spec.Write {
		if err := v.mustAdd(p, readWrite, "the write path", "create it or remove it from [sandbox] write"); err != nil {
			return err
		}
	}
	for _, h := range s.hiddenPaths() {
		v.hide(h)
	}
	if err := checkWrite(s.spec.Write, v.hidden); err != nil {
		return err
	}
	return v.conflicts(s.mech.hidesInside, s.mech.name)
}

// makeState makes a missing state path of the agent's: a file holding
// its document when files names it (a directory there would break the
// CLI: Claude Code fails to save ~/.claude.json and retries for seconds),
// else a directory. An existing one is left as it is.
func makeState(p string, files map[string]string) error {
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		return nil
	}
	doc, isFile := files[p]
	if !isFile {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("sandbox: make the agent's state directory %s: %w", p, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("sandbox: make the directory of the agent's state file %s: %w", p, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox: make the agent's state file %s: %w", p, err)
	}
	_, err = f.WriteString(doc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sandbox: write the agent's state file %s: %w", p, err)
	}
	return nil
}

// checkWrite refuses a [sandbox] write path that holds a hidden one,
// under every mechanism (bwrap could mount over it, but a path the user
// names to write must not be one that holds ralph's store).
func checkWrite(write, hidden []string) error {
	for _, w := range write {
		rw := resolve(w)
		for _, h := range hidden {
			if within(h, rw) {
				return fmt.Errorf("sandbox: the write path %s holds %s, which must stay hidden; name a path beside it in [sandbox] write", w, h)
			}
		}
	}
	return nil
}

// hiddenPaths are the run's (its store, keys, witness), the user's
// secrets in their home, and [sandbox] hide.
func (s *Sandbox) hiddenPaths() []string {
	out := append(append([]string(nil), s.bounds.Hidden...), s.spec.Hide...)
	if home, err := os.UserHomeDir(); err == nil {
		for _, h := range homeSecrets {
			out = append(out, filepath.Join(home, h))
		}
	}
	return out
}

// ruleset is the Landlock domain of a call: the files when fs (Landlock
// alone), TCP to the proxy alone unless network is "all".
func (s *Sandbox) ruleset(fs bool) ruleset {
	r := ruleset{abi: s.abi, fs: fs, tcp: s.spec.Network != NetAll}
	if s.proxy != nil {
		r.ports = []uint16{s.proxy.Port()}
	}
	return r
}

// Hides reports whether path is invisible to the processes s confines:
// outside every tree they may see, or hidden (Bounds.Hidden,
// Spec.Hide) under a mechanism that mounts over a path inside an
// allowed tree (bwrap). Wiring uses it to allow a --store inside the
// workdir. A nil Sandbox hides nothing.
func (s *Sandbox) Hides(path string) bool {
	if s == nil {
		return false
	}
	p := resolve(path)
	if !s.view.visible(p) {
		return true
	}
	if !s.mech.hidesInside {
		return false
	}
	for _, h := range s.view.hidden {
		if within(p, h) {
			return true
		}
	}
	return false
}

// ProxyAddr is the run's proxy's host:port ("" without one: network
// "none" or "all", or a nil Sandbox).
func (s *Sandbox) ProxyAddr() string {
	if s == nil || s.proxy == nil {
		return ""
	}
	return s.proxy.Addr()
}

// Close stops the run's proxy and removes what the sandbox made for the
// run (the calls' temp root). A nil Sandbox closes at once.
func (s *Sandbox) Close() error {
	if s == nil {
		return nil
	}
	var err error
	if s.proxy != nil {
		err = s.proxy.Close()
	}
	if s.tmpRoot != "" {
		removeTree(s.tmpRoot)
		if _, serr := os.Stat(s.tmpRoot); serr == nil {
			err = errors.Join(err, fmt.Errorf("sandbox: could not remove %s", s.tmpRoot))
		}
	}
	return err
}

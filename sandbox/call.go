package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// call is one command being confined and the view it gets: the run's,
// with the call's TMPDIR and the command's own program added.
type call struct {
	cmd     *exec.Cmd
	view    view
	confine func() error // set by the mechanism (Landlock on the forking thread)
}

// prepare confines cmd (and o's Confine) for one call under s; cleanup
// removes the call's TMPDIR once the command has ended.
func (s *Sandbox) prepare(cmd *exec.Cmd, o *procgroup.StartOptions) (cleanup func(), err error) {
	if cmd.Err != nil {
		return func() {}, nil // cmd.Start reports it; nothing runs
	}
	tmp, err := os.MkdirTemp(s.tmpRoot, "call-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: make the call's TMPDIR: %w", err)
	}
	cleanup = func() { removeTree(tmp) }
	c := &call{cmd: cmd, view: s.view}
	c.view.rules = append(append([]rule(nil), s.view.rules...), rule{path: resolve(tmp), access: readWrite})
	if err := c.addProgram(programPath(cmd), s.mech); err != nil {
		cleanup()
		return nil, err
	}
	cmd.Env = s.environ(cmd.Environ(), tmp)
	if err := s.mech.apply(s, c); err != nil {
		cleanup()
		return nil, err
	}
	if c.confine != nil {
		o.Confine = chain(o.Confine, c.confine)
	}
	return cleanup, nil
}

// addProgram makes the command's program visible, read-only, where the
// view does not show it already: each link from prog to the file, and,
// for a program in a node_modules tree (a CLI npm installed: bin/codex ->
// ../lib/node_modules/@openai/codex/bin/codex.js), that whole tree, which
// the program loads its own files and its dependencies from (codex.js
// starts the native codex of @openai/codex-linux-x64 beside it). A
// program or tree inside a hidden path is refused, never shown.
func (c *call) addProgram(prog string, m *mechanism) error {
	real := resolve(prog)
	trees := []string{prog}
	if root := nodeModulesRoot(real); root != "" {
		trees = append(trees, root)
	}
	for _, t := range trees {
		if c.view.visible(resolve(t)) {
			continue
		}
		for _, h := range c.view.hidden {
			if within(resolve(t), h) {
				return fmt.Errorf("sandbox: the program %s lies inside %s, which must stay hidden; install it elsewhere", prog, h)
			}
			if within(h, resolve(t)) && !m.hidesInside {
				return fmt.Errorf("sandbox: the program %s lies in %s, which holds %s, which must stay hidden and %s cannot hide inside what it shows; install the program elsewhere", prog, t, h, m.name)
			}
		}
		c.view.add(t, readExec)
	}
	return nil
}

// nodeModulesRoot is the outermost node_modules directory path lies in
// ("" when none): an npm install's tree, which node resolves the
// package's dependencies in.
func nodeModulesRoot(path string) string {
	root := ""
	for p := filepath.Dir(path); p != filepath.Dir(p); p = filepath.Dir(p) {
		if filepath.Base(p) == "node_modules" {
			root = p
		}
	}
	return root
}

// programPath is the command's program as an absolute path: a relative
// Path is evaluated relative to Dir, as os/exec does.
func programPath(cmd *exec.Cmd) string {
	if filepath.IsAbs(cmd.Path) || cmd.Dir == "" {
		return cmd.Path
	}
	return filepath.Join(cmd.Dir, cmd.Path)
}

// chain runs the caller's Confine, then the sandbox's.
func chain(first, then func() error) func() error {
	if first == nil {
		return then
	}
	return func() error {
		if err := first(); err != nil {
			return err
		}
		return then()
	}
}

// removeTree removes dir and everything in it, also what a command made
// read-only (Go's module cache, a chmod 000 directory).
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700) // best effort: RemoveAll below says what is left
		}
		return nil
	})
	// What still cannot be removed stays under the run's temp root,
	// which Close removes; nothing outside it is touched.
	_ = os.RemoveAll(dir)
}

// applyLandlock confines c with one Landlock domain on the forking
// thread: the view's files, TCP to the proxy alone, the scopes.
func applyLandlock(s *Sandbox, c *call) error {
	r := s.ruleset(true)
	r.rules = c.view.sorted()
	c.confine = r.confine
	return nil
}

// applyBwrap makes c's command bwrap's, which binds the view and runs
// the command; Landlock's TCP rule and scopes (no filesystem rights, so
// that bwrap can still mount) confine bwrap and all below it.
func applyBwrap(s *Sandbox, c *call) error {
	bin, err := bwrapProbe()
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	dir := c.cmd.Dir
	if dir == "" {
		dir = s.bounds.Workdir
	}
	args := append([]string{"bwrap"}, bwrapBase()...)
	if s.spec.Network == NetNone && !s.mech.confinesTCP {
		args = append(args, "--unshare-net")
	}
	args = append(args, bwrapView(c.view)...)
	args = append(args, "--chdir", resolve(dir), "--", programPath(c.cmd))
	if len(c.cmd.Args) > 1 {
		args = append(args, c.cmd.Args[1:]...)
	}
	c.cmd.Args = args
	c.cmd.Path = bin
	if s.mech.confinesTCP {
		r := s.ruleset(false)
		c.confine = r.confine
	}
	return nil
}

// bwrapBase are the namespaces and ties every bwrap call uses (the
// probe starts bwrap with them too).
func bwrapBase() []string {
	return []string{"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"}
}

// bwrapView binds the view: each allowed tree at its own path (never
// all of /), a new /proc and /dev, and a tmpfs or /dev/null over each
// hidden path that lies inside an allowed tree.
func bwrapView(v view) []string {
	args := []string{"--proc", "/proc", "--dev", "/dev"}
	for _, r := range v.sorted() {
		switch {
		case r.link != "":
			args = append(args, "--symlink", r.link, r.path)
		case r.path == "/proc" || strings.HasPrefix(r.path, "/dev/") || r.path == "/dev":
			// --proc and --dev made them, for this pid namespace
		case r.access == readExec:
			args = append(args, "--ro-bind", r.path, r.path)
		default:
			args = append(args, "--bind", r.path, r.path)
		}
	}
	for _, h := range v.hiddenInside() {
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			args = append(args, "--tmpfs", h)
		} else {
			args = append(args, "--ro-bind", "/dev/null", h)
		}
	}
	return args
}

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// access is what a path of the view allows.
type access int

const (
	readExec  access = iota // read files and directories, execute
	readWrite               // everything below it
	device                  // a device or a directory of them: read, write, ioctl
)

// rule is one path of the view: an existing path, absolute and with its
// symlinks resolved, unless link is set (then path is the symlink itself,
// which bwrap recreates and Landlock follows).
type rule struct {
	path   string
	access access
	link   string // the symlink's target, as it reads
}

// view is what a confined command can see: the same allow-list for both
// mechanisms, and the paths it must never see.
type view struct {
	rules  []rule
	hidden []string // absolute, cleaned; symlinks resolved where they exist
}

// systemPaths are the trees every program needs to read and run, and
// what /etc's resolver configuration links to (/run/systemd/resolve/…).
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys", "/etc/resolv.conf"}

// devicePaths are the devices a program may open read-write.
var devicePaths = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// homeSecrets are never visible, whatever else is allowed.
var homeSecrets = []string{".ssh", ".aws", ".gnupg", ".netrc", ".docker", ".kube", ".config/gh"}

// toolchains are the trees of the toolchains tests need (GOROOT, node's
// prefix), found once per process.
var toolchains = sync.OnceValue(func() []string {
	var dirs []string
	if goBin, err := exec.LookPath("go"); err == nil {
		if out, err := exec.Command(goBin, "env", "GOROOT").Output(); err == nil {
			if root := strings.TrimSpace(string(out)); root != "" {
				dirs = append(dirs, root)
			}
		}
	}
	if node, err := exec.LookPath("node"); err == nil {
		if real, err := filepath.EvalSymlinks(node); err == nil {
			dirs = append(dirs, filepath.Dir(filepath.Dir(real)))
		}
	}
	return dirs
})

// resolve makes p absolute and resolves its symlinks where it exists.
func resolve(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// maxLinks bounds the symlinks add follows from one path (the kernel's
// own limit is 40).
const maxLinks = 40

// add puts p in the view with a; a path that does not exist is skipped
// (system trees and devices vary between machines), a symlink is kept
// as one (bwrap recreates it) and what it points to added too, one link
// at a time, so that each link of a chain (a CLI's bin/codex ->
// ../lib/node_modules/…) is there inside.
func (v *view) add(p string, a access) {
	v.addLink(p, a, 0)
}

func (v *view) addLink(p string, a access, depth int) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(abs)
		if err != nil || depth >= maxLinks {
			return
		}
		if resolve(abs) == abs { // a dangling link
			return
		}
		v.rules = append(v.rules, rule{path: abs, access: a, link: target})
		next := target
		if !filepath.IsAbs(next) {
			next = filepath.Join(resolve(filepath.Dir(abs)), next) // as the kernel reads it: from the link's real directory
		}
		v.addLink(next, a, depth+1)
		return
	}
	v.rules = append(v.rules, rule{path: resolve(abs), access: a})
}

// mustAdd is add for a path the user or the run named: it must exist.
func (v *view) mustAdd(p string, a access, what, fix string) error {
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("sandbox: %s %s does not exist (%v); %s", what, p, err, fix)
	}
	v.add(p, a)
	return nil
}

// hides puts p among the paths never visible.
func (v *view) hide(p string) {
	if p != "" {
		v.hidden = append(v.hidden, resolve(p))
	}
}

// sorted orders the rules so that a tree comes before what lies inside
// it (bwrap mounts in that order) and drops what a tree already allows
// the same way (/usr/bin under /usr: one mount, not two).
func (v *view) sorted() []rule {
	rs := append([]rule(nil), v.rules...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].path < rs[j].path })
	var out []rule
	for _, r := range rs {
		if !covered(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// covered reports whether a rule of kept already gives r.
func covered(kept []rule, r rule) bool {
	for _, k := range kept {
		inTree := k.link == "" && within(r.path, k.path)
		if k == r || (inTree && (r.link != "" || k.access == r.access)) { // a bound tree holds its symlinks
			return true
		}
	}
	return false
}

// conflicts checks the hidden paths against the allowed trees: an
// allowed path inside a hidden one shows part of it, which no mechanism
// can take back; a hidden path inside an allowed tree can be hidden only
// by a mechanism that mounts over it.
func (v *view) conflicts(hidesInside bool, mech string) error {
	for _, r := range v.rules {
		if r.link != "" {
			continue
		}
		for _, h := range v.hidden {
			if within(r.path, h) {
				return fmt.Errorf("sandbox: %s is allowed but lies inside %s, which must stay hidden; allow a path outside it instead", r.path, h)
			}
			if within(h, r.path) && !hidesInside {
				return fmt.Errorf("sandbox: %s must stay hidden but lies inside %s, which the sandbox allows, and %s cannot hide a path inside an allowed tree; move it out, or use mode = \"bwrap\" (apt install bubblewrap)", h, r.path, mech)
			}
		}
	}
	return nil
}

// visible reports whether p (resolved) lies in an allowed tree.
func (v *view) visible(p string) bool {
	for _, r := range v.rules {
		if r.link == "" && within(p, r.path) {
			return true
		}
	}
	return false
}

// hiddenInside are the hidden paths that lie inside an allowed tree and
// exist: what bwrap mounts over.
func (v *view) hiddenInside() []string {
	var out []string
	for _, h := range v.hidden {
		if _, err := os.Lstat(h); err == nil && v.visible(h) {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// A mechanism is one way to confine a command: what it needs of the
// machine (probe), whether it can hide a path inside a tree it allows,
// and how it applies a call's view to the command (apply). The modes a
// user names pick among these rows (modes, below); nothing else in ralph
// looks at a mode's or a mechanism's name.
type mechanism struct {
	name string
	// probe says why this machine cannot give the mechanism for a run
	// whose network is net (nil: it can).
	probe func(net Network) error
	// hidesInside: a Hidden path inside an allowed tree is made
	// invisible (bwrap mounts over it); Landlock cannot.
	hidesInside bool
	// confinesTCP: a connection that bypasses the proxy is refused.
	confinesTCP bool
	// apply makes c's command confined: a Confine for procgroup, the
	// command rewritten, or both.
	apply func(s *Sandbox, c *call) error
}

var (
	mechBwrapLandlock = &mechanism{
		name:        "bwrap+landlock",
		probe:       func(Network) error { return errors.Join(bwrapUsable(), landlockNetUsable()) },
		hidesInside: true,
		confinesTCP: true,
		apply:       applyBwrap,
	}
	mechLandlock = &mechanism{
		name:        "landlock",
		probe:       landlockUsable,
		confinesTCP: true,
		apply:       applyLandlock,
	}
	mechBwrap = &mechanism{
		name:        "bwrap",
		probe:       func(Network) error { return bwrapUsable() },
		hidesInside: true,
		apply:       applyBwrap,
	}
)

// modeRow is a Mode as a user names it: the mechanisms it may use, best
// first. Off has none: no Sandbox at all.
type modeRow struct {
	mode  Mode
	mechs []*mechanism
	fix   string // how to get one of mechs on a machine that has none
}

var modes = []modeRow{
	{mode: Off},
	{mode: Auto, mechs: []*mechanism{mechBwrapLandlock, mechLandlock, mechBwrap},
		fix: `install bubblewrap (apt install bubblewrap) or run on a kernel with Landlock, or set mode = "off" in [sandbox]`},
	{mode: Landlock, mechs: []*mechanism{mechLandlock},
		fix: `run on a kernel with Landlock (Linux 5.13, TCP rules since 6.7), use mode = "bwrap" (apt install bubblewrap), or set mode = "off" in [sandbox]`},
	{mode: Bwrap, mechs: []*mechanism{mechBwrapLandlock, mechBwrap},
		fix: `install bubblewrap (apt install bubblewrap) and run ralph as a user who may create user namespaces ` +
			`(as root, ralph drops every capability before it starts a process, and bwrap cannot make its namespaces without them), ` +
			`or use mode = "landlock", or set mode = "off" in [sandbox]`},
}

func lookupMode(m Mode) (modeRow, bool) {
	for _, r := range modes {
		if r.mode == m {
			return r, true
		}
	}
	return modeRow{}, false
}

// modeNames lists the modes for an error message.
func modeNames() string {
	names := make([]string, len(modes))
	for i, r := range modes {
		names[i] = string(r.mode)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// choose is the first of row's mechanisms this machine can give for net,
// or an error naming why none can and how to fix it.
func choose(row modeRow, net Network) (*mechanism, error) {
	var why []string
	for _, m := range row.mechs {
		err := m.probe(net)
		if err == nil {
			return m, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", m.name, oneLine(err)))
	}
	return nil, fmt.Errorf("sandbox mode %q cannot confine processes on this machine (%s); %s",
		row.mode, strings.Join(why, "; "), row.fix)
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// bwrapProbe is cached per process: it really starts bwrap with the
// namespaces a call uses, since containers often lack user namespaces.
var bwrapProbe = sync.OnceValues(func() (string, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("no bwrap on PATH")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return "", fmt.Errorf("no true on PATH to try bwrap with")
	}
	args := append(bwrapBase(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", truePath)
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("bwrap cannot create its namespaces here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return path, nil
})

func bwrapUsable() error {
	_, err := bwrapProbe()
	return err
}

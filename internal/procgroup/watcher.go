package procgroup

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The watcher is this same program started again (its first act, in this
// package's init, is to see roleEnv and become the watcher): one per
// process, started with the first contained command, in a process group
// of its own so that a terminal's signals do not reach it. It reads, on a
// pipe whose write end only this process holds, a line for each command
// that starts ("+ id leader pgid since marker cgroup") and ends ("- id"). When
// the pipe reads end-of-file this process is gone, however it died
// (SIGKILL included), and the watcher kills every command still listed:
// by cgroup.kill for those in a cgroup, else by a sweep of /proc for the
// command's group, marker and descendants, and then exits. A process
// that moved to a new session is caught either way.
const (
	roleEnv     = "RALPH_PROCGROUP_ROLE"
	roleWatcher = "watcher"
	roleProbe   = "probe"
)

func init() {
	switch os.Getenv(roleEnv) {
	case roleWatcher:
		runWatcher(os.Stdin)
		os.Exit(0)
	case roleProbe:
		os.Exit(0)
	}
}

// runWatcher is the watcher's whole life.
func runWatcher(in io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE, syscall.SIGTSTP)
	live := make(map[string]watched)
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if id, w, ok := parseWatchLine(sc.Text()); ok {
			if w == nil {
				delete(live, id)
			} else {
				live[id] = *w
			}
		}
	}
	for _, w := range live { // first kill them all, then wait for each
		if w.cgroup != "" {
			_ = killCgroup(w.cgroup)
		}
	}
	self := os.Getpid()
	for _, w := range live {
		if w.cgroup == "" || !killAndRemove(w.cgroup) {
			w.t.sweep(self)
		}
	}
}

// watched is one command the watcher looks after.
type watched struct {
	t      target
	cgroup string
}

// parseWatchLine reads "+ id leader pgid since "marker" "cgroup"" (w set)
// or "- id" (w nil).
func parseWatchLine(line string) (id string, w *watched, ok bool) {
	op, rest, _ := strings.Cut(line, " ")
	id, rest, _ = strings.Cut(rest, " ")
	switch op {
	case "-":
		return id, nil, id != ""
	case "+":
		f := strings.SplitN(rest, " ", 4)
		if len(f) != 4 {
			return "", nil, false
		}
		var v watched
		var err1, err2, err4 error
		v.t.leader, err1 = strconv.Atoi(f[0])
		v.t.pgid, err2 = strconv.Atoi(f[1])
		v.t.since, err4 = strconv.ParseUint(f[2], 10, 64)
		marker, err3 := strconv.QuotedPrefix(f[3])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return "", nil, false
		}
		v.t.marker, _ = strconv.Unquote(marker)
		cg := strings.TrimPrefix(f[3][len(marker):], " ")
		if v.cgroup, err1 = strconv.Unquote(cg); err1 != nil {
			return "", nil, false
		}
		return id, &v, true
	}
	return "", nil, false
}

// theWatcher is this process's watcher, started on first use and again
// if it died.
var theWatcher struct {
	mu    sync.Mutex
	w     *os.File // the write end of its pipe
	lines map[int64]string
	live  map[int64]*container
	err   error // why it could not be started, for tests
}

// watch tells the watcher about c (again, after a change).
func watch(c *container) {
	theWatcher.mu.Lock()
	defer theWatcher.mu.Unlock()
	if theWatcher.lines == nil {
		theWatcher.lines, theWatcher.live = make(map[int64]string), make(map[int64]*container)
	}
	line := c.line()
	theWatcher.lines[c.id], theWatcher.live[c.id] = line, c
	sendLocked(line)
}

// unwatch tells the watcher c has ended.
func unwatch(c *container) {
	theWatcher.mu.Lock()
	defer theWatcher.mu.Unlock()
	delete(theWatcher.lines, c.id)
	delete(theWatcher.live, c.id)
	sendLocked(fmt.Sprintf("- %d", c.id))
}

// sendLocked writes a line to the watcher, starting it (and telling it
// every live command) when there is none or it has died.
func sendLocked(line string) {
	if theWatcher.w != nil {
		if _, err := io.WriteString(theWatcher.w, line+"\n"); err == nil {
			return
		}
		_ = theWatcher.w.Close()
		theWatcher.w = nil
	}
	w, err := startWatcherProc()
	theWatcher.err = err
	if err != nil {
		return // the parent-death signal and the group kill still apply
	}
	theWatcher.w = w
	for _, l := range theWatcher.lines {
		_, _ = io.WriteString(w, l+"\n")
	}
}

func startWatcherProc() (*os.File, error) {
	self, err := selfExe()
	if err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Args = []string{"ralph-watcher"} // what ps shows; the program is this one
	// The watcher needs nothing of this process's environment, and must not
	// hold its secrets where /proc/<pid>/environ shows them.
	cmd.Env = []string{roleEnv + "=" + roleWatcher}
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close() // the watcher holds its own copy
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watcher: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it ever dies first
	return w, nil
}

// KillAll kills every process of every command this process has running
// (by cgroup.kill or a sweep), for a process about to exit at once, such
// as a worker stopped by a second signal: nothing it started is left for
// the watcher to find.
func KillAll() {
	theWatcher.mu.Lock()
	live := make([]*container, 0, len(theWatcher.live))
	for _, c := range theWatcher.live {
		live = append(live, c)
	}
	theWatcher.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.kill()
		}()
	}
	wg.Wait()
}

// watcherUp reports whether the watcher is running (as far as this
// process knows: it learns of its death at the next write).
func watcherUp() bool {
	theWatcher.mu.Lock()
	defer theWatcher.mu.Unlock()
	return theWatcher.w != nil
}

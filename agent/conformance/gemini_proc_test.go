package conformance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

var geminiSyscallKill = syscall.SIGKILL

// geminiProc is a process found in /proc: its pid, start time (to tell a reused
// pid) and command line.
type geminiProc struct {
	pid     int
	start   string
	cmdline string
}

// geminiProcsIn lists the processes whose working directory is dir.
func geminiProcsIn(dir string) []geminiProc {
	ents, _ := os.ReadDir("/proc")
	var out []geminiProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, geminiProc{pid: pid, start: geminiStartTime(pid), cmdline: strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))})
	}
	return out
}

// geminiStat is the fields of /proc/pid/stat after the command name.
func geminiStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		return strings.Fields(s[i+1:])
	}
	return nil
}

func geminiStartTime(pid int) string {
	if f := geminiStat(pid); len(f) > 19 {
		return f[19]
	}
	return ""
}

func geminiSessionOf(pid int) int {
	if f := geminiStat(pid); len(f) > 3 {
		n, _ := strconv.Atoi(f[3])
		return n
	}
	return 0
}

// geminiAlive: p still runs (not a zombie) and is the same process.
func geminiAlive(p geminiProc) bool {
	f := geminiStat(p.pid)
	return len(f) > 19 && f[0] != "Z" && f[19] == p.start
}

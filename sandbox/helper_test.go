//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary the attacker: started with it set, it
// runs one attack from its arguments (attack) and exits 0 if the attack
// got through, 1 if it was refused (printing why).
const helperEnv = "RALPH_SANDBOX_ATTACKER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		if err := attack(os.Args[1:]); err != nil {
			fmt.Println("refused:", err)
			os.Exit(1)
		}
		fmt.Println("reached")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// attacker is a command running the test binary as the attacker.
func attacker(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), self, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	return cmd
}

// attack is one attempt; nil means it got through.
func attack(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no attack named")
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	pid, _ := strconv.Atoi(arg(1)) // for the attacks that take one
	switch args[0] {
	case "read":
		_, err := os.ReadFile(arg(1))
		return err
	case "write":
		return os.WriteFile(arg(1), []byte("pwned"), 0o600)
	case "replace": // write a new file, then rename it over the target
		if err := os.WriteFile(arg(1), []byte("forged"), 0o600); err != nil {
			return err
		}
		return os.Rename(arg(1), arg(2))
	case "environ":
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && len(b) == 0 {
			return fmt.Errorf("/proc/%d/environ read empty", pid)
		}
		return err
	case "mem":
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err == nil {
			f.Close()
		}
		return err
	case "signal":
		return syscall.Kill(pid, syscall.SIGURG) // harmless to a Go process
	case "dial":
		c, err := net.DialTimeout("tcp", arg(1), 10*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	case "unix":
		c, err := net.Dial("unix", arg(1))
		if err == nil {
			c.Close()
		}
		return err
	case "get":
		return get(arg(1))
	case "env":
		if v := os.Getenv(arg(1)); v != "" {
			return nil
		}
		return fmt.Errorf("%s is not set", arg(1))
	case "symlink":
		if err := os.Symlink(arg(1), arg(2)); err != nil {
			return err
		}
		_, err := os.ReadFile(arg(2))
		return err
	case "hardlink":
		if err := os.Link(arg(1), arg(2)); err != nil {
			return err
		}
		_, err := os.ReadFile(arg(2))
		return err
	case "escape": // a new session, then a fork of a fork, then the read
		return rerun(true, "fork", arg(1))
	case "fork":
		return rerun(false, "read", arg(1))
	}
	return fmt.Errorf("no attack %q", args[0])
}

// rerun runs the attacker again (in a new session with setsid) and
// relays its outcome.
func rerun(setsid bool, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s", out)
	}
	return nil
}

// get fetches url through the proxy the environment names.
func get(url string) error {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSandboxDecodes(t *testing.T) {
	dir := t.TempDir()
	src := "[plan]\nrtfs = '(do)'\n[sandbox]\nmode = \"auto\"\nnetwork = \"none\"\nread = [\"docs\", \"/usr/share\"]\nwrite = [\"/tmp/w\"]\nhide = [\"secret\"]\nhosts = [\"proxy.golang.org\"]\n"
	c, err := Parse([]byte(src), filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox
	switch {
	case s == nil:
		t.Fatal("no [sandbox] decoded")
	case s.Mode != "auto" || s.Network != "none" || c.SandboxMode() != "auto":
		t.Errorf("mode %q network %q", s.Mode, s.Network)
	case !slices.Equal(s.Read, []string{filepath.Join(dir, "docs"), "/usr/share"}) || !slices.Equal(s.Hide, []string{filepath.Join(dir, "secret")}):
		t.Errorf("paths not made absolute against the config's directory: read %q hide %q", s.Read, s.Hide)
	case !slices.Equal(s.Write, []string{"/tmp/w"}) || !slices.Equal(s.Hosts, []string{"proxy.golang.org"}):
		t.Errorf("write %q hosts %q", s.Write, s.Hosts)
	}
	if l, col := c.Pos("sandbox.network"); l != 5 || col != 11 {
		t.Errorf("Pos(sandbox.network) = %d:%d, want 5:11", l, col)
	}
	if l, col := c.Pos("sandbox.nosuch"); l != 3 || col != 0 {
		t.Errorf("Pos of an unwritten key = %d:%d, want its table's line 3 and no column", l, col)
	}
	if err := c.ErrorAtValue("sandbox.mode", "bad"); err.Error() != filepath.Join(dir, "ralph.toml")+":4:8: bad" {
		t.Errorf("ErrorAtValue: %v", err)
	}
	if !strings.Contains(c.Snapshot(), "[sandbox]") {
		t.Errorf("the snapshot (which resume reads) lacks [sandbox]:\n%s", c.Snapshot())
	}
}

func TestSandboxAbsentAndFlag(t *testing.T) {
	c, err := Parse([]byte("[plan]\nrtfs = '(do)'\n"), filepath.Join(t.TempDir(), "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox != nil || c.SandboxMode() != "" {
		t.Fatalf("no [sandbox] decoded as %+v", c.Sandbox)
	}
	c.SetSandboxMode("bwrap")
	if c.SandboxMode() != "bwrap" {
		t.Errorf("--sandbox bwrap gave mode %q", c.SandboxMode())
	}
}

func TestSandboxBadKeys(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"[sandbox]\nmode = \"auto\"\nnetwrok = \"none\"\n", "ralph.toml:5: unknown key sandbox.netwrok; did you mean sandbox.network?"},
		{"[sandbox]\nhosts = \"a.example\"\n", "ralph.toml:4: sandbox.hosts must be"},
		{"[sandbox]\nmode = 3\n", "ralph.toml:4: sandbox.mode must be"},
	} {
		_, err := Parse([]byte("[plan]\nrtfs = '(do)'\n"+c.src), "ralph.toml", func(string) string { return "" })
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q…", c.src, err, c.want)
		}
	}
}

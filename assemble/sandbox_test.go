package assemble_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/sandbox"
)

// sandboxHome points HOME and the XDG directories at temporary ones.
func sandboxHome(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "cfg"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(home, "run"))
	t.Setenv("RALPH_STORE", "")
	return home
}

// sandboxConfig parses a ralph.toml of a static plan plus rest in a new
// directory, which is its workdir.
func sandboxConfig(t *testing.T, rest string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte("[plan]\nrtfs = '(call :ccos.echo {:message \"hi\"})'\n"+rest),
		filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A bad [sandbox] value is refused by the one config check with the
// file:line:col of the value and the owner's sentence.
func TestSandboxSpecErrorsHavePositions(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"[sandbox]\nmode = \"jail\"\n", `ralph.toml:4:8: sandbox mode "jail" is not one of off, auto, landlock or bwrap`},
		{"[sandbox]\nmode = \"auto\"\nnetwork  =  \"some\"\n", `ralph.toml:5:13: sandbox network "some" is not one of model, none or all`},
		{"[sandbox]\nhosts = [\"a.example\", \"\"]\n", `ralph.toml:4:9: sandbox.hosts has an empty entry`},
	} {
		cfg := sandboxConfig(t, c.toml)
		_, err := assemble.Check(cfg, assemble.CheckOptions{Paths: assemble.NoPaths})
		var ce *assemble.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want a ConfigError with %q", c.toml, err, c.want)
		}
	}
}

func TestSandboxSpec(t *testing.T) {
	for _, c := range []struct {
		toml string
		want sandbox.Spec
	}{
		{"", sandbox.Spec{Mode: sandbox.Off}},
		{"[sandbox]\n", sandbox.Spec{Mode: sandbox.Auto, Network: sandbox.NetModel}},
		{"[sandbox]\nmode = \"off\"\n", sandbox.Spec{Mode: sandbox.Off, Network: sandbox.NetModel}},
		{"[sandbox]\nmode = \"bwrap\"\nnetwork = \"none\"\nhosts = [\"proxy.golang.org\"]\n",
			sandbox.Spec{Mode: sandbox.Bwrap, Network: sandbox.NetNone, Hosts: []string{"proxy.golang.org"}}},
	} {
		got, err := assemble.SandboxSpec(sandboxConfig(t, c.toml))
		if err != nil || got.Mode != c.want.Mode || got.Network != c.want.Network || !slices.Equal(got.Hosts, c.want.Hosts) {
			t.Errorf("%q: %+v, %v; want %+v", c.toml, got, err, c.want)
		}
	}
	cfg := sandboxConfig(t, "[sandbox]\nread = [\"docs\"]\nhide = [\"/secret\"]\n")
	got, err := assemble.SandboxSpec(cfg)
	if err != nil || !slices.Equal(got.Read, []string{filepath.Join(cfg.Loop.Workdir, "docs")}) || !slices.Equal(got.Hide, []string{"/secret"}) {
		t.Errorf("paths: %+v, %v; want read relative to the config's directory", got, err)
	}
}

// The bounds hide the store, ralph's keys and witness and the extra file
// given; the agent CLI's state directories and hosts come from its
// descriptor, base_url's host is added, and the cache root is per project
// under ralph's state directory.
func TestSandboxBounds(t *testing.T) {
	home := sandboxHome(t)
	cfg := sandboxConfig(t, "[model]\nprovider = \"static\"\nbase_url = \"http://127.0.0.1:4010/v1\"\n[agent]\ncli = \"codex\"\n[sandbox]\nmode = \"auto\"\n")
	store := filepath.Join(home, "stores", "s")
	b, err := assemble.SandboxBounds(cfg, store, []string{"/keys/mine.pem"})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := ledger.DefaultKeyDir()
	witness, _ := ledger.DefaultWitnessDir()
	for _, h := range []string{store, keys, witness, "/keys/mine.pem"} {
		if !slices.Contains(b.Hidden, h) {
			t.Errorf("Hidden %q lacks %s", b.Hidden, h)
		}
	}
	if b.Workdir != cfg.Loop.Workdir {
		t.Errorf("Workdir %s, want %s", b.Workdir, cfg.Loop.Workdir)
	}
	if !slices.Equal(b.StateDirs, []string{filepath.Join(home, ".codex")}) {
		t.Errorf("StateDirs %q, want codex's ~/.codex", b.StateDirs)
	}
	for _, h := range []string{"api.openai.com", "chatgpt.com", "127.0.0.1:4010"} {
		if !slices.Contains(b.Hosts, h) {
			t.Errorf("Hosts %q lack %s", b.Hosts, h)
		}
	}
	if !strings.HasPrefix(b.CacheRoot, filepath.Join(home, "state", "ralph", "cache")+string(filepath.Separator)) {
		t.Errorf("CacheRoot %s is not under ralph's state directory", b.CacheRoot)
	}
	other := sandboxConfig(t, "[sandbox]\n")
	if ob, _ := assemble.SandboxBounds(other, store, nil); ob.CacheRoot == b.CacheRoot {
		t.Errorf("two projects share the cache root %s", b.CacheRoot)
	}
}

// TestSandboxBoundsFromTheCLIsOwnConfig: a provider in codex's
// config.toml is among the hosts; Claude's ~/.claude.json is a state file
// that starts as {}.
func TestSandboxBoundsFromTheCLIsOwnConfig(t *testing.T) {
	home := sandboxHome(t)
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("[model_providers.gw]\nbase_url = \"https://gw.example:8443/v1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := sandboxConfig(t, "[model]\nprovider = \"static\"\n[agent]\ncli = \"codex\"\n[governance]\nagent_allow = [\"codex\", \"claude\"]\n[sandbox]\n")
	b, err := assemble.SandboxBounds(cfg, filepath.Join(home, "stores", "s"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(b.Hosts, "gw.example:8443") {
		t.Errorf("Hosts %q lack the provider of codex's config.toml", b.Hosts)
	}
	claudeJSON := filepath.Join(home, ".claude.json")
	if !slices.Contains(b.StateDirs, claudeJSON) || b.StateFiles[claudeJSON] != "{}\n" {
		t.Errorf("StateDirs %q, StateFiles %q: want %s, starting as {}", b.StateDirs, b.StateFiles, claudeJSON)
	}
}

// [sandbox] write must name directories that exist and do not hold the
// store, refused at the key's line.
func TestSandboxWritePaths(t *testing.T) {
	sandboxHome(t)
	outside := t.TempDir()
	file := filepath.Join(outside, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ write, store, want string }{
		{`["missing"]`, "/elsewhere/s", "cannot be read"},
		{`["` + file + `"]`, "/elsewhere/s", "is not a directory"},
		{`["` + outside + `"]`, filepath.Join(outside, "store"), "holds the run's store"},
	} {
		cfg := sandboxConfig(t, "[sandbox]\nwrite = "+c.write+"\n")
		_, err := assemble.SandboxBounds(cfg, c.store, nil)
		if err == nil || !strings.Contains(err.Error(), "ralph.toml:4:9: sandbox.write names") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("write = %s: %v, want %q at ralph.toml:4:9", c.write, err, c.want)
		}
	}
	cfg := sandboxConfig(t, "[sandbox]\nwrite = [\""+outside+"\"]\n")
	if _, err := assemble.SandboxBounds(cfg, "/elsewhere/s", nil); err != nil {
		t.Errorf("a good write path: %v", err)
	}
}

// Under a sandbox the default store moves out of the workdir to ralph's
// state directory; a store named inside the workdir is refused; off, or
// a store outside the workdir, stays where it was named.
func TestStorePlace(t *testing.T) {
	home := sandboxHome(t)
	on := sandboxConfig(t, "[sandbox]\nmode = \"auto\"\n")
	def := filepath.Join(on.Loop.Workdir, ".ralph")
	got, moved, err := assemble.StorePlace(on, def, false)
	if err != nil || !moved || !strings.HasPrefix(got, filepath.Join(home, "state", "ralph", "stores")+string(filepath.Separator)) {
		t.Errorf("default store: %s, %v, %v; want it moved under the state directory", got, moved, err)
	}
	if again, _, _ := assemble.StorePlace(on, def, false); again != got {
		t.Errorf("the moved store is %s, then %s: a resume would not find it", got, again)
	}
	for _, c := range []struct {
		dir     string
		flagged bool
		want    string
	}{
		{def, true, "--store names the store"},
		{filepath.Join(on.Loop.Workdir, "st"), false, "store.dir or RALPH_STORE names"},
	} {
		_, _, err := assemble.StorePlace(on, c.dir, c.flagged)
		var ce *assemble.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "outside the workdir") {
			t.Errorf("store %s (flag %v): %v, want a ConfigError saying %q and the fix", c.dir, c.flagged, err, c.want)
		}
	}
	outside := filepath.Join(t.TempDir(), "s")
	if got, moved, err := assemble.StorePlace(on, outside, true); got != outside || moved || err != nil {
		t.Errorf("a store outside the workdir: %s, %v, %v", got, moved, err)
	}
	for _, toml := range []string{"", "[sandbox]\nmode = \"off\"\n"} {
		off := sandboxConfig(t, toml)
		d := filepath.Join(off.Loop.Workdir, ".ralph")
		if got, moved, err := assemble.StorePlace(off, d, false); got != d || moved || err != nil {
			t.Errorf("%q: %s, %v, %v; want the store where it was", toml, got, moved, err)
		}
	}
}

// A mode the machine cannot give refuses the run before its store is
// made, in sandbox.New's words; mode off builds a run with no sandbox.
func TestNewRunSandbox(t *testing.T) {
	sandboxHome(t)
	cfg := sandboxConfig(t, "[[stop]]\nkind = \"max_iterations\"\nmax = 1\n[sandbox]\nmode = \"bwrap\"\n")
	store := filepath.Join(t.TempDir(), "store")
	probe, want := sandbox.New(sandbox.Spec{Mode: sandbox.Bwrap}, sandbox.Bounds{Workdir: cfg.Loop.Workdir}, nil)
	_ = probe.Close()
	rs, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Dir: store,
		Open: func() (*ledger.Store, error) { return ledger.Open(ledger.Options{Dir: store}) }})
	if err == nil {
		rs.Discard() // the machine gives bwrap
	}
	var ce *assemble.ConfigError
	if want != nil && (!errors.As(err, &ce) || !strings.Contains(err.Error(), want.Error())) {
		t.Errorf("bwrap: %v, want a ConfigError with %q", err, want)
	}
	if _, serr := os.Stat(store); want != nil && !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("a refused sandbox left the store %s behind (%v)", store, serr)
	}
	off := sandboxConfig(t, "[[stop]]\nkind = \"max_iterations\"\nmax = 1\n[sandbox]\nmode = \"off\"\n")
	rs, err = assemble.NewRun(context.Background(), off, assemble.RunOptions{Open: func() (*ledger.Store, error) {
		return ledger.Open(ledger.Options{InMemory: true})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Discard()
	if rs.Sandbox != nil || rs.Options.Sandbox != nil {
		t.Errorf("mode off built a sandbox %p", rs.Sandbox)
	}
}

package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

func TestStarterLoads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := WriteStarter(dir)
	if err != nil || len(files) != 2 {
		t.Fatal(files, err)
	}
	c, err := Load(filepath.Join(dir, "ralph.toml"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.Provider != "static" || !strings.Contains(c.Plan.RTFS, `(step "Greet"`) {
		t.Errorf("provider %q plan %q", c.Model.Provider, c.Plan.RTFS)
	}
	if c.Store.Dir != filepath.Join(dir, ".ralph") || c.Loop.Workdir != dir || c.Intent.PromptFile != filepath.Join(dir, "PROMPT.md") {
		t.Errorf("paths not anchored at the config: %q %q %q", c.Store.Dir, c.Loop.Workdir, c.Intent.PromptFile)
	}
	if len(c.Stop) != 1 || c.Stop[0].Kind != "max_iterations" || c.Stop[0].Max != 3 || c.Stop[0].Line != 30 {
		t.Errorf("stop %+v", c.Stop)
	}
	if c.Intent.Params["greeting"] != "hello" {
		t.Errorf("params %v", c.Intent.Params)
	}
	if _, err := WriteStarter(dir); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second init: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"unknown top key", "[model]\nprovider = \"static\"\n[plan]\nrtfs = \"(do)\"\n[loop]\nworkdr = \".\"\n", "ralph.toml:6: unknown key loop.workdr"},
		{"unknown section", "[plan]\nrtfs = \"1\"\n\n[modle]\nprovider = \"x\"\n", "ralph.toml:4: unknown key modle"},
		{"syntax", "[plan]\nrtfs = \"1\n", "ralph.toml:2:"},
		{"bad provider", "[model]\nprovider = \"gpt\"\n", `ralph.toml:2: model.provider "gpt" is not one of openai, static, script, command`},
		{"static without plan", "[model]\nprovider = \"static\"\n", `ralph.toml:2: provider "static" needs [plan].rtfs or [plan].file`},
		{"bad duration", "[plan]\nrtfs = \"1\"\n[loop]\ndelay = \"soon\"\n", `"soon" is not a duration`},
		{"wrong type", "[loop]\nmax_iterations = \"ten\"\n", "ralph.toml:2: loop.max_iterations must be an integer, not a string"},
		{"wrong type in stop", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"max_iterations\"\nmax = \"one\"\n", "ralph.toml:5: stop.max must be an integer, not a string"},
		{"string for a list", "[governance]\nallow = \"ccos.*\"\n", `ralph.toml:2: governance.allow must be a list of strings, such as ["a", "b"], not a string`},
		{"number in a list", "[governance]\nallow = [1]\n", `ralph.toml:2: governance.allow must be a list of strings, such as ["a", "b"]; one of its items is an integer`},
		{"string for a bool", "[loop]\napprove = \"yes\"\n", "ralph.toml:2: loop.approve must be true or false, not a string"},
		{"string for a float", "[model]\ntemperature = \"hot\"\n", "ralph.toml:2: model.temperature must be a number, not a string"},
		{"number for a string", "[store]\ndir = 5\n", "ralph.toml:2: store.dir must be a string, not an integer"},
		{"number for a table", "[model]\nprice = 5\n", "ralph.toml:2: model.price must be a table, not an integer"},
		{"string for a nested list", "[plan]\nrtfs = \"1\"\n[[stop]]\nkind = \"command\"\ncmd = \"go test\"\n", `ralph.toml:5: stop.cmd must be a list of strings, such as ["a", "b"], not a string`},
		{"number for params", "[intent]\nparams = 5\n", "ralph.toml:2: intent.params must be a table, such as { name = \"value\" }, not an integer"},
		{"list for params", "[intent]\nparams = [1, 2]\n", "ralph.toml:2: intent.params must be a table, such as { name = \"value\" }, not a list"},
		{"table for a string", "[intent]\ngoal = { a = 1 }\n", "ralph.toml:2: intent.goal must be a string, not a table"},
		{"table twice", "[intent]\ngoal = \"a\"\n[intent]\ngoal = \"b\"\n", `ralph.toml:3:2: [intent] is defined twice; merge the two tables into one`},
		{"key twice", "[intent]\ngoal = \"a\"\ngoal = \"b\"\n", `ralph.toml:3:12: intent.goal is set twice; keep one of the two`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.src), "ralph.toml", noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEnvOverridesAndSnapshot(t *testing.T) {
	t.Parallel()
	src := "[model]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"https://user:pw@example.com/v1\"\n[store]\ndir = \"s\"\n"
	env := func(k string) string {
		return map[string]string{"RALPH_STORE": "/tmp/elsewhere", "OPENAI_API_KEY": "sk-secret"}[k]
	}
	c, err := Parse([]byte(src), filepath.Join(t.TempDir(), "ralph.toml"), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Dir != "/tmp/elsewhere" {
		t.Errorf("RALPH_STORE not applied: %q", c.Store.Dir)
	}
	if c.APIKey(env) != "sk-secret" {
		t.Error("APIKey")
	}
	snap := c.Snapshot()
	if strings.Contains(snap, "sk-secret") || strings.Contains(snap, "pw@") || !strings.Contains(snap, "REDACTED@example.com") {
		t.Errorf("snapshot leaks or lacks redaction:\n%s", snap)
	}
	if _, err := Parse([]byte(snap), "snap.toml", noEnv); err != nil {
		t.Errorf("snapshot does not load back: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "does not exist; create one with `ralph init`") {
		t.Errorf("got %v", err)
	}
}

func TestLoadDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Load(dir, noEnv)
	want := "config " + dir + " is a directory; pass the ralph.toml in it (" + filepath.Join(dir, "ralph.toml") + ")"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(Starter))
	f.Add([]byte("[[stop]]\nkind = \"all\"\nconditions = [{kind = \"not\", conditions = [{kind = \"never\"}]}]\n[plan]\nrtfs='1'"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.toml", noEnv)
		if err == nil && c.Model.Provider == "" {
			t.Fatal("loaded a config without defaults")
		}
	})
}

func TestMaxRepairsZeroIsKept(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]int{
		"[model]\nprovider = \"static\"\n":                  2, // the default
		"[model]\nprovider = \"static\"\nmax_repairs = 0\n": 0, // no repairs, as written
		"[model]\nprovider = \"static\"\nmax_repairs = 5\n": 5,
	} {
		c, err := Parse([]byte(src+"[plan]\nrtfs = \"(do)\"\n"), filepath.Join(t.TempDir(), "ralph.toml"), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if c.Model.MaxRepairs != want {
			t.Errorf("%q: max_repairs = %d, want %d", src, c.Model.MaxRepairs, want)
		}
	}
}

func TestLoopCheckpoints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"", true},
		{"[loop]\ncheckpoints = true\n", true},
		{"[loop]\ncheckpoints = false\n", false},
	} {
		c, err := Parse([]byte(tc.src+"[plan]\nrtfs = \"(do 1)\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n"), filepath.Join(t.TempDir(), "ralph.toml"), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Loop.CheckpointsOn(); got != tc.want {
			t.Errorf("%q: CheckpointsOn = %t, want %t", tc.src, got, tc.want)
		}
		back, err := Parse([]byte(c.Snapshot()), "snap.toml", noEnv)
		if err != nil || back.Loop.CheckpointsOn() != tc.want {
			t.Errorf("%q: the snapshot does not keep checkpoints: %v", tc.src, err)
		}
	}
	_, err := Parse([]byte("[loop]\ncheckpoints = \"no\"\n"), "bad.toml", noEnv)
	if err == nil || !strings.Contains(err.Error(), "bad.toml:2") {
		t.Errorf("a string checkpoints gave %v, want an error at bad.toml:2", err)
	}
}

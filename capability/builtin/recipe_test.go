package builtin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// headSpec is a capability that exists only in this test: test.head
// prints the first line of a file in the workdir, running head. It runs
// a program, and what it returns is text already stored; echoes says so
// or not.
func headSpec(echoes bool) *capability.Spec {
	return &capability.Spec{ID: "test.head", Version: "1.0.0", Description: "Print a file's first line.",
		Input: rtfs.MustParseType("[:map [:path :string]]"), Output: rtfs.MustParseType(":string"),
		Effects: []capability.Effect{{Kind: "process"}}, Risk: capability.RiskLow,
		Examples: []string{`(call :test.head {:path "notes"})`},
		Program:  func(rtfs.Value) string { return "head" }, EchoesStored: echoes, Reports: []string{}}
}

func head(workdir string) capability.Handler {
	return func(ctx context.Context, in rtfs.Value) (capability.Result, error) {
		cmd := exec.CommandContext(ctx, "head", "-n", "1", in.AsMap().GetKey("path").Str())
		cmd.Dir = workdir
		out, err := cmd.Output()
		return capability.Result{Value: rtfs.String(string(out))}, err
	}
}

// A new capability is one row and its handler, nothing else: with just
// those, every run's registry offers it (builtin.Register), governance
// holds the program it runs to shell_allow at admission and before each
// call (its spec's Program), a run built by assemble.NewRun calls it and
// an output_pattern condition passes over its result when its spec says
// the result echoes stored text (and only then), code reading a recorded
// run finds its spec (Lookup, loop.Printout), and the docs check sees it
// is undocumented.
func TestACapabilityIsOneRow(t *testing.T) {
	if _, err := exec.LookPath("head"); err != nil {
		t.Skip("no head on PATH")
	}
	add := func(echoes bool) {
		t.Helper()
		if err := builtin.AddRow(headSpec(echoes), head); err != nil {
			t.Fatal(err)
		}
	}
	add(true)
	t.Cleanup(func() { builtin.RemoveRow("test.head") })

	dir := t.TempDir()
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Workdir: dir}); err != nil || reg.Get("test.head") == nil {
		t.Fatalf("the registry does not offer the new capability (%v)", err)
	}
	forms, err := rtfs.Read(`(step "Read" (call :test.head {:path "notes"}))`, "plan.rtfs")
	if err != nil {
		t.Fatal(err)
	}
	d := governance.New(governance.Constitution{}, reg, nil).Admit("plan.rtfs", forms)
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), `command "head" is not in [governance].shell_allow`) {
		t.Errorf("admitted with no shell_allow: %v", err)
	}
	if d := governance.New(governance.Constitution{}, reg, nil).CheckCall("test.head", rtfs.Nil); d.Allowed {
		t.Error("a call was let through with no shell_allow")
	}
	k := governance.New(governance.Constitution{ShellAllow: []string{"head"}}, reg, nil)
	if err := k.Admit("plan.rtfs", forms).Err(); err != nil {
		t.Errorf("refused under shell_allow [head]: %v", err)
	}
	if s, ok := builtin.Lookup("test.head"); !ok || !s.EchoesStored || loop.Printout("test.head") {
		t.Errorf("the recorded run's view of it: %+v %t", s, ok)
	}

	os.WriteFile(filepath.Join(dir, "notes"), []byte("DONE\n"), 0o600)
	if by := runHead(t, dir); by != "once" {
		t.Errorf("the run stopped by %q, want once: output_pattern took the echoed file for the run's output", by)
	}
	builtin.RemoveRow("test.head")
	add(false)
	if by := runHead(t, dir); by != "done" {
		t.Errorf("the run stopped by %q, want done: a result that is not stored text is output", by)
	}
	if u := builtin.Undocumented(t); !slices.Contains(u, "test.head") {
		t.Errorf("the docs check does not see the new capability: %v", u)
	}
	if err := builtin.AddRow(headSpec(false), head); err == nil {
		t.Error("a second row of the same id was taken")
	}
}

// runHead runs one iteration of a plan calling test.head on notes, built
// as ralph run builds it, and returns the condition that stopped it.
func runHead(t *testing.T, dir string) string {
	t.Helper()
	src := fmt.Sprintf(`[plan]
rtfs = '(step "Read" (call :test.head {:path "notes"}))'
[loop]
workdir = %q
checkpoints = false
[store]
sync_writes = false
[governance]
shell_allow = ["head"]
[[stop]]
name = "done"
kind = "output_pattern"
pattern = "DONE"
[[stop]]
name = "once"
kind = "max_iterations"
max = 1
`, dir)
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: assemble.InMemory})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Store.Close()
	r, err := run.NewRunner()
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out.TriggeredBy
}

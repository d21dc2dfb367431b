package fleet

import (
	"strings"
	"testing"
)

// A policy that requires a sandbox refuses a job asking for off or for
// none, with the fix; a job asking for a mode runs under the policy's.
func TestPolicySandbox(t *testing.T) {
	t.Parallel()
	auto := mustPolicy(t, "[governance]\nsandbox = \"auto\"\n")
	bwrap := mustPolicy(t, "[governance]\nsandbox = \"bwrap\"\n")
	for _, c := range []struct {
		pol       string
		job, want string
	}{
		{"auto", "", `job refused by worker policy worker.toml: it has no [sandbox] and the policy requires sandbox mode "auto"; add [sandbox] mode = "auto"`},
		{"auto", "[sandbox]\nmode = \"off\"\n", `its [sandbox] mode is "off" and the policy requires sandbox mode "auto"; set mode = "auto"`},
		{"bwrap", "[sandbox]\nmode = \"off\"\n", `requires sandbox mode "bwrap"`},
	} {
		p := auto
		if c.pol == "bwrap" {
			p = bwrap
		}
		err := ApplyPolicy(p, mustJob(t, c.job), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("policy %s, job %q: %v; want %q", c.pol, c.job, err, c.want)
		}
	}
	for _, c := range []struct {
		pol       string
		job, want string
	}{
		{"auto", "[sandbox]\nmode = \"landlock\"\n", "landlock"}, // a mechanism named is at least auto
		{"auto", "[sandbox]\n", "auto"},
		{"bwrap", "[sandbox]\nmode = \"landlock\"\n", "bwrap"},
		{"bwrap", "[sandbox]\nmode = \"auto\"\n", "bwrap"},
	} {
		p := auto
		if c.pol == "bwrap" {
			p = bwrap
		}
		job := mustJob(t, c.job)
		if err := ApplyPolicy(p, job, ""); err != nil || job.SandboxMode() != c.want {
			t.Errorf("policy %s, job %q: mode %q, %v; want %q", c.pol, c.job, job.SandboxMode(), err, c.want)
		}
	}
	none := mustJob(t, "")
	if err := ApplyPolicy(mustPolicy(t, "[governance]\n"), none, ""); err != nil || none.Sandbox != nil {
		t.Errorf("a policy that requires none: %v, sandbox %+v", err, none.Sandbox)
	}
}

func TestCheckPolicySandbox(t *testing.T) {
	t.Parallel()
	if err := CheckPolicy(mustPolicy(t, "[governance]\nsandbox = \"auto\"\n")); err != nil {
		t.Errorf("auto: %v", err)
	}
	err := CheckPolicy(mustPolicy(t, "[governance]\nshell_allow = [\"go\"]\nsandbox = \"jail\"\n"))
	want := `worker.toml:3:11: governance.sandbox: sandbox mode "jail" is not one of off, auto, landlock or bwrap; leave it out to require none`
	if err == nil || err.Error() != want {
		t.Errorf("jail: %v, want %q", err, want)
	}
}

package governance

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/rtfs"
)

func kernel(t *testing.T, c Constitution) *Kernel {
	t.Helper()
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Workdir: t.TempDir(), ShellAllow: c.ShellAllow}); err != nil {
		t.Fatal(err)
	}
	return New(c, reg, nil)
}

func admit(t *testing.T, k *Kernel, src string) *Decision {
	t.Helper()
	forms, err := rtfs.Read(src, "plan.rtfs")
	if err != nil {
		t.Fatal(err)
	}
	return k.Admit("plan.rtfs", forms)
}

func TestAdmission(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		c      Constitution
		src    string
		rule   string // failing rule; "" means admitted
		reason string
	}{
		{"simple plan admitted", Constitution{}, `(do (step "Greet" (call :ccos.echo {:message "hi"})))`, "", ""},
		{"unknown capability", Constitution{}, "(do\n  (step \"X\" (call :bank.rob {})))", RuleKnownCapability, "plan.rtfs:2:13: unknown capability :bank.rob"},
		{"non-literal id", Constitution{}, `(let [id :ccos.echo] (call id {:message "x"}))`, RuleLiteralCapability, "plan.rtfs:1:22: call needs a literal capability id"},
		{"deny wins", Constitution{Allow: []string{"ccos.*"}, Deny: []string{"ccos.math.*"}}, `(call :ccos.math.add 1 2)`, RuleDeny, "plan.rtfs:1:1: capability ccos.math.add is denied"},
		{"not allowed", Constitution{Allow: []string{"ccos.*"}}, `(call :fs.read {:path "x"})`, RuleAllow, "capability fs.read is not in [governance].allow"},
		{"allow glob", Constitution{Allow: []string{"ccos.*", "fs.*"}}, `(call :fs.read {:path "x"})`, "", ""},
		{"shell literal refused", Constitution{ShellAllow: []string{"go"}}, `(step "T" (call :shell.exec {:cmd "rm" :args ["-rf" "/"]}))`, RuleShellAllow, `plan.rtfs:1:11: command "rm" is not in [governance].shell_allow [go]`},
		{"shell literal allowed", Constitution{ShellAllow: []string{"go"}}, `(step "T" (call :shell.exec {:cmd "go" :args ["test"]}))`, "", ""},
		{"shell dynamic deferred", Constitution{ShellAllow: []string{"go"}}, `(step "T" (call :shell.exec {:cmd (:tool ctx)}))`, "", ""},
		{"bad literal args", Constitution{}, `(call :ccos.echo {:message 5})`, RuleArguments, "plan.rtfs:1:1: ccos.echo: :message expected string, got int"},
		{"contract required", Constitution{RequireContracts: []string{"fs.write"}}, `(step "W" (call :fs.write {:path "a" :content "b"}))`, RuleRequireContracts, "must run inside a step with a :pre or :post contract"},
		{"nil contract is none", Constitution{RequireContracts: []string{"fs.write"}}, `(step "W" ^{:pre nil :post false} (call :fs.write {:path "a" :content "b"}))`, RuleRequireContracts, "must run inside a step with a :pre or :post contract"},
		{"quoted call is data", Constitution{Deny: []string{"fs.*"}}, `(step "Q" (call :ccos.echo {:message (str '(call :fs.write {:path "a"}))}))`, "", ""},
		{"contract present", Constitution{RequireContracts: []string{"fs.write"}}, `(step "W" ^{:pre (fn [c] true)} (call :fs.write {:path "a" :content "b"}))`, "", ""},
		{"compensation required", Constitution{RequireCompensationForEffects: []string{"process"}}, `(step "T" (call :shell.exec {:cmd "x" :check false}))`, RuleRequireCompensate, "has effect :process and must be the primary of a step.with-compensation"},
		{"compensation present", Constitution{RequireCompensationForEffects: []string{"process"}, ShellAllow: []string{"x"}},
			`(step.with-compensation (step "T" (call :shell.exec {:cmd "x"})) (step "U" (call :ccos.echo {:message "undo"})))`, "", ""},
		{"impure contract", Constitution{}, "(step \"S\" ^{:pre (fn [c]\n (call :ccos.echo {:message \"x\"}))} 1)", RuleContractPurity, "plan.rtfs:2:2: call is not allowed in contracts"},
		{"max steps", Constitution{MaxSteps: 3}, `(do (step "a" 1) (step-loop "l" {:max 5} 1))`, RuleMaxSteps, "plan has 7 steps, over the limit of 3"},
		{"compile error", Constitution{}, `(step "s" (frobnicate 1))`, RuleCompiles, "plan.rtfs:1:12: unable to resolve symbol frobnicate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := admit(t, kernel(t, tc.c), tc.src)
			if tc.rule == "" {
				if !d.Allowed {
					t.Fatalf("refused: %v", d.Reasons)
				}
				return
			}
			if d.Allowed {
				t.Fatalf("admitted, want refusal by %s", tc.rule)
			}
			if !slices.Contains(d.RuleIDs, tc.rule) {
				t.Errorf("rules %v, want %s", d.RuleIDs, tc.rule)
			}
			if !strings.Contains(strings.Join(d.Reasons, "\n"), tc.reason) {
				t.Errorf("reasons %q, want %q", d.Reasons, tc.reason)
			}
			if err := d.Err(); !errors.Is(err, ErrRefused) {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}

func TestAdmissionDerivesCapabilitiesAndEffects(t *testing.T) {
	t.Parallel()
	k := kernel(t, Constitution{ShellAllow: []string{"go"}})
	d := admit(t, k, `(do (step "A" (call :ccos.echo {:message "x"}))
	  (step-parallel (step "B" (call :fs.read {:path "a"})) (step "C" (call :shell.exec {:cmd "go"}))))`)
	if !d.Allowed {
		t.Fatal(d.Reasons)
	}
	if got := strings.Join(d.Capabilities, ","); got != "ccos.echo,fs.read,shell.exec" {
		t.Errorf("capabilities %s", got)
	}
	if got := strings.Join(d.Effects, ","); got != "fs,process" {
		t.Errorf("effects %s", got)
	}
	if d.Steps != 3 {
		t.Errorf("steps %d", d.Steps)
	}
}

func TestCheckCall(t *testing.T) {
	t.Parallel()
	k := kernel(t, Constitution{Deny: []string{"fs.write"}, ShellAllow: []string{"go"}})
	cmd := func(c string) rtfs.Value { return rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("cmd"), rtfs.String(c))) }
	if d := k.CheckCall("shell.exec", cmd("go")); !d.Allowed {
		t.Errorf("go refused: %v", d.Reasons)
	}
	if d := k.CheckCall("shell.exec", cmd("curl")); d.Allowed || !slices.Contains(d.RuleIDs, RuleShellAllow) {
		t.Errorf("curl: %+v", d)
	}
	if d := k.CheckCall("fs.write", rtfs.Nil); d.Allowed || !slices.Contains(d.RuleIDs, RuleDeny) {
		t.Errorf("fs.write: %+v", d)
	}
	if d := k.CheckCall("nope", rtfs.Nil); d.Allowed || !slices.Contains(d.RuleIDs, RuleKnownCapability) {
		t.Errorf("unknown: %+v", d)
	}
}

func TestPermits(t *testing.T) {
	t.Parallel()
	k := kernel(t, Constitution{Allow: []string{"ccos.*", "shell.exec"}, Deny: []string{"ccos.math.*"}})
	for id, want := range map[string]bool{"ccos.echo": true, "ccos.math.add": false, "shell.exec": true, "fs.read": false, "nope.x": false} {
		if got := k.Permits(id); got != want {
			t.Errorf("Permits(%s) = %v, want %v", id, got, want)
		}
	}
	if !kernel(t, Constitution{}).Permits("fs.read") {
		t.Error("an empty allow list permits every registered capability")
	}
}

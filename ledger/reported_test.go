package ledger

import (
	"testing"

	"github.com/ralphloop/ralph/rtfs"
)

func TestReportedFailure(t *testing.T) {
	t.Parallel()
	kw := rtfs.Keyword
	result := func(kvs ...rtfs.Value) rtfs.Value { return rtfs.MapValue(rtfs.NewMap(kvs...)) }
	call := func(success bool, meta map[string]rtfs.Value, res rtfs.Value) Action {
		return Action{Seq: 7, Type: CapabilityCall, FunctionName: "shell.exec", Success: success, Metadata: meta, Result: res, DurationMS: 4}
	}
	cases := []struct {
		name    string
		a       Action
		want    string
		summary string
	}{
		{"exit 0", call(true, map[string]rtfs.Value{"exit": rtfs.String("0")}, result(kw("exit"), rtfs.Int(0))), "",
			"#7 CapabilityCall shell.exec ok 4ms"},
		{"shell exit 1 under :check false", call(true, map[string]rtfs.Value{"exit": rtfs.String("1"), "cmd": rtfs.String("go")}, result(kw("exit"), rtfs.Int(1))),
			"exit 1", "#7 CapabilityCall shell.exec ! exit 1 4ms"},
		{"exit only in the result", call(true, nil, result(kw("exit"), rtfs.Int(2))), "exit 2", "#7 CapabilityCall shell.exec ! exit 2 4ms"},
		{"metadata wins over the result", call(true, map[string]rtfs.Value{"exit": rtfs.String("0")}, result(kw("exit"), rtfs.Int(2))), "",
			"#7 CapabilityCall shell.exec ok 4ms"},
		{"agent stopped", call(true, map[string]rtfs.Value{"exit": rtfs.String("-1")}, result(kw("exit"), rtfs.Int(-1), kw("stopped"), rtfs.String("idle-timeout"))),
			"idle-timeout", "#7 CapabilityCall shell.exec ! idle-timeout 4ms"},
		{"agent stopped in metadata", call(true, map[string]rtfs.Value{"stopped": rtfs.String("usage-limit")}, result(kw("exit"), rtfs.Int(0))),
			"usage-limit", "#7 CapabilityCall shell.exec ! usage-limit 4ms"},
		{"nil :stopped", call(true, nil, result(kw("exit"), rtfs.Int(0), kw("stopped"), rtfs.Nil)), "", "#7 CapabilityCall shell.exec ok 4ms"},
		{"failed call is already a failure", Action{Seq: 7, Type: CapabilityCall, FunctionName: "shell.exec", ErrorMessage: "go exited 1",
			Metadata: map[string]rtfs.Value{"exit": rtfs.String("1")}}, "", "#7 CapabilityCall shell.exec FAILED (go exited 1)"},
		{"not a call", Action{Seq: 7, Type: PlanStepCompleted, FunctionName: "Test", Success: true, Result: result(kw("exit"), rtfs.Int(1))},
			"", "#7 PlanStepCompleted Test ok"},
		{"string result", call(true, nil, rtfs.String("exit 1")), "", "#7 CapabilityCall shell.exec ok 4ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.a.ReportedFailure(); got != tc.want {
				t.Errorf("ReportedFailure = %q, want %q", got, tc.want)
			}
			if got := Summary(&tc.a); got != tc.summary {
				t.Errorf("Summary = %q, want %q", got, tc.summary)
			}
		})
	}
}

func TestReportedFailurePermissionDenied(t *testing.T) {
	t.Parallel()
	for _, ok := range []bool{true, false} {
		a := &Action{Type: CapabilityCall, Success: ok, Metadata: map[string]rtfs.Value{"denied": rtfs.String("Edit calc.go"), "exit": rtfs.String("0")}}
		if got := a.ReportedFailure(); got != "permission denied" {
			t.Errorf("success %t: ReportedFailure() = %q, want permission denied", ok, got)
		}
	}
}

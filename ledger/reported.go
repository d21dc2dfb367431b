package ledger

import (
	"strconv"

	"github.com/ralphloop/ralph/rtfs"
)

// ReportedFailure says how a capability call that ran to the end reported
// failure, or "" when it did not: the reason an agent call was stopped
// (":stopped", e.g. "idle-timeout"), else "exit N" for a process that
// exited non-zero (a shell.exec under :check false, an agent CLI). It reads
// the call's metadata ("stopped", "exit") first and its result map
// (:stopped, :exit) second, so either way of recording counts.
//
// An agent call that was refused a tool for want of permission (metadata
// "denied") reports "permission denied", whether or not it failed as a
// call.
//
// Such a call succeeded as a call (Success is true: the plan went on), yet
// what it ran failed; displays mark it "!" beside the reason. A failed call
// (Success false) reports "" here: it is already shown as failed.
func (a *Action) ReportedFailure() string {
	if a.Type == CapabilityCall && textOf(a.Metadata["denied"]) != "" {
		return "permission denied" // the agent ran, and was refused what it needed
	}
	if a.Type != CapabilityCall || !a.Success {
		return ""
	}
	res := a.Result.AsMap()
	if s := textOf(a.Metadata["stopped"]); s != "" {
		return s
	}
	if s := textOf(res.GetKey("stopped")); s != "" {
		return s
	}
	code := textOf(a.Metadata["exit"])
	if code == "" {
		code = textOf(res.GetKey("exit"))
	}
	if code == "" || code == "0" {
		return ""
	}
	return "exit " + code
}

// textOf is the text of a string, keyword or integer value; "" otherwise.
func textOf(v rtfs.Value) string {
	switch v.Kind() {
	case rtfs.KindString, rtfs.KindKeyword:
		return v.Str()
	case rtfs.KindInt:
		return strconv.FormatInt(v.AsInt(), 10)
	}
	return ""
}

package fleet

import "fmt"

// QueuedNote is what `ralph submit` tells the user once j is queued on
// the fleet at natsAt: where the run works, and the commands that list
// and follow it, with --creds credsFile when the user must name it
// ("" when the environment does).
func (j Job) QueuedNote(natsAt, credsFile string) string {
	where := "an empty directory"
	if j.Workspace != "" {
		where = fmt.Sprintf("%s at %s, on branch %s", j.Workspace, shortSHA(j.Ref), BranchName(j.RunID))
	}
	signIn := ""
	if credsFile != "" {
		signIn = " --creds " + credsFile // the submitter's credentials read states and chains too
	}
	return fmt.Sprintf("queued run %s on %s (works in %s); `ralph runs --nats %s%s` lists it, `ralph attach --nats %s%s %s` follows it once a worker takes it",
		j.RunID, natsAt, where, natsAt, signIn, natsAt, signIn, j.RunID)
}

// shortSHA is a commit for a message: its first 12 digits, or "its
// HEAD" for none.
func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "its HEAD"
	}
	return s
}

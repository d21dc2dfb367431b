package capability

import "slices"

// CommandAllowed reports whether the program cmd may run under allow
// ([governance].shell_allow): it must be listed by name, or by the exact
// path written in the list. Governance admits a plan's shell.exec calls
// with it, and shell.exec checks it again when it runs one.
func CommandAllowed(cmd string, allow []string) bool {
	return cmd != "" && slices.Contains(allow, cmd)
}

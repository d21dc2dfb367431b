// Package gitx runs git for ralph and keeps a run's checkpoints: a commit
// of the working tree per iteration, written with plumbing through a
// temporary index on hidden refs refs/ralph/<run-id>/<iteration>.
//
// Invariants: every git process runs in a process group of its own
// (internal/procgroup), with LC_ALL=C and without any GIT_* variable of
// the caller's environment, so what it prints can be parsed and no
// inherited GIT_DIR or GIT_INDEX_FILE can redirect it. Every git runs
// hardened (harden.go): the repository's .git is the agent's to write, so
// no hook, fsmonitor, pager, editor, signing program, filter, credential
// helper or ssh command it names is run; a repository config that names a
// program ralph cannot take back (core.gitProxy, a remote's uploadpack or
// receivepack) is refused. All of ralph's git goes through this package.
// A checkpoint never
// changes the user's HEAD, branch, index or stash: it writes only objects,
// its own index file under the git directory, and refs under refs/ralph/.
package gitx

// Package gitx runs git for ralph and keeps a run's checkpoints: a commit
// of the working tree per iteration, written with plumbing through a
// temporary index on hidden refs refs/ralph/<run-id>/<iteration>.
//
// Invariants: every git process runs in a process group of its own
// (internal/procgroup), with LC_ALL=C and without any GIT_* variable of
// the caller's environment, so what it prints can be parsed and no
// inherited GIT_DIR or GIT_INDEX_FILE can redirect it. A checkpoint never
// changes the user's HEAD, branch, index or stash: it writes only objects,
// its own index file under the git directory, and refs under refs/ralph/.
package gitx

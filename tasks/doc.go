// Package tasks is a backlog's parts (DESIGN §23): the task sources
// (prd.json user stories, a Markdown checklist, GitHub issues with a label,
// a Beads queue), each one descriptor row; the order tasks run in; the
// checkouts tasks work in; and the merge queue that lands a task on the
// target branch only when its success conditions hold on the merged tree.
//
// The batch runner that runs a task as a child run is tasks/batch.
//
// Sources: each is one row of Kinds, and nothing outside this package
// compares a source's name. A source is read by List and written only by
// MarkDone; a file source's file lies inside the repository, and marking
// a task done rewrites only that task's bytes of it ("passes", a box),
// through a temporary file renamed over it. Bad input is an *Error at its
// file:line:col. A GitHub token is never logged or part of an error.
//
// The checkouts and the queue (target*.go, checkout.go, queue*.go) hold
// that: every git they run goes through internal/gitx; the user's
// checkout, branch, index and stash are never touched, unless the target
// is the checked-out branch, which then moves only as git merge
// --ff-only would and only while its work tree is clean; the target
// moves only by compare-and-swap from the tip a merge started from, by
// one commit per task, whose tree is the one the success conditions held
// on plus the change that marks the task done, and whose message ends
// with the trailer "Ralph-Task: <batch>/<id>" (a task the target carries
// is never merged again); a Queue merges one task at a time.
package tasks

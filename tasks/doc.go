// Package tasks is a backlog's parts (DESIGN §23): the task sources
// (prd.json user stories, a Markdown checklist, GitHub issues with a label,
// a Beads queue), each one descriptor row; the order tasks run in; the
// checkouts tasks work in; and the merge queue that lands a task on the
// target branch only when its success conditions hold on the merged tree.
//
// The batch runner that runs a task as a child run is tasks/batch.
package tasks

// Package batch runs a backlog (DESIGN §23): each task of a source becomes
// a child run of one batch run, in its own checkout of the repository on
// ralph/<batch>/task/<ref>, up to Parallel at once; a task whose run ends
// green goes to the merge queue, which lands it on the target branch only
// when the batch's conditions that read the work tree hold on the merged
// tree; a conflict or a red re-run sends it back to its loop, with what
// happened in its prompt, at most Retries times.
//
// Invariants:
//   - A task is marked done in its source only through the queue's Edit,
//     in the merge checkout, after its conditions held on the merged tree:
//     never on the agent's word, never in the user's checkout.
//   - A batch is refused before it records anything when no success
//     condition reads the work tree (a command, file_exists,
//     file_contains): it could not tell green work from a claim.
//   - Every run of the batch records on the one store it was given (one
//     process, one Badger writer); the batch's own actions (BatchStarted,
//     TaskStarted, TaskEnded, TaskMerged) carry its run id, each
//     TaskStarted names the child run, and each child run's RunStarted and
//     record name the batch.
//   - TaskStarted is durable before its run starts; every run of a task
//     ends with one TaskEnded (final: false when it goes back to its
//     loop), and a merged task's TaskMerged comes before its last
//     TaskEnded.
//   - A task's run is built by assemble.NewRun from a copy of the loop's
//     config that differs only in its workdir (the checkout) and its
//     prompt (the loop's prompt, then the task's; TaskPrompt).
//   - At most Parallel loops run at once: a task takes a slot to start,
//     gives it back while it waits in the merge queue (with one attempt),
//     and takes one again before it goes back to its loop.
//   - A panic in one task's work ends that task with verdict error; the
//     other tasks go on.
package batch

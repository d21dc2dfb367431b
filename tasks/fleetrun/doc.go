// Package fleetrun runs a backlog's task runs on a fleet (DESIGN §23,
// `ralph submit --tasks`): it is the batch's Remote, binding tasks/batch to
// fleet. Each run of a task is one fleet job: the task's checkout is sent
// to the workspace repository the workers clone (tasks.Checkout.Send), the
// job starts from that commit with the task's prompt (fleet.JobTask), and
// the submitter follows the run's state until it ends; a green run's
// branch is fetched back into the checkout (tasks.Checkout.Receive), where
// the batch's merge queue, in the submitter's process, takes it as it
// takes a local run's work.
//
// Invariants: a job is queued only once its start commit is in the
// workspace repository; a run's work reaches the checkout only by a
// fast-forward from what was sent; a run the batch stops (its context
// ends) is sent an abort.
package fleetrun

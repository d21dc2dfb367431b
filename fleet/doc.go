// Package fleet runs ralph loops on NATS JetStream, across many workers on
// many machines (DESIGN §15): a work-queue stream of jobs, a KV bucket of
// run states, each run's chain replicated as it is written, controls on
// ralph.ctl.<run-id>, and failover that resumes a run elsewhere from its
// replicated chain.
//
// Invariants of a worker (RunWorker): a job is acked only after its run's
// closing action and end line are in the stream and its final state is in
// the bucket, and given up only by recording the run failed and
// terminating the job; an iteration's workspace commit is pushed only
// after its chain is in the stream; a worker that loses its run (fenced by
// the chain subject's last sequence, or refused by the bucket) records and
// pushes nothing more; a run handed back has no closing action.
package fleet

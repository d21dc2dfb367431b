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
// pushes nothing more; a run handed back has no closing action; a job
// runs only under the fleet key's signature (the keeper's, HeaderJobSig);
// a signed control or tunnel request acts at most once across the fleet
// (its nonce recorded in BucketNonces first).
//
// Invariants of the fleet's permissions (RolePermissions): a member
// listens only on its own inboxes and tunnels, publishes on no other
// member's but as one answer to a request; only the keeper makes or
// changes a stream or bucket; no member removes a chain line.
package fleet

// Package fleet runs ralph loops on NATS JetStream, across many workers on
// many machines (DESIGN §15): a work-queue stream of jobs, a KV bucket of
// run states, each run's chain replicated as it is written, controls on
// ralph.ctl.<run-id>, and failover that resumes a run elsewhere from its
// replicated chain.
package fleet

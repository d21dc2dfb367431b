package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The names every worker, submitter and reader agree on.
const (
	// StreamJobs is the work-queue stream of submitted jobs: one message per
	// run, removed once a worker acks it (the run ended).
	StreamJobs  = "RALPH_JOBS"
	SubjectJobs = "ralph.jobs"
	// ConsumerWorkers is the durable pull consumer every worker shares.
	ConsumerWorkers = "ralph-workers"
	// StreamChains holds every run's chain, one bundle line per message,
	// on ChainSubject(run id).
	StreamChains        = "RALPH_CHAINS"
	subjectChainsPrefix = "ralph.chain."
	// BucketRuns holds one RunState per run; BucketWorkers one WorkerState
	// per live worker (entries expire when a worker stops heartbeating).
	BucketRuns    = "ralph_runs"
	BucketWorkers = "ralph_workers"
	// BucketNonces records the nonce of every signed request a worker
	// took, for the time such a request is valid (identity.go): a request
	// taken by one worker is refused by every other.
	BucketNonces  = "ralph_nonces"
	subjectCtl    = "ralph.ctl."
	subjectTunnel = "ralph.tunnel."
	// A tunnel's frames travel on subjects under the key of the member who
	// opened it: up (member to worker) and down (worker to member).
	subjectTunnelUp   = "ralph.tunup."
	subjectTunnelDown = "ralph.tundown."
)

// nonceTTL is how long BucketNonces keeps a nonce: a signed request is
// valid from signedSkew before its time to signedSkew after it, so its
// nonce must be remembered at least 2*signedSkew; twice that, and a
// minute more, allows for workers' clocks that differ.
const nonceTTL = 4*signedSkew + time.Minute

// ChainSubject is the subject a run's chain is replicated on.
func ChainSubject(runID string) string { return subjectChainsPrefix + runID }

// CtlSubject is the subject a run's controls travel on.
func CtlSubject(runID string) string { return subjectCtl + runID }

// TunnelSubject is the subject a run's tunnels are opened on: apart from
// its controls, so that NATS permissions tell the two apart.
func TunnelSubject(runID string) string { return subjectTunnel + runID }

// Config is how the fleet's streams and buckets are made.
type Config struct {
	// Replicas of every stream and bucket: 1 on one node, 3 on a cluster.
	Replicas int
	// AckWait is how long a job's worker may go silent (no heartbeat)
	// before the job is delivered to another worker.
	AckWait time.Duration
	// Dedup is the stream's message-id deduplication window.
	Dedup time.Duration
	// WorkerTTL is how long a worker's entry outlives its last heartbeat.
	WorkerTTL time.Duration
}

// DefaultConfig is the one-machine fleet.
func DefaultConfig() Config {
	return Config{Replicas: 1, AckWait: 30 * time.Second, Dedup: 10 * time.Minute, WorkerTTL: 30 * time.Second}
}

// Handles are the fleet's streams, buckets and the workers' consumer.
type Handles struct {
	JS      jetstream.JetStream
	Jobs    jetstream.Stream
	Chains  jetstream.Stream
	Runs    jetstream.KeyValue
	Workers jetstream.KeyValue
	// Nonces is set by Ensure, and by a worker when it starts (only
	// workers use it; Bind leaves it nil).
	Nonces jetstream.KeyValue
}

// Ensure makes (or updates) the fleet's streams and buckets on any
// JetStream-enabled NATS, not only one that ralph fleet serve started. It
// is the keeper's alone (§17: only the keeper role may make or change a
// stream); it is idempotent. The chain stream denies deleting and purging
// messages: no member's request removes a chain line.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) (*Handles, error) {
	if c.Replicas < 1 {
		c.Replicas = 1
	}
	h := &Handles{JS: js}
	var err error
	h.Jobs, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name: StreamJobs, Subjects: []string{SubjectJobs}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Replicas: c.Replicas, Duplicates: c.Dedup,
	})
	if err != nil {
		return nil, fmt.Errorf("make stream %s: %w", StreamJobs, err)
	}
	h.Chains, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name: StreamChains, Subjects: []string{subjectChainsPrefix + ">"}, Retention: jetstream.LimitsPolicy,
		Storage: jetstream.FileStorage, Replicas: c.Replicas, Duplicates: c.Dedup, DenyDelete: true, DenyPurge: true,
	})
	if err != nil {
		return nil, fmt.Errorf("make stream %s: %w", StreamChains, err)
	}
	h.Runs, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket: BucketRuns, History: 8, Storage: jetstream.FileStorage, Replicas: c.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("make bucket %s: %w", BucketRuns, err)
	}
	h.Workers, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket: BucketWorkers, TTL: c.WorkerTTL, Storage: jetstream.FileStorage, Replicas: c.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("make bucket %s: %w", BucketWorkers, err)
	}
	h.Nonces, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket: BucketNonces, TTL: nonceTTL, Storage: jetstream.FileStorage, Replicas: c.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("make bucket %s: %w", BucketNonces, err)
	}
	return h, nil
}

// ensureStream makes stream c.Name, or updates it when it differs from c.
// A stream that is as c says is left alone: workers starting together
// then do not update it at once (nats-server's file store races with
// itself when an update meets a consumer being made).
func ensureStream(ctx context.Context, js jetstream.JetStream, c jetstream.StreamConfig) (jetstream.Stream, error) {
	if s, err := js.Stream(ctx, c.Name); err == nil {
		have := s.CachedInfo().Config
		if slices.Equal(have.Subjects, c.Subjects) && have.Retention == c.Retention && have.Storage == c.Storage &&
			have.Replicas == c.Replicas && (c.Duplicates == 0 || have.Duplicates == c.Duplicates) &&
			have.DenyDelete == c.DenyDelete && have.DenyPurge == c.DenyPurge {
			return s, nil
		}
	}
	return js.CreateOrUpdateStream(ctx, c)
}

// ensureBucket makes bucket c.Bucket, or updates it when it differs from
// c, as ensureStream does for a stream.
func ensureBucket(ctx context.Context, js jetstream.JetStream, c jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if kv, err := js.KeyValue(ctx, c.Bucket); err == nil {
		if st, err := kv.Status(ctx); err == nil {
			hist := c.History
			if hist == 0 {
				hist = 1
			}
			if st.History() == int64(hist) && st.TTL() == c.TTL && st.BackingStore() == "JetStream" {
				if info, ok := st.(*jetstream.KeyValueBucketStatus); ok && info.StreamInfo().Config.Replicas == c.Replicas {
					return kv, nil
				}
			}
		}
	}
	return js.CreateOrUpdateKeyValue(ctx, c)
}

// WorkerConsumer makes (or updates) the workers' shared pull consumer.
// Jobs are redelivered after ackWait without a heartbeat, without limit:
// a worker gives up on a job by recording it failed, never by dropping it.
func WorkerConsumer(ctx context.Context, jobs jetstream.Stream, ackWait time.Duration) (jetstream.Consumer, error) {
	c, err := jobs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: ConsumerWorkers, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("make consumer %s: %w", ConsumerWorkers, err)
	}
	return c, nil
}

// Bind finds the fleet's streams and buckets as they are, changing
// nothing: what a worker, a submitter or a viewer may do (only the keeper
// may make them, §17). A missing one is jetstream.ErrStreamNotFound or
// jetstream.ErrBucketNotFound.
func Bind(ctx context.Context, js jetstream.JetStream) (*Handles, error) {
	h := &Handles{JS: js}
	var err error
	if h.Jobs, err = js.Stream(ctx, StreamJobs); err != nil {
		return nil, fmt.Errorf("find stream %s: %w", StreamJobs, err)
	}
	if h.Chains, err = js.Stream(ctx, StreamChains); err != nil {
		return nil, fmt.Errorf("find stream %s: %w", StreamChains, err)
	}
	if h.Runs, err = js.KeyValue(ctx, BucketRuns); err != nil {
		return nil, fmt.Errorf("find bucket %s: %w", BucketRuns, err)
	}
	if h.Workers, err = js.KeyValue(ctx, BucketWorkers); err != nil {
		return nil, fmt.Errorf("find bucket %s: %w", BucketWorkers, err)
	}
	return h, nil
}

package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Job is one submitted run: the message a worker pulls from the job queue.
type Job struct {
	RunID      string    `json:"run_id"`
	Config     string    `json:"config"`      // the ralph.toml text as submitted
	ConfigPath string    `json:"config_path"` // relative to the workspace root ("ralph.toml")
	Workspace  string    `json:"workspace"`   // git URL ("" = no workspace: run in an empty dir)
	Ref        string    `json:"ref"`         // branch/tag/sha to start from ("" = remote HEAD)
	Submitted  time.Time `json:"submitted"`
	Agent      string    `json:"agent,omitempty"` // the agent CLI the job needs ("" none), checked by workers
	// SubmittedBy is the member who submitted the job, as the fleet's
	// keeper checked its signature (§17): the keeper sets it, and only
	// the keeper publishes jobs.
	SubmittedBy string `json:"submitted_by,omitempty"`
	// Task makes the job a run of a backlog's task (nil: a run of its own).
	Task *JobTask `json:"task,omitempty"`
}

// DefaultConfigPath is where a job's config lives in its workspace when
// the job does not say.
const DefaultConfigPath = "ralph.toml"

// Validate says in one sentence what is wrong with j, or nil.
func (j Job) Validate() error {
	if j.RunID == "" {
		return errors.New("the job has no run id; give it one from uuid.NewV7")
	}
	if _, err := uuid.Parse(j.RunID); err != nil || len(j.RunID) != 36 {
		return fmt.Errorf("the job's run id %q is not a UUID (8-4-4-4-12 hex digits); give it one from uuid.NewV7", j.RunID)
	}
	if strings.TrimSpace(j.Config) == "" {
		return fmt.Errorf("job %s has an empty config; submit the text of a ralph.toml", j.RunID)
	}
	if p := j.ConfigPath; p != "" {
		if path.IsAbs(p) || strings.Contains(p, `\`) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
			return fmt.Errorf("job %s: config path %q must be a clean path inside the workspace, such as %q", j.RunID, p, DefaultConfigPath)
		}
	}
	if strings.ContainsAny(j.Workspace+j.Ref+j.Agent, "\x00\n\r") {
		return fmt.Errorf("job %s: workspace, ref and agent must be single lines without NUL bytes", j.RunID)
	}
	if strings.HasPrefix(j.Ref, "-") {
		return fmt.Errorf("job %s: ref %q starts with '-', which git would read as an option; name a branch, tag or commit", j.RunID, j.Ref)
	}
	if j.Task != nil {
		return j.Task.Validate()
	}
	return nil
}

// ParseJob reads a job message; a job that does not decode or validate is
// an error naming what is wrong.
func ParseJob(data []byte) (Job, error) {
	var j Job
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return Job{}, fmt.Errorf("the job message is not a JSON job: %w", err)
	}
	if d.More() {
		return Job{}, errors.New("the job message holds more than one JSON value")
	}
	if err := j.Validate(); err != nil {
		return Job{}, err
	}
	return j, nil
}

// queue queues j (the keeper's side of Submit): it publishes the job on
// the work-queue stream, signed by the fleet key (HeaderJobSig), with the
// run id as its message id, then records the run as queued in the runs
// bucket. It is safe to retry: a run that already has a state was
// submitted before and is not queued again, the stream drops a duplicate
// publish within its deduplication window, and the queued state never
// overwrites a state a worker has written meanwhile. The job is published
// first so that no run is ever listed as queued without a job behind it.
func queue(ctx context.Context, h *Handles, j Job, fleetKey nkeys.KeyPair) error {
	if j.Submitted.IsZero() {
		j.Submitted = time.Now().UTC()
	}
	if err := j.Validate(); err != nil {
		return err
	}
	if _, found, err := GetState(ctx, h.Runs, j.RunID); err != nil {
		return err
	} else if found {
		return nil // submitted before: a retry after the state was written
	}
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", j.RunID, err)
	}
	sig, err := fleetKey.Sign(jobText(data))
	if err != nil {
		return fmt.Errorf("sign job %s: %w", j.RunID, err)
	}
	m := &nats.Msg{Subject: SubjectJobs, Data: data, Header: nats.Header{}}
	m.Header.Set(HeaderJobSig, base64.RawURLEncoding.EncodeToString(sig))
	if _, err := h.JS.PublishMsg(ctx, m, jetstream.WithMsgID(j.RunID)); err != nil {
		return fmt.Errorf("queue job %s on stream %s: %w", j.RunID, StreamJobs, err)
	}
	st := RunState{RunID: j.RunID, State: StateQueued, Workspace: j.Workspace, Submitted: j.Submitted, Updated: j.Submitted, SubmittedBy: j.SubmittedBy}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode the state of run %s: %w", j.RunID, err)
	}
	if _, err := h.Runs.Create(ctx, j.RunID, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("record run %s as queued in bucket %s: %w", j.RunID, BucketRuns, err)
	}
	return nil
}

// HeaderJobSig carries the fleet key's signature over a queued job's
// bytes (§17): the keeper signs every job it queues, and a worker runs
// only a job whose signature checks against the fleet key, so a message
// that reaches a worker by any other way (published in the keeper's
// place, or delivered to its inbox) runs nothing.
const HeaderJobSig = "Ralph-Job-Sig"

// jobText is what the fleet key signs for a job: the SHA-256 of its bytes.
func jobText(data []byte) []byte {
	sum := sha256.Sum256(data)
	return []byte("ralph-job v1\n" + hex.EncodeToString(sum[:]) + "\n")
}

// checkJob says why a job message (data, with signature header sig) was
// not queued by the keeper of the fleet whose key is fleetKey, or nil.
func checkJob(fleetKey string, data []byte, sig string) error {
	if sig == "" {
		return errors.New("the job is not signed by the fleet's keeper (no " + HeaderJobSig + " header); only jobs `ralph submit` queued through the keeper run")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("the job's %s header does not decode: %v", HeaderJobSig, err)
	}
	pub, err := nkeys.FromPublicKey(fleetKey)
	if err != nil {
		return fmt.Errorf("the fleet key %s is not an nkey: %v", shortKey(fleetKey), err)
	}
	if pub.Verify(jobText(data), raw) != nil {
		return fmt.Errorf("the job's signature is not the fleet key's (%s): it was changed on the way or forged", shortKey(fleetKey))
	}
	return nil
}

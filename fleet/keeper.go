package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// The keeper is the fleet's own service, run by `ralph fleet serve` beside
// its NATS server with a user of its own (§17). It alone may subscribe to
// the subjects under ralph.fleet., so an answer on them comes from the
// keeper and no one else. It answers:
//   - SubjectMembers: the roster (the fleet key and the members), which
//     workers check signed controls against;
//   - SubjectSubmit: a job signed by a submitter, which the keeper queues
//     with the submitter's name on it. Only the keeper publishes jobs and
//     records runs as queued, so a job's submitter is what the keeper
//     checked, and a submitter cannot write a run's state.
const (
	subjectKeeper  = "ralph.fleet."
	SubjectMembers = subjectKeeper + "members"
	SubjectSubmit  = subjectKeeper + "submit"
	// keeperQueue is the queue group of the keepers of a cluster's nodes:
	// each request is answered by one of them.
	keeperQueue = "ralph-keepers"
)

// RoleKeeper is the role of the keeper's own user: never a member's.
const RoleKeeper Role = "keeper"

// Keeper answers the fleet's own subjects.
type Keeper struct {
	nc   *nats.Conn
	dir  string
	subs []*nats.Subscription

	mu sync.Mutex
	h  *Handles
}

// StartKeeper answers the keeper's subjects on nc (a connection as a
// keeper) from the fleet directory dir, until Stop.
func StartKeeper(nc *nats.Conn, dir string) (*Keeper, error) {
	k := &Keeper{nc: nc, dir: dir}
	for subj, fn := range map[string]nats.MsgHandler{SubjectMembers: k.members, SubjectSubmit: k.submit, SubjectCertify: k.certify} {
		sub, err := nc.QueueSubscribe(subj, keeperQueue, fn)
		if err != nil {
			k.Stop()
			return nil, fmt.Errorf("serve %s: %w", subj, err)
		}
		k.subs = append(k.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		k.Stop()
		return nil, fmt.Errorf("serve the fleet's keeper: %w", err)
	}
	return k, nil
}

// Stop ends the keeper's subscriptions.
func (k *Keeper) Stop() {
	for _, s := range k.subs {
		_ = s.Unsubscribe() // fails only on a closed connection, which ended it anyway
	}
}

// Roster reads the fleet's members and its key from the fleet directory.
func ReadRoster(dir string) (Roster, error) {
	ms, err := LoadMembers(dir)
	if err != nil {
		return Roster{}, err
	}
	kp, err := readFleetKey(dir)
	if err != nil {
		return Roster{}, err
	}
	pub, _ := kp.PublicKey()
	return Roster{FleetKey: pub, Members: ms}, nil
}

// readFleetKey reads the fleet's signing key from dir.
func readFleetKey(dir string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(FleetKeyPath(dir))
	if err != nil {
		return nil, fmt.Errorf("read the fleet key: %w; restore %s from a copy, or start a new fleet directory", err, FleetKeyPath(dir))
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		return nil, fmt.Errorf("%s is not an nkey seed (%v); restore it from a copy", FleetKeyPath(dir), err)
	}
	return kp, nil
}

func (k *Keeper) members(m *nats.Msg) {
	r, err := ReadRoster(k.dir)
	if err != nil {
		respond(m, nil, err)
		return
	}
	respond(m, encodeRoster(r), nil)
}

// respond answers m with b, or with "error: " and err's sentence.
func respond(m *nats.Msg, b []byte, err error) {
	if m.Reply == "" {
		return
	}
	if err != nil {
		b = []byte(answer(err))
	}
	_ = m.Respond(b) // a requester that gave up is gone
}

// signedBy is the member of role who signed m for op, with the roster;
// when m is not that, it answers m with why and returns false.
func (k *Keeper) signedBy(m *nats.Msg, role Role, op string) (Member, Roster, bool) {
	r, err := ReadRoster(k.dir)
	if err != nil {
		respond(m, nil, err)
		return Member{}, r, false
	}
	who, err := verifySigned(m, r, nil, time.Now())
	if err == nil && who.Role != role {
		err = roleError(who, op, role)
	}
	if err != nil {
		respond(m, nil, err)
		return Member{}, r, false
	}
	return who, r, true
}

// submit queues a job a submitter signed.
func (k *Keeper) submit(m *nats.Msg) {
	who, _, ok := k.signedBy(m, RoleSubmitter, "submit a job")
	if !ok {
		return
	}
	j, err := ParseJob(m.Data)
	if err != nil {
		respond(m, nil, err)
		return
	}
	j.SubmittedBy = who.Name
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kp, err := readFleetKey(k.dir)
	var h *Handles
	if err == nil {
		h, err = k.handles(ctx)
	}
	if err == nil {
		err = queue(ctx, h, j, kp)
	}
	respond(m, []byte("ok"), err)
}

// handles binds the fleet's streams once they exist (the keeper makes
// them when it starts: fleet serve, or fleet keeper).
func (k *Keeper) handles(ctx context.Context) (*Handles, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.h != nil {
		return k.h, nil
	}
	js, err := jetstream.New(k.nc)
	if err != nil {
		return nil, err
	}
	h, err := Bind(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("the fleet has no streams yet (%v): the keeper makes them when it starts; restart `ralph fleet serve` or `ralph fleet keeper`", err)
	}
	k.h = h
	return h, nil
}

// FetchRoster asks the fleet's keeper for its roster.
func FetchRoster(ctx context.Context, nc *nats.Conn) (Roster, error) {
	b, err := keeperRequest(ctx, nc, &nats.Msg{Subject: SubjectMembers})
	if err != nil {
		return Roster{}, err
	}
	var r Roster
	if err := json.Unmarshal(b, &r); err != nil || r.FleetKey == "" {
		return Roster{}, fmt.Errorf("the fleet keeper's roster does not decode (%.80q)", b)
	}
	return r, nil
}

// Submit queues j through the fleet's keeper, signed by s (a submitter).
// It is safe to retry: the keeper queues a run id once.
func Submit(ctx context.Context, nc *nats.Conn, s *Signer, j Job) error {
	if j.Submitted.IsZero() {
		j.Submitted = time.Now().UTC()
	}
	if err := j.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", j.RunID, err)
	}
	m := &nats.Msg{Subject: SubjectSubmit, Data: data}
	if err := s.Sign(m); err != nil {
		return err
	}
	b, err := keeperRequest(ctx, nc, m)
	if err != nil {
		return fmt.Errorf("submit job %s: %w", j.RunID, err)
	}
	if string(b) != "ok" {
		return fmt.Errorf("the fleet keeper answered %.120q to job %s", b, j.RunID)
	}
	return nil
}

// keeperRequest sends m to the keeper and returns its answer; an
// "error: …" answer is returned as that error.
func keeperRequest(ctx context.Context, nc *nats.Conn, m *nats.Msg) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ctlTimeout)
		defer cancel()
	}
	reply, err := nc.RequestMsgWithContext(ctx, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("no fleet keeper answers on %s: `ralph fleet serve` runs one; on a NATS server of your own, run `ralph fleet keeper` beside it", m.Subject)
	case err != nil:
		return nil, fmt.Errorf("ask the fleet keeper (%s): %w", m.Subject, err)
	}
	if err := answerError(string(reply.Data)); err != nil {
		return nil, err
	}
	return reply.Data, nil
}

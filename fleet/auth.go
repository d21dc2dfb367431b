package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// A fleet's members are NATS nkey users (§17): each holds the seed of a
// user nkey in a credentials file, and the server knows its public key and
// its role, which is a set of NATS subject permissions. The fleet directory
// keeps the users (users.json), their credentials files (creds/NAME.creds)
// and the fleet's signing key (fleet.nk).

// Role is what a fleet member may do.
type Role string

// The fleet's roles.
const (
	RoleWorker    Role = "worker"
	RoleSubmitter Role = "submitter"
	RoleViewer    Role = "viewer"
)

// Roles are the roles in the order they are listed.
var Roles = []Role{RoleWorker, RoleSubmitter, RoleViewer}

// ParseRole reads a role name: one of Roles, or keeper (the fleet's
// keeper on a NATS server of your own, `ralph fleet keeper`).
func ParseRole(s string) (Role, error) {
	for _, r := range append(Roles[:len(Roles):len(Roles)], RoleKeeper) {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("%q is not a role; pass --role worker, submitter, viewer or keeper", s)
}

// Member is one user of the fleet.
type Member struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Key is the public user nkey (U…) the member signs the server's
	// challenge with.
	Key string `json:"key"`
}

const (
	usersFile    = "users.json"
	credsDir     = "creds"
	fleetKeyFile = "fleet.nk"
)

// CredsPath is where the fleet directory keeps member name's credentials.
func CredsPath(dir, name string) string { return filepath.Join(dir, credsDir, name+".creds") }

// FleetKeyPath is the fleet's signing key (an nkey seed) in dir.
func FleetKeyPath(dir string) string { return filepath.Join(dir, fleetKeyFile) }

var memberName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// InitAuth makes the fleet directory's users on first start: one member per
// role, named after it, and the fleet key. A directory that has users is
// left as it is. It returns the members it made (none when they existed).
func InitAuth(dir string) ([]Member, error) {
	if err := os.MkdirAll(filepath.Join(dir, credsDir), 0o700); err != nil {
		return nil, fmt.Errorf("make the fleet directory %s: %w; pass --dir DIR", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the fleet directory %s private: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, usersFile)); err == nil {
		return nil, nil
	}
	if _, err := os.Stat(FleetKeyPath(dir)); errors.Is(err, os.ErrNotExist) {
		kp, err := nkeys.CreateAccount()
		if err != nil {
			return nil, err
		}
		seed, _ := kp.Seed()
		if err := writePrivate(FleetKeyPath(dir), append(seed, '\n')); err != nil {
			return nil, err
		}
	}
	var made []Member
	for _, r := range Roles {
		m, err := AddMember(dir, string(r), r)
		if err != nil {
			return nil, err
		}
		made = append(made, m)
	}
	return made, nil
}

// LoadMembers reads the fleet's users from dir.
func LoadMembers(dir string) ([]Member, error) {
	p := filepath.Join(dir, usersFile)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the fleet's users: %w", err)
	}
	var ms []Member
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("%s: not the fleet's users (%v); restore it or remove the fleet directory to start over", p, err)
	}
	for i, m := range ms {
		if _, err := ParseRole(string(m.Role)); err != nil || !nkeys.IsValidPublicUserKey(m.Key) || !memberName.MatchString(m.Name) {
			return nil, fmt.Errorf("%s: user %d (%q) is not a name, a role and a user nkey; `ralph fleet creds revoke` it and add it again", p, i+1, m.Name)
		}
	}
	return ms, nil
}

// AddMember makes a new user name with role r: a user nkey whose seed goes
// to the credentials file CredsPath(dir, name) (0600) and whose public key
// goes to the fleet's users.
func AddMember(dir, name string, r Role) (Member, error) {
	if !memberName.MatchString(name) {
		return Member{}, fmt.Errorf("%q is not a member name; use letters, digits, - and _ (at most 64)", name)
	}
	ms, err := LoadMembers(dir)
	if err != nil {
		return Member{}, err
	}
	for _, m := range ms {
		if m.Name == name {
			return Member{}, fmt.Errorf("the fleet already has a member %s (%s); revoke it first or pick another name", name, m.Role)
		}
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return Member{}, err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	if err := os.MkdirAll(filepath.Join(dir, credsDir), 0o700); err != nil {
		return Member{}, err
	}
	if err := writePrivate(CredsPath(dir, name), credsText(seed)); err != nil {
		return Member{}, err
	}
	m := Member{Name: name, Role: r, Key: pub}
	if err := saveMembers(dir, append(ms, m)); err != nil {
		os.Remove(CredsPath(dir, name))
		return Member{}, err
	}
	return m, nil
}

// RevokeMember removes user name and its credentials file.
func RevokeMember(dir, name string) error {
	ms, err := LoadMembers(dir)
	if err != nil {
		return err
	}
	kept := ms[:0:0]
	found := false
	for _, m := range ms {
		if m.Name == name {
			found = true
			continue
		}
		kept = append(kept, m)
	}
	if !found {
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		return fmt.Errorf("the fleet in %s has no member %q (it has %s); pass one of those", dir, name, strings.Join(names, ", "))
	}
	if err := saveMembers(dir, kept); err != nil {
		return err
	}
	if err := os.Remove(CredsPath(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func saveMembers(dir string, ms []Member) error {
	b, err := json.MarshalIndent(ms, "", "  ")
	if err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, usersFile), append(b, '\n'))
}

// writePrivate writes a 0600 file whole: a temporary file renamed over it,
// so a server reloading its users never reads half a file.
func writePrivate(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

// credsText is a credentials file: the user's seed, decorated as nsc writes
// one, which nats.NkeyOptionFromSeed reads.
func credsText(seed []byte) []byte {
	return []byte("-----BEGIN USER NKEY SEED-----\n" + string(seed) + "\n------END USER NKEY SEED------\n\n" +
		"*************************************************************\n" +
		"NKEY Seed printed below can be used to sign and prove identity.\n" +
		"NKEYs are sensitive and should be treated as secrets.\n" +
		"*************************************************************\n")
}

// NkeyUsers are the server's users for members ms, each with its role's
// permissions.
func NkeyUsers(ms []Member) []*server.NkeyUser {
	us := make([]*server.NkeyUser, 0, len(ms))
	for _, m := range ms {
		us = append(us, &server.NkeyUser{Nkey: m.Key, Permissions: RolePermissions(m.Role, m.Key)})
	}
	return us
}

// InboxPrefix is the inbox prefix of the member whose public key is key:
// its connections take their reply subjects under it
// (nats.CustomInboxPrefix), and only it may subscribe there, so the
// answers to its requests and the jobs delivered to it reach no one else.
func InboxPrefix(key string) string { return "_INBOX_" + key }

// readSubjects are the JetStream API requests every role may make: those
// that read a stream or a bucket.
func readSubjects() []string {
	pub := []string{
		"$JS.API.INFO",
		"$JS.FC.>", // flow control answers of an ordered consumer
	}
	for _, s := range []string{StreamChains, kvStream(BucketRuns), kvStream(BucketWorkers)} {
		pub = append(pub,
			"$JS.API.STREAM.INFO."+s,
			"$JS.API.STREAM.MSG.GET."+s,
			"$JS.API.DIRECT.GET."+s, "$JS.API.DIRECT.GET."+s+".>",
			"$JS.API.CONSUMER.CREATE."+s, "$JS.API.CONSUMER.CREATE."+s+".>",
			"$JS.API.CONSUMER.INFO."+s+".>",
			"$JS.API.CONSUMER.DELETE."+s+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+s+".>",
		)
	}
	return append(pub, "$JS.API.STREAM.INFO."+StreamJobs)
}

// RolePermissions are the NATS subject permissions of the member with
// role r and public key key. Every role reads states and chains (the
// JetStream API requests that read a stream or a bucket) and subscribes
// to its own inboxes only (InboxPrefix); no role publishes on an inbox but
// as the one answer to a request it received (allow_responses), so no one
// delivers a job or answers a request in another's place. Beyond that a
// worker consumes jobs, writes states, chain lines and the nonces of the
// signed requests it took, and answers controls and tunnels; a submitter
// queues jobs through the keeper, sends controls and opens tunnels; a
// viewer opens tunnels; the keeper alone makes and changes the fleet's
// streams and buckets, publishes jobs and records runs as queued. A
// tunnel's frames travel on subjects named for the member that opened
// it: only that member sends on its up subject and listens on its down
// subject, and only workers do the other ends.
func RolePermissions(r Role, key string) *server.Permissions {
	pub := readSubjects()
	sub := []string{InboxPrefix(key) + ".>"}
	var resp *server.ResponsePermission
	switch r {
	case RoleWorker:
		pub = append(pub,
			"$JS.API.CONSUMER.CREATE."+StreamJobs+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+StreamJobs+"."+ConsumerWorkers,
			"$JS.API.CONSUMER.INFO."+StreamJobs+"."+ConsumerWorkers,
			"$JS.API.CONSUMER.MSG.NEXT."+StreamJobs+"."+ConsumerWorkers,
			"$JS.ACK."+StreamJobs+".>",
			"$JS.API.STREAM.MSG.GET."+StreamJobs,
			"$JS.API.DIRECT.GET."+StreamJobs, "$JS.API.DIRECT.GET."+StreamJobs+".>",
			"$JS.API.STREAM.INFO."+kvStream(BucketNonces),
			"$JS.API.STREAM.MSG.GET."+kvStream(BucketNonces),
			"$JS.API.DIRECT.GET."+kvStream(BucketNonces), "$JS.API.DIRECT.GET."+kvStream(BucketNonces)+".>",
			subjectChainsPrefix+">",
			"$KV."+BucketRuns+".>",
			"$KV."+BucketWorkers+".>",
			"$KV."+BucketNonces+".>",
			SubjectMembers, SubjectCertify,
			subjectTunnelDown+">",
		)
		sub = append(sub, subjectCtl+">", subjectTunnel+">", subjectTunnelUp+">")
		resp = answers()
	case RoleSubmitter:
		// Jobs go through the keeper, which checks the submitter's
		// signature and alone publishes them and records them as queued.
		pub = append(pub, SubjectSubmit, SubjectMembers, subjectCtl+">", subjectTunnel+">", subjectTunnelUp+key+".>")
		sub = append(sub, subjectTunnelDown+key+".>")
	case RoleViewer:
		// A viewer's tunnels serve reads only (the worker checks the
		// signature of the request that opens one).
		pub = append(pub, SubjectMembers, subjectTunnel+">", subjectTunnelUp+key+".>")
		sub = append(sub, subjectTunnelDown+key+".>")
	case RoleKeeper:
		for _, s := range []string{StreamJobs, StreamChains, kvStream(BucketRuns), kvStream(BucketWorkers), kvStream(BucketNonces)} {
			pub = append(pub, "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s, "$JS.API.STREAM.INFO."+s)
		}
		pub = append(pub, SubjectJobs, "$KV."+BucketRuns+".>")
		sub = append(sub, subjectKeeper+">")
		resp = answers()
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: dedup(pub)},
		Subscribe: &server.SubjectPermission{Allow: sub},
		Response:  resp,
	}
}

// answers lets a responder publish one answer to each request it
// received, within NATS's default two minutes (allow_responses: true).
func answers() *server.ResponsePermission {
	return &server.ResponsePermission{MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}
}

// dedup is ss without repeats, in first-seen order.
func dedup(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// kvStream is the stream behind bucket b.
func kvStream(b string) string { return "KV_" + b }

// CredsOption is the nats.Connect option that signs in with the
// credentials file at path (a user nkey seed, as CredsPath holds) and
// takes the member's reply subjects under its own InboxPrefix, the only
// inboxes its role may listen on.
func CredsOption(path string) (nats.Option, error) {
	o, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("cannot read the credentials file %s (%v); pass --creds FILE with a file `ralph fleet creds add` wrote", path, pe.Err)
		}
		return nil, fmt.Errorf("%s holds no fleet credentials (%v); pass --creds FILE with a file `ralph fleet creds add` wrote", path, err)
	}
	s, err := LoadSigner(path)
	if err != nil {
		return nil, err
	}
	inbox := nats.CustomInboxPrefix(InboxPrefix(s.Key()))
	return func(opts *nats.Options) error {
		if err := o(opts); err != nil {
			return err
		}
		return inbox(opts)
	}, nil
}

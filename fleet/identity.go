package fleet

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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

// NATS tells a responder nothing of who sent a request (§17), so a request
// that acts on the fleet (a submit, a control, a tunnel) carries its
// sender's signature in NATS headers: the sender's public user nkey, the
// time and a nonce, and an ed25519 signature by that nkey over the
// subject, the time, the nonce and the SHA-256 of the body. The receiver
// looks the key up among the fleet's members (the roster the fleet's
// keeper answers with) and so learns the member's name and role.
const (
	HeaderSigner = "Ralph-Signer"
	HeaderSig    = "Ralph-Sig"
	HeaderAt     = "Ralph-At"
	HeaderNonce  = "Ralph-Nonce"
)

// signedSkew bounds how far a signed request's time may be from the
// receiver's clock: older requests are refused, so a recorded one cannot
// be sent again later, and within the window a nonce is accepted once.
const signedSkew = 2 * time.Minute

// Signer signs requests as one fleet member.
type Signer struct {
	kp  nkeys.KeyPair
	key string
}

// LoadSigner reads the member's user nkey from a credentials file (as
// CredsPath holds and `ralph fleet creds add` writes).
func LoadSigner(credsPath string) (*Signer, error) {
	b, err := os.ReadFile(credsPath)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read the credentials file %s (%v); pass --creds FILE with a file `ralph fleet creds add` wrote", credsPath, err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s holds no fleet credentials (%v); pass --creds FILE with a file `ralph fleet creds add` wrote", credsPath, err)
	}
	key, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", credsPath, err)
	}
	return &Signer{kp: kp, key: key}, nil
}

// Key is the signer's public user nkey.
func (s *Signer) Key() string { return s.key }

// Sign sets m's signature headers for its subject and data.
func (s *Signer) Sign(m *nats.Msg) error {
	var n [12]byte
	if _, err := rand.Read(n[:]); err != nil {
		return err
	}
	at := time.Now().UTC().Format(time.RFC3339Nano)
	nonce := hex.EncodeToString(n[:])
	sig, err := s.kp.Sign(signedText(m.Subject, at, nonce, m.Data))
	if err != nil {
		return fmt.Errorf("sign the request: %w", err)
	}
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	m.Header.Set(HeaderSigner, s.key)
	m.Header.Set(HeaderAt, at)
	m.Header.Set(HeaderNonce, nonce)
	m.Header.Set(HeaderSig, base64.RawURLEncoding.EncodeToString(sig))
	return nil
}

func signedText(subject, at, nonce string, data []byte) []byte {
	sum := sha256.Sum256(data)
	return []byte("ralph-request v1\n" + subject + "\n" + at + "\n" + nonce + "\n" + hex.EncodeToString(sum[:]) + "\n")
}

// Roster is the fleet as its keeper answers SubjectMembers: the fleet's
// signing key and its members.
type Roster struct {
	// FleetKey is the public key of the fleet's signing key.
	FleetKey string   `json:"fleet_key"`
	Members  []Member `json:"members"`
}

// Member is the member whose public key is key.
func (r Roster) Member(key string) (Member, bool) {
	for _, m := range r.Members {
		if m.Key == key {
			return m, true
		}
	}
	return Member{}, false
}

// nonceBook says whether a signed request's nonce is fresh: first seen
// now. A request is taken once across the fleet (kvNonces) or, where no
// fleet is at hand, once in this process (nonces).
type nonceBook interface {
	fresh(id string, now time.Time) (bool, error)
}

// nonces remembers the nonces of the signed requests accepted within the
// skew window in this process, so that none is accepted twice here.
type nonces struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (n *nonces) fresh(nonce string, now time.Time) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string]time.Time{}
	}
	for k, t := range n.seen {
		if now.Sub(t) > 2*signedSkew {
			delete(n.seen, k)
		}
	}
	if _, ok := n.seen[nonce]; ok {
		return false, nil
	}
	n.seen[nonce] = now
	return true, nil
}

// kvNonces is the fleet's record of taken nonces, bucket BucketNonces:
// the first worker to take a request creates its nonce's key, and every
// later one (on any worker) finds it there. Its entries outlive the skew
// window (nonceTTL), after which the request's time refuses it anyway.
type kvNonces struct{ kv jetstream.KeyValue }

func (n kvNonces) fresh(id string, _ time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	sum := sha256.Sum256([]byte(id))
	_, err := n.kv.Create(ctx, hex.EncodeToString(sum[:]), nil)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("record the request's nonce in bucket %s: %w", BucketNonces, err)
	}
	return true, nil
}

// verifySigned says which member signed m, or why m cannot be taken as
// any member's: no signature, a key that is not a member's (revoked or of
// another fleet), a bad signature, a time outside the skew window, or a
// nonce seen before.
func verifySigned(m *nats.Msg, r Roster, seen nonceBook, now time.Time) (Member, error) {
	key, sig, at, nonce := m.Header.Get(HeaderSigner), m.Header.Get(HeaderSig), m.Header.Get(HeaderAt), m.Header.Get(HeaderNonce)
	if key == "" || sig == "" || at == "" || nonce == "" {
		return Member{}, refused(errors.New("the request is not signed by a fleet member; send it with ralph, signed in with --creds FILE"))
	}
	mem, ok := r.Member(key)
	if !ok {
		return Member{}, refused(fmt.Errorf("the request is signed by %s, which is not a member of this fleet (revoked, or of another fleet); sign in with credentials `ralph fleet creds add` wrote", shortKey(key)))
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return Member{}, refused(fmt.Errorf("the request's signature by %s does not decode; send it again with ralph", mem.Name))
	}
	pub, err := nkeys.FromPublicKey(key)
	if err != nil {
		return Member{}, refused(fmt.Errorf("the request's signer %s is not a user nkey", shortKey(key)))
	}
	if err := pub.Verify(signedText(m.Subject, at, nonce, m.Data), raw); err != nil {
		return Member{}, refused(fmt.Errorf("the request's signature does not match member %s's key; it was changed on the way or forged", mem.Name))
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || t.Sub(now) > signedSkew || now.Sub(t) > signedSkew {
		return Member{}, refused(fmt.Errorf("the request of member %s was signed at %s, more than %s from this machine's clock %s; check both clocks and send it again", mem.Name, at, signedSkew, now.UTC().Format(time.RFC3339)))
	}
	if seen != nil {
		ok, err := seen.fresh(key+"/"+nonce, now)
		if err != nil {
			return Member{}, fmt.Errorf("the worker cannot check that the request of member %s is new: %w", mem.Name, err)
		}
		if !ok {
			return Member{}, refused(fmt.Errorf("the request of member %s was received before (a replay); send a new one", mem.Name))
		}
	}
	return mem, nil
}

// RefusedError is a request the fleet refused for who sent it: not
// signed, not a member, or a member whose role or ownership does not allow
// it. It travels as an answer beginning "refused: ".
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

const refusedPrefix = "refused: "

// answer is the reply text for err: "refused: …" for a RefusedError,
// else "error: …".
func answer(err error) string {
	var r *RefusedError
	if errors.As(err, &r) {
		return refusedPrefix + r.Msg
	}
	return "error: " + err.Error()
}

// answerError reads a reply: "refused: …" and "error: …" become errors.
func answerError(reply string) error {
	if msg, ok := strings.CutPrefix(reply, refusedPrefix); ok {
		return &RefusedError{Msg: msg}
	}
	if msg, ok := strings.CutPrefix(reply, "error: "); ok {
		return errors.New(msg)
	}
	return nil
}

func refused(err error) error {
	if err == nil {
		return nil
	}
	return &RefusedError{Msg: err.Error()}
}

// shortKey is a public key as messages name it: its first 12 characters.
func shortKey(k string) string {
	if len(k) > 12 {
		return k[:12] + "…"
	}
	return k
}

// roleAnswer is the keeper's answer when the request's signer lacks the
// role an operation needs.
func roleError(m Member, op string, need ...Role) error {
	return refused(roleText(m, op, need...))
}

func roleText(m Member, op string, need ...Role) error {
	names := make([]string, len(need))
	for i, r := range need {
		names[i] = string(r)
	}
	return fmt.Errorf("member %s is a %s and may not %s (that needs a %s); sign in with --creds FILE of a %s", m.Name, m.Role, op, strings.Join(names, " or "), names[0])
}

func encodeRoster(r Roster) []byte {
	b, _ := json.Marshal(r) // a struct of strings always encodes
	return b
}

package fleet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// A worker's chain key is certified by the fleet key when the worker first
// publishes a segment under it (§17): the worker asks the keeper on
// SubjectCertify, signed with its worker credentials, and the keeper signs
// the key and the worker's name with the fleet key. The certificate rides
// on the segment's key line as two headers, so the bundle lines stay as
// they are; readers and rebuilding workers given the fleet key accept a
// segment only under a key it certified.
const (
	SubjectCertify = subjectKeeper + "certify"

	HeaderCertWorker = "Ralph-Cert-Worker"
	HeaderCertSig    = "Ralph-Cert-Sig"
)

// Certificate is the fleet key's signature over a worker's chain key.
type Certificate struct {
	FleetKey string `json:"fleet_key"`
	Worker   string `json:"worker"`
	Key      string `json:"key"`
	Sig      string `json:"sig"`
}

func certText(fleetKey, worker, key string) []byte {
	return []byte("ralph-worker-key v1\nfleet " + fleetKey + "\nworker " + worker + "\nkey " + key + "\n")
}

// headers are the key line's certificate headers.
func (c Certificate) headers(h nats.Header) {
	h.Set(HeaderCertWorker, c.Worker)
	h.Set(HeaderCertSig, c.Sig)
}

// checkCert says why the key line with headers h does not carry fleet key
// fleetKey's certificate of key, or nil when it does.
func checkCert(fleetKey, key string, worker, sig string) error {
	if worker == "" || sig == "" {
		return fmt.Errorf("key %s is not certified by fleet key %s (its key line carries no certificate)", shortKey(key), shortKey(fleetKey))
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("key %s is not certified by fleet key %s (its certificate does not decode)", shortKey(key), shortKey(fleetKey))
	}
	pub, err := nkeys.FromPublicKey(fleetKey)
	if err != nil {
		return fmt.Errorf("the fleet key %s is not an nkey: %v", shortKey(fleetKey), err)
	}
	if pub.Verify(certText(fleetKey, worker, key), raw) != nil {
		return fmt.Errorf("key %s is not certified by fleet key %s (its certificate for worker %q is signed by another key)", shortKey(key), shortKey(fleetKey), worker)
	}
	return nil
}

// certify answers a worker's request for its chain key's certificate.
func (k *Keeper) certify(m *nats.Msg) {
	who, r, ok := k.signedBy(m, RoleWorker, "have a chain key certified")
	if !ok {
		return
	}
	key := strings.TrimSpace(string(m.Data))
	if key == "" || len(key) > 256 || strings.ContainsAny(key, " \n") {
		respond(m, nil, fmt.Errorf("%.60q is not a chain verifier key", key))
		return
	}
	kp, err := readFleetKey(k.dir)
	if err != nil {
		respond(m, nil, err)
		return
	}
	sig, err := kp.Sign(certText(r.FleetKey, who.Name, key))
	if err != nil {
		respond(m, nil, err)
		return
	}
	b, _ := json.Marshal(Certificate{FleetKey: r.FleetKey, Worker: who.Name, Key: key, Sig: base64.RawURLEncoding.EncodeToString(sig)})
	respond(m, b, nil)
}

// Certify asks the fleet's keeper to certify chain verifier key key for
// the worker signer signs as.
func Certify(ctx context.Context, nc *nats.Conn, signer *Signer, key string) (Certificate, error) {
	m := &nats.Msg{Subject: SubjectCertify, Data: []byte(key)}
	if err := signer.Sign(m); err != nil {
		return Certificate{}, err
	}
	b, err := keeperRequest(ctx, nc, m)
	if err != nil {
		return Certificate{}, fmt.Errorf("certify the chain key: %w", err)
	}
	var c Certificate
	if err := json.Unmarshal(b, &c); err != nil || c.Key != key {
		return Certificate{}, fmt.Errorf("the fleet keeper's certificate does not decode or is for another key (%.80q)", b)
	}
	if err := checkCert(c.FleetKey, key, c.Worker, c.Sig); err != nil {
		return Certificate{}, err
	}
	return c, nil
}

// certCache keeps a worker's certificates by chain key.
type certCache struct {
	mu sync.Mutex
	m  map[string]Certificate
}

func (cc *certCache) get(ctx context.Context, nc *nats.Conn, signer *Signer, key string) (Certificate, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if c, ok := cc.m[key]; ok {
		return c, nil
	}
	c, err := Certify(ctx, nc, signer, key)
	if err != nil {
		return c, err
	}
	if cc.m == nil {
		cc.m = map[string]Certificate{}
	}
	cc.m[key] = c
	return c, nil
}

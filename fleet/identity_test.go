package fleet

import (
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A signed request is taken only from a member, with its signature over
// exactly what arrived, within the clock skew, once.
func TestVerifySigned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	if _, err := InitAuth(dir); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRoster(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(CredsPath(dir, "submitter"))
	if err != nil {
		t.Fatal(err)
	}
	sign := func(subject, body string) *nats.Msg {
		m := &nats.Msg{Subject: subject, Data: []byte(body)}
		if err := s.Sign(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	now := time.Now()
	var seen nonces
	m := sign("ralph.ctl.x", "pause")
	who, err := verifySigned(m, r, &seen, now)
	if err != nil || who.Name != "submitter" || who.Role != RoleSubmitter {
		t.Fatalf("a good request: %+v, %v", who, err)
	}
	cases := []struct {
		name string
		msg  func() *nats.Msg
		at   time.Time
		want string
	}{
		{"replayed", func() *nats.Msg { return m }, now, "was received before (a replay)"},
		{"another subject", func() *nats.Msg {
			x := sign("ralph.ctl.x", "pause")
			x.Subject = "ralph.ctl.y"
			return x
		}, now, "does not match member submitter's key"},
		{"another body", func() *nats.Msg {
			x := sign("ralph.ctl.x", "pause")
			x.Data = []byte("abort")
			return x
		}, now, "does not match member submitter's key"},
		{"old", func() *nats.Msg { return sign("ralph.ctl.x", "pause") }, now.Add(3 * time.Minute), "more than 2m0s from this machine's clock"},
		{"from the future", func() *nats.Msg { return sign("ralph.ctl.x", "pause") }, now.Add(-3 * time.Minute), "more than 2m0s from this machine's clock"},
		{"unsigned", func() *nats.Msg { return &nats.Msg{Subject: "ralph.ctl.x", Data: []byte("pause")} }, now, "is not signed by a fleet member"},
		{"bad signature", func() *nats.Msg {
			x := sign("ralph.ctl.x", "pause")
			x.Header.Set(HeaderSig, "!!")
			return x
		}, now, "does not decode"},
	}
	for _, c := range cases {
		_, err := verifySigned(c.msg(), r, &seen, c.at)
		var re *RefusedError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errorsAs(err, &re) {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.want)
		}
	}
	// Revoked: the key is no longer in the roster.
	if err := RevokeMember(dir, "submitter"); err != nil {
		t.Fatal(err)
	}
	r2, _ := ReadRoster(dir)
	if _, err := verifySigned(sign("ralph.ctl.x", "pause"), r2, &seen, now); err == nil || !strings.Contains(err.Error(), "not a member of this fleet") {
		t.Errorf("a revoked member's request: %v", err)
	}
}

// A certificate holds for the key and worker it names, under the fleet
// key that made it, and for nothing else.
func TestCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	if _, err := InitAuth(dir); err != nil {
		t.Fatal(err)
	}
	kp, err := readFleetKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fk, _ := kp.PublicKey()
	sig, _ := kp.Sign(certText(fk, "w1", "ralph/abc"))
	c := Certificate{FleetKey: fk, Worker: "w1", Key: "ralph/abc", Sig: b64(sig)}
	if err := checkCert(fk, "ralph/abc", c.Worker, c.Sig); err != nil {
		t.Fatalf("a good certificate: %v", err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if _, err := InitAuth(other); err != nil {
		t.Fatal(err)
	}
	r, _ := ReadRoster(other)
	for name, err := range map[string]error{
		"another key":    checkCert(fk, "ralph/abd", c.Worker, c.Sig),
		"another worker": checkCert(fk, "ralph/abc", "w2", c.Sig),
		"another fleet":  checkCert(r.FleetKey, "ralph/abc", c.Worker, c.Sig),
		"no certificate": checkCert(fk, "ralph/abc", "", ""),
		"garbage":        checkCert(fk, "ralph/abc", "w1", "%%%"),
	} {
		if err == nil || !strings.Contains(err.Error(), "is not certified by fleet key") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func errorsAs(err error, target **RefusedError) bool { return errors.As(err, target) }

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/internal/usage"
)

// DialTimeout bounds connecting to NATS and each JetStream request a
// command makes while it sets up.
const DialTimeout = 5 * time.Second

// SignIn is how one fleet command signs in to NATS (§17): Creds (else
// RALPH_NATS_CREDS), the credentials file of a fleet member, and TLSCA,
// the CA that signed the server's certificate.
type SignIn struct {
	Creds, TLSCA string
	// InProcess, when set, connects to the server in this process
	// (ralph fleet serve making its own streams).
	InProcess nats.InProcessConnProvider
	// Makes: this command makes or updates the fleet's streams (the
	// keeper: only it may, §17), rather than using them as they are.
	Makes bool
	// refused is the first thing NATS refused this command's role (NATS
	// drops a refused publish and says so apart from the request, which
	// then times out).
	refused atomic.Pointer[error]
}

// CredsFile is Creds, else RALPH_NATS_CREDS.
func (s *SignIn) CredsFile() string {
	if s.Creds != "" {
		return s.Creds
	}
	return os.Getenv("RALPH_NATS_CREDS")
}

// Refused is the first thing NATS refused the command's role, or nil: the
// command's error (a usage error), whatever else failed after it.
func (s *SignIn) Refused() error {
	if e := s.refused.Load(); e != nil {
		return *e
	}
	return nil
}

// Signer signs the command's fleet requests (a submit, a control, a
// tunnel) as the member whose credentials it signs in with.
func (s *SignIn) Signer() (*Signer, error) {
	c := s.CredsFile()
	if c == "" {
		return nil, usage.Flagf("this needs the credentials of a fleet member to sign it; pass --creds FILE (or set RALPH_NATS_CREDS)")
	}
	sg, err := LoadSigner(c)
	if err != nil {
		return nil, usage.Wrap(err)
	}
	return sg, nil
}

// Dial connects to the NATS server(s) at url (comma-separated for a
// cluster) as the fleet member whose credentials s names. One that does
// not answer, or refuses the credentials, is a usage error with the fix.
// Once connected, a lost connection is re-established for as long as it
// takes (a worker's runs go on meanwhile; their jobs move to other workers
// only when the ack wait passes).
func Dial(ctx context.Context, url, name string, s *SignIn) (*nats.Conn, error) {
	creds := s.CredsFile()
	opts := []nats.Option{nats.Name(name), nats.Timeout(DialTimeout), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// NATS refuses what a role may not do by dropping it: say so
			// once, in a sentence, instead of the library's log line.
			if errors.Is(err, nats.ErrPermissionViolation) {
				e := usage.Errorf("NATS refused this (%v): the fleet role of --creds %s does not allow it; pass the credentials of a member whose role does (worker, submitter or viewer)", err, creds)
				s.refused.CompareAndSwap(nil, &e)
				return
			}
			fmt.Fprintf(os.Stderr, "ralph: NATS: %v\n", err)
		})}
	if creds != "" {
		o, err := CredsOption(creds)
		if err != nil {
			return nil, usage.Wrap(err)
		}
		opts = append(opts, o)
	}
	if s.TLSCA != "" {
		if _, err := os.Stat(s.TLSCA); err != nil {
			return nil, usage.Flagf("cannot read the TLS CA file %s (%v); pass --tls-ca FILE with the PEM certificate of the CA that signed the server's", s.TLSCA, errors.Unwrap(err))
		}
		opts = append(opts, nats.RootCAs(s.TLSCA))
	}
	if s.InProcess != nil {
		opts = append(opts, nats.InProcessServer(s.InProcess))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, usage.Wrap(dialError(url, creds, err))
	}
	return nc, nil
}

// dialError is the sentence for a connection NATS refused.
func dialError(url, creds string, err error) error {
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.Is(err, nats.ErrAuthorization) && creds == "":
		return fmt.Errorf("the NATS server at %s lets in only the fleet's members; pass --creds FILE (or set RALPH_NATS_CREDS) with a credentials file from `ralph fleet serve` or `ralph fleet creds add`", url)
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAuthExpired):
		return fmt.Errorf("the NATS server at %s refused the credentials in %s (revoked, or of another fleet); pass --creds FILE with a file `ralph fleet creds add` wrote for this fleet", url, creds)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Errorf("the TLS certificate of the NATS server at %s has expired (%v); renew the server's --tls-cert", url, invalid)
	case errors.As(err, &hostErr):
		return fmt.Errorf("the TLS certificate of the NATS server at %s is not for that host (%v); connect with a name the certificate holds, or renew the server's --tls-cert", url, hostErr)
	case errors.As(err, &unknownCA), errors.As(err, &certErr):
		return fmt.Errorf("the TLS certificate of the NATS server at %s is not trusted (%v); pass --tls-ca FILE with the CA that signed it", url, err)
	case errors.Is(err, nats.ErrSecureConnRequired):
		return fmt.Errorf("the NATS server at %s requires TLS; connect with tls://HOST:PORT and pass --tls-ca FILE", url)
	case errors.Is(err, nats.ErrNoServers) || isConnRefused(err):
		return fmt.Errorf("no NATS server answers at %s; start one with `ralph fleet serve` or pass --nats URL", url)
	}
	return fmt.Errorf("connect to NATS at %s: %w; check the URL, or start a server with `ralph fleet serve`", url, err)
}

func isConnRefused(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op)
}

// Open connects to the fleet at url (Dial) and returns its streams and
// buckets, made when missing. Existing ones keep how they were made (a
// cluster's three replicas are never cut to the one-machine default).
func Open(ctx context.Context, url, name string, s *SignIn) (*nats.Conn, *Handles, error) {
	nc, err := Dial(ctx, url, name, s)
	if err != nil {
		return nil, nil, err
	}
	h, err := OpenHandles(ctx, nc, url, s.Makes)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, h, nil
}

// OpenHandles is Open's streams and buckets on a connection made. Only
// one that makes them (makes: the keeper) makes or updates them.
func OpenHandles(ctx context.Context, nc *nats.Conn, url string, makes bool) (*Handles, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	c := DefaultConfig()
	s, err := js.Stream(ctx, StreamJobs)
	if err == nil && !makes {
		// A fleet that exists is used as it is: only the keeper may change
		// its streams (§17).
		h, berr := Bind(ctx, js)
		if berr == nil {
			return h, nil
		}
		if !errors.Is(berr, jetstream.ErrStreamNotFound) && !errors.Is(berr, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("read the fleet's streams at %s: %w", url, berr)
		}
	}
	switch {
	case err == nil:
		cfg := s.CachedInfo().Config
		c.Replicas, c.Dedup = cfg.Replicas, cfg.Duplicates
		if kv, err := js.KeyValue(ctx, BucketWorkers); err == nil {
			if st, err := kv.Status(ctx); err == nil {
				c.WorkerTTL = st.TTL()
			}
		}
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return nil, usage.Errorf("the NATS server at %s has no JetStream; start it with JetStream enabled (nats-server -js), or use `ralph fleet serve`", url)
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("read the fleet's streams at %s: %w", url, err)
	case !makes:
		// Only the keeper may make the fleet's streams (§17).
		return nil, usage.Errorf("the fleet at %s has no streams yet: the fleet's keeper makes them when it starts; start `ralph fleet serve`, or `ralph fleet keeper --nats %s` beside a NATS server of your own, first", url, url)
	case nc.ConnectedClusterName() != "":
		// The first to reach a cluster makes the fleet: three replicas of
		// everything, so losing one server (even a stream's leader) loses
		// nothing.
		c.Replicas = 3
	}
	h, err := Ensure(ctx, js, c)
	if err != nil {
		if c.Replicas == 3 && s == nil {
			return nil, fmt.Errorf("make the fleet's streams with 3 replicas on NATS cluster %s: %w; a fleet on a cluster needs at least three JetStream servers", nc.ConnectedClusterName(), err)
		}
		return nil, fmt.Errorf("the fleet at %s: %w", url, err)
	}
	return h, nil
}

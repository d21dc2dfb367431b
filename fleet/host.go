package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/internal/usage"
)

// HostOptions are a fleet hosted on this machine (ralph fleet serve): its
// directory, the client address and the TLS certificate beyond loopback.
type HostOptions struct {
	Dir, Listen, TLSCert, TLSKey string
	Log                          bool // the NATS server's own log, on stderr
	// Ready is called once the server listens at url and the fleet's
	// streams are made, with the fleet's members (made: their credentials
	// were made now); its error ends Host.
	Ready func(url string, made bool, members []Member) error
	// ErrOut gets a line each time the members are reloaded.
	ErrOut io.Writer
}

// DefaultDir is where a fleet is hosted without --dir:
// $XDG_STATE_HOME/ralph/fleet (~/.local/state when XDG_STATE_HOME is unset).
func DefaultDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", usage.Errorf("no home directory to keep the fleet's streams in (%v); pass --dir DIR", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "ralph", "fleet"), nil
}

// Host serves the fleet in o.Dir until ctx ends: an embedded NATS server
// with JetStream that lets in only the fleet's members (made on first
// start), the fleet's streams and buckets, and the members reloaded
// whenever `ralph fleet creds add|revoke` changes them. The directory is
// locked while it does: two servers would corrupt its streams. An address
// in use or beyond loopback without TLS, a directory that cannot be made
// or is in use, and a fleet with no members are usage errors.
func Host(ctx context.Context, o HostOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return usage.Errorf("make the fleet directory %s: %w; pass --dir DIR", o.Dir, err)
	}
	unlock, err := lockDir(o.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	made, err := InitAuth(o.Dir)
	if err != nil {
		return usage.Wrap(err)
	}
	members, err := LoadMembers(o.Dir)
	if err != nil {
		return usage.Wrap(err)
	}
	if len(members) == 0 {
		return usage.Flagf("the fleet in %s has no members left, so no one could reach it; add one with `ralph fleet creds add NAME --role worker --dir %s`", o.Dir, o.Dir)
	}
	srv, err := StartServer(ServerOptions{Dir: o.Dir, Listen: o.Listen, Name: "ralph-fleet", Log: o.Log,
		Members: members, AuthDir: o.Dir, TLSCert: o.TLSCert, TLSKey: o.TLSKey})
	if err != nil {
		return usage.Wrap(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	// Stream configuration is the keeper's alone (§17): its connection
	// in this process makes them.
	if _, err := srv.MakeStreams(ctx); err != nil {
		return err
	}
	if err := o.Ready(url, len(made) > 0, members); err != nil {
		return err
	}
	o.reloadMembers(ctx, srv)
	return nil
}

// check refuses an address that cannot be listened on, or is reachable
// from other machines without TLS, and half a certificate.
func (o HostOptions) check() error {
	if err := checkListen(o.Listen); err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(o.Listen); o.TLSCert == "" && !loopback(host) {
		return usage.Flagf("--listen %s is reachable from other machines, which needs TLS; pass --tls-cert FILE and --tls-key FILE, or listen on 127.0.0.1", o.Listen)
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return usage.Flagf("TLS needs both a certificate and its key; pass --tls-cert FILE and --tls-key FILE")
	}
	return nil
}

// reloadMembers gives the running server the fleet's users whenever
// `ralph fleet creds add|revoke` changes them, until ctx ends: a revoked
// user's connections close at once.
func (o HostOptions) reloadMembers(ctx context.Context, srv *Server) {
	users := filepath.Join(o.Dir, "users.json")
	stamp := func() time.Time {
		fi, err := os.Stat(users)
		if err != nil {
			return time.Time{}
		}
		return fi.ModTime()
	}
	last := stamp()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := stamp()
		if now.Equal(last) {
			continue
		}
		last = now
		ms, err := LoadMembers(o.Dir)
		if err == nil {
			err = srv.SetMembers(ms)
		}
		if err != nil {
			fmt.Fprintf(o.ErrOut, "ralph fleet serve: the fleet's users were not reloaded: %v\n", err)
			continue
		}
		fmt.Fprintf(o.ErrOut, "ralph fleet serve: reloaded the fleet's users (%d)\n", len(ms))
	}
}

// checkListen makes sure the client address can be listened on before the
// server starts (the server itself only reports a taken port by never
// becoming ready).
func checkListen(listen string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return usage.Flagf("--listen %q is not host:port; pass e.g. 127.0.0.1:4222", listen)
	}
	if port == "0" {
		return nil
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return usage.Errorf("port %s on %s is in use (another NATS server or `ralph fleet serve`?); stop it, or pass --listen %s:PORT with a free port", port, hostOrAll(host), hostOrAll(host))
		}
		return usage.Errorf("cannot listen on %s: %v; pass --listen HOST:PORT", listen, err)
	}
	return l.Close()
}

func hostOrAll(h string) string {
	if h == "" {
		return "0.0.0.0"
	}
	return h
}

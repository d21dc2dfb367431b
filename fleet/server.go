package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// ServerOptions configure an embedded NATS server with JetStream.
type ServerOptions struct {
	// Dir holds JetStream's files (streams and buckets survive a restart).
	Dir string
	// Listen is the client address, host:port; port 0 picks a free one.
	Listen string
	// Name names the server (unique within a cluster).
	Name string
	// Cluster, when set, joins a cluster: ClusterListen is this node's
	// route address (host:port), Routes the other nodes' route addresses.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// Log writes the server's own log to stderr (ralph fleet serve --verbose).
	Log bool
	// Members are the only users the server lets in (§17): a server
	// without members is refused, authentication is always on.
	Members []Member
	// AuthDir is the fleet directory Members come from: with it, the
	// server runs the fleet's keeper (keeper.go), which reads the roster
	// and the fleet key there.
	AuthDir string
	// TLSCert and TLSKey are the server's certificate and key (PEM files);
	// a server listening on anything but loopback needs them.
	TLSCert, TLSKey string
	// TLSCA is the CA that signed the other nodes' certificates: with TLS,
	// a cluster's routes use the node's certificate both ways and accept
	// only nodes signed by it.
	TLSCA string
}

// Server is an embedded NATS server with JetStream.
type Server struct {
	ns   *server.Server
	opts *server.Options
	mu   sync.Mutex
	// keeperUser is the keeper's own user, made anew at each start, and
	// keeper the keeper on its in-process connection (nil without AuthDir).
	keeperUser *server.NkeyUser
	keeperKP   nkeys.KeyPair
	keeperNC   *nats.Conn
	keeper     *Keeper
}

// StartServer starts an embedded NATS server with JetStream and waits
// until it accepts clients.
func StartServer(o ServerOptions) (*Server, error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:4222"
	}
	host, port, err := o.checkListen()
	if err != nil {
		return nil, err
	}
	srv := &Server{}
	if o.AuthDir != "" {
		if srv.keeperKP, err = nkeys.CreateUser(); err != nil {
			return nil, err
		}
		pub, _ := srv.keeperKP.PublicKey()
		srv.keeperUser = &server.NkeyUser{Nkey: pub, Permissions: RolePermissions(RoleKeeper, pub)}
	}
	opts, err := srv.natsOptions(o, host, port)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start the NATS server: %w", err)
	}
	if o.Log {
		ns.ConfigureLogger()
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("the NATS server on %s did not start within 30s; is the port in use? pass another --listen", o.Listen)
	}
	srv.ns, srv.opts = ns, opts.Clone()
	if o.AuthDir != "" {
		if err := srv.startKeeper(o.AuthDir); err != nil {
			ns.Shutdown()
			return nil, err
		}
	}
	return srv, nil
}

// checkListen checks the options a server cannot start without (a
// directory, users, TLS off loopback) and returns the host and port it
// listens on, port 0 made a random one.
func (o ServerOptions) checkListen() (host string, port int, err error) {
	if o.Dir == "" {
		return "", 0, errors.New("the fleet server needs a directory for its streams; pass --dir DIR")
	}
	host, port, err = splitHostPort(o.Listen)
	if err != nil {
		return "", 0, fmt.Errorf("--listen %q: %w; pass host:port, e.g. 127.0.0.1:4222", o.Listen, err)
	}
	if port == 0 { // nats-server reads 0 as its default port, 4222
		port = server.RANDOM_PORT
	}
	if len(o.Members) == 0 {
		return "", 0, errors.New("the fleet server has no users, so no one could reach it; make them with `ralph fleet serve` (it writes them on first start) or `ralph fleet creds add NAME --role ROLE`")
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return "", 0, errors.New("TLS needs both a certificate and its key; pass --tls-cert FILE and --tls-key FILE")
	}
	if o.TLSCert == "" && !loopback(host) {
		return "", 0, fmt.Errorf("--listen %s is reachable from other machines, which needs TLS; pass --tls-cert FILE and --tls-key FILE, or listen on 127.0.0.1", o.Listen)
	}
	return host, port, nil
}

// natsOptions are the NATS server's options: JetStream in o.Dir, the
// members (and the keeper) as its users, TLS and the cluster if o asks.
func (srv *Server) natsOptions(o ServerOptions, host string, port int) (*server.Options, error) {
	opts := &server.Options{
		ServerName: o.Name, Host: host, Port: port,
		JetStream: true, StoreDir: o.Dir,
		NoLog: !o.Log, NoSigs: true,
		Nkeys: srv.users(o.Members),
	}
	if o.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLSCert, KeyFile: o.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("the TLS certificate %s or key %s: %w; pass a PEM certificate and its key", o.TLSCert, o.TLSKey, err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSTimeout = tc, true, 5
	}
	if o.ClusterName != "" {
		if err := clusterOptions(o, opts); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// clusterOptions sets opts to join the cluster o names: this node's route
// address, TLS on the routes (under o.TLSCA) when the node has a
// certificate, and the other nodes' routes.
func clusterOptions(o ServerOptions, opts *server.Options) error {
	ch, cp, err := splitHostPort(o.ClusterListen)
	if err != nil {
		return fmt.Errorf("cluster listen %q: %w", o.ClusterListen, err)
	}
	if cp == 0 {
		cp = server.RANDOM_PORT
	}
	opts.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: ch, Port: cp}
	if o.TLSCert != "" {
		if o.TLSCA == "" {
			return errors.New("a cluster with TLS needs the CA that signed its nodes' certificates; pass it as well as the certificate and key")
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLSCert, KeyFile: o.TLSKey, CaFile: o.TLSCA, Verify: true})
		if err != nil {
			return fmt.Errorf("the cluster's TLS (certificate %s, CA %s): %w", o.TLSCert, o.TLSCA, err)
		}
		// A node is both server and client of its routes: it checks
		// the nodes it dials against the same CA.
		tc.RootCAs = tc.ClientCAs
		opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = tc, 5
	}
	if o.TLSCert == "" && !loopback(ch) {
		return fmt.Errorf("cluster listen %s is reachable from other machines, which needs TLS; pass a certificate and key, or listen on 127.0.0.1", o.ClusterListen)
	}
	for _, r := range o.Routes {
		u, err := url.Parse("nats-route://" + r)
		if err != nil {
			return fmt.Errorf("route %q: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}

// users are the server's nkey users: the members', and the keeper's.
func (s *Server) users(ms []Member) []*server.NkeyUser {
	us := NkeyUsers(ms)
	if s.keeperUser != nil {
		us = append(us, s.keeperUser)
	}
	return us
}

// startKeeper runs the fleet's keeper on an in-process connection as the
// keeper's user.
func (s *Server) startKeeper(dir string) error {
	// In process there is no TLS to speak: the server offers it to
	// connections from the network only.
	nc, err := nats.Connect(strings.Replace(s.ns.ClientURL(), "tls://", "nats://", 1), nats.InProcessServer(s.ns), nats.Name("ralph fleet keeper"),
		nats.Nkey(s.keeperUser.Nkey, s.keeperKP.Sign), nats.CustomInboxPrefix(InboxPrefix(s.keeperUser.Nkey)), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect the fleet's keeper: %w", err)
	}
	k, err := StartKeeper(nc, dir)
	if err != nil {
		nc.Close()
		return err
	}
	s.keeperNC, s.keeper = nc, k
	return nil
}

// MakeStreams makes (or updates) the fleet's streams and buckets through
// the keeper's connection (OpenHandles): only the keeper may (§17). A
// server started without AuthDir runs no keeper and makes none.
func (s *Server) MakeStreams(ctx context.Context) (*Handles, error) {
	if s.keeperNC == nil {
		return nil, errors.New("this NATS server runs no fleet keeper (no fleet directory), so it makes no streams")
	}
	return OpenHandles(ctx, s.keeperNC, s.ClientURL(), true)
}

// SetMembers replaces the server's users with ms (a NATS configuration
// reload): the connections of a user no longer among them are closed at
// once, and the others keep theirs.
func (s *Server) SetMembers(ms []Member) error {
	if len(ms) == 0 {
		return errors.New("a fleet with no users could not be reached; keep at least one")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.opts.Clone()
	o.Nkeys = s.users(ms)
	if err := s.ns.ReloadOptions(o); err != nil {
		return fmt.Errorf("reload the fleet's users: %w", err)
	}
	s.opts = o.Clone()
	return nil
}

// loopback says whether host is reachable from this machine only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ClientURL is the URL workers and submitters connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// ClusterURL is this node's route address, for the other nodes' Routes.
func (s *Server) ClusterURL() string {
	if a := s.ns.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Shutdown stops the server and waits until it has.
func (s *Server) Shutdown() {
	if s.keeper != nil {
		s.keeper.Stop()
		s.keeperNC.Close()
	}
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// Raw is the embedded server itself (tests: JetStream leader, health).
func (s *Server) Raw() *server.Server { return s.ns }

func splitHostPort(hp string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", ps)
	}
	return host, port, nil
}

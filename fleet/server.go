package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
}

// Server is an embedded NATS server with JetStream.
type Server struct {
	ns *server.Server
}

// StartServer starts an embedded NATS server with JetStream and waits
// until it accepts clients.
func StartServer(o ServerOptions) (*Server, error) {
	if o.Dir == "" {
		return nil, errors.New("the fleet server needs a directory for its streams; pass --dir DIR")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:4222"
	}
	host, port, err := splitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w; pass host:port, e.g. 127.0.0.1:4222", o.Listen, err)
	}
	if port == 0 { // nats-server reads 0 as its default port, 4222
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: o.Name, Host: host, Port: port,
		JetStream: true, StoreDir: o.Dir,
		NoLog: !o.Log, NoSigs: true,
	}
	if o.ClusterName != "" {
		ch, cp, err := splitHostPort(o.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("cluster listen %q: %w", o.ClusterListen, err)
		}
		if cp == 0 {
			cp = server.RANDOM_PORT
		}
		opts.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: ch, Port: cp}
		for _, r := range o.Routes {
			u, err := url.Parse("nats-route://" + r)
			if err != nil {
				return nil, fmt.Errorf("route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
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
	return &Server{ns: ns}, nil
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

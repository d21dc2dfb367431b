package fleet

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/usage"
)

func TestHostRefusesBadAddresses(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		name string
		o    HostOptions
		want string
	}{
		{"not host:port", HostOptions{Listen: "4222"}, `--listen "4222" is not host:port`},
		{"in use", HostOptions{Listen: l.Addr().String()}, "is in use (another NATS server or `ralph fleet serve`?)"},
		{"beyond loopback without TLS", HostOptions{Listen: "0.0.0.0:0"}, "is reachable from other machines, which needs TLS"},
		{"a certificate without its key", HostOptions{Listen: "127.0.0.1:0", TLSCert: "c.pem"}, "TLS needs both a certificate and its key"},
	} {
		err := tc.o.check()
		var ue *usage.Error
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error with %q", tc.name, err, tc.want)
		}
	}
	if err := (HostOptions{Listen: "127.0.0.1:0"}).check(); err != nil {
		t.Errorf("a free loopback address: %v", err)
	}
}

package cli_test

import (
	"context"
	"strings"
	"testing"
)

func TestWorkerFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no slots", []string{"worker", "--slots", "0"}, "--slots must be at least 1, got 0"},
		{"short ack wait", []string{"worker", "--ack-wait", "1s"}, "--ack-wait must be at least 3s"},
		{"an argument", []string{"worker", "ralph.toml"}, "worker takes no arguments; it runs what `ralph submit` queued"},
		{"no NATS", []string{"worker", "--nats", "nats://127.0.0.1:1", "--dir", "."},
			"no NATS server answers at nats://127.0.0.1:1; start one with `ralph fleet serve` or pass --nats URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, errOut, code := run(t, context.Background(), "", c.args...)
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, c.want)
			}
		})
	}
}

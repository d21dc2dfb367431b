//go:build linux

package sandbox

import (
	"os/exec"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// BenchmarkSandboxCall is a call of true through RunContained under off
// and each mechanism this machine has: what a sandbox adds to every
// command a run starts (targets: 10 ms for Landlock, 30 ms for bwrap).
func BenchmarkSandboxCall(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true on PATH")
	}
	for _, col := range attackColumns {
		b.Run(col.name, func(b *testing.B) {
			home := b.TempDir()
			for _, v := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"} {
				b.Setenv(v, home)
			}
			var s *Sandbox
			if col.mech != nil {
				if err := col.mech.probe(NetModel); err != nil {
					b.Skipf("%s: %v", col.name, err)
				}
				if s, err = newWith(Spec{Mode: Auto, Network: NetModel}, Bounds{Workdir: b.TempDir()}, nil, col.mech); err != nil {
					b.Fatal(err)
				}
				defer s.Close()
			}
			ctx := With(b.Context(), s)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if _, err := RunContained(ctx, exec.CommandContext(ctx, truePath), time.Second, procgroup.StartOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/call")
		})
	}
}

package ledger

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkWitness measures one iteration's appends as a run makes them
// (IterationStarted, three calls, IterationCompleted, each waited for),
// on a store on disk, without a witness directory and with one: the
// difference is the witness advancing once per iteration (a signed note
// written whole and fsynced, then renamed, and its directory fsynced).
func BenchmarkWitness(b *testing.B) {
	for _, bc := range []struct {
		name    string
		witness bool
	}{{"off", false}, {"on", true}} {
		b.Run("witness="+bc.name, func(b *testing.B) {
			root := b.TempDir()
			opts := Options{Dir: filepath.Join(root, "store"), MemTableSize: 64 << 20, KeyDir: filepath.Join(root, "keys")}
			if bc.witness {
				opts.WitnessDir = filepath.Join(root, "witness")
			}
			s, err := Open(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			types := []ActionType{IterationStarted, CapabilityCall, CapabilityCall, CapabilityCall, IterationCompleted}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				for j, typ := range types {
					a := sample(i*len(types) + j)
					a.ActionID, a.ParentActionID, a.Type = "", "", typ
					if _, err := s.Append(ctx, a); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/iteration")
		})
	}
}

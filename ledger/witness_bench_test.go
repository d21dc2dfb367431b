package ledger

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkWitness measures one iteration's appends as a run makes them
// (IterationStarted, three calls, IterationCompleted, each waited for),
// on a store on disk, without a witness directory and with one: the
// difference is the witness advancing once per iteration (a signed note
// written into a slot of the witness file and fdatasynced). The /sync
// cases make every commit durable before Append returns, as a run's
// sync_writes does.
func BenchmarkWitness(b *testing.B) {
	for _, bc := range []struct {
		name          string
		witness, sync bool
	}{{"witness=off", false, false}, {"witness=on", true, false}, {"witness=off/sync", false, true}, {"witness=on/sync", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			root := b.TempDir()
			opts := Options{Dir: filepath.Join(root, "store"), MemTableSize: 64 << 20, KeyDir: filepath.Join(root, "keys"), SyncWrites: bc.sync}
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

// BenchmarkWitnessAdvance measures one advance of the witness file alone:
// into a slot in place with one fdatasync (slot), against the whole file
// written to a temporary file, fsynced, renamed and its directory fsynced
// (whole), as the first write of each process is.
func BenchmarkWitnessAdvance(b *testing.B) {
	note := []byte("ralph/0123456789abcdef\n20214\n" + strings.Repeat("r", 44) + "\n\n— ralph/0123456789abcdef " + strings.Repeat("s", 92) + "\n")
	b.Run("slot", func(b *testing.B) {
		w := &witnessWriter{path: filepath.Join(b.TempDir(), "w")}
		defer w.close()
		for i := 0; b.Loop(); i++ {
			if err := w.advance(uint64(i+1), note); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "w")
		for i := 0; b.Loop(); i++ {
			if err := writeFileAtomic(path, encodeWitnessFile(uint64(i+1), note), 0o600); err != nil {
				b.Fatal(err)
			}
		}
	})
}

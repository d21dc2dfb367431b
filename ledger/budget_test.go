package ledger

import (
	"log/slog"
	"testing"
)

// Every store is opened within the memory budget; LowMemory only shrinks it.
func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	for _, low := range []bool{false, true} {
		b, err := badgerOptions(Options{Dir: t.TempDir(), LowMemory: low}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if b.NumMemtables != budgetMemtables || b.IndexCacheSize != budgetIndexCache ||
			b.MemTableSize > defaultMemTableSize || b.BlockCacheSize > defaultBlockCacheSize {
			t.Errorf("LowMemory %v: memtables %d × %d, index cache %d, block cache %d", low, b.NumMemtables, b.MemTableSize,
				b.IndexCacheSize, b.BlockCacheSize)
		}
	}
}

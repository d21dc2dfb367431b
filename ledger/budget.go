package ledger

import "github.com/dgraph-io/badger/v4"

// Badger's memory budget for a store a ralph command opens (DESIGN §18;
// docs/ledger.md "Memory"). A CLI process holds one store, and a run may
// hold it for days: what Badger keeps in memory must not grow with the
// chain. Its parts:
//   - memtables: MemTableSize each (32 MiB by default, which sets the
//     largest transaction, about 15% of it) and at most budgetMemtables of
//     them, one taking writes and one being flushed to a table;
//   - the block cache: BlockCacheSize (16 MiB by default), decompressed
//     table blocks;
//   - the index cache: budgetIndexCache for table indexes and bloom
//     filters, so that they are not all held for the life of the store
//     (Badger's default with a cache of 0).
//
// Badger maps its table and log files into memory too; those pages are the
// page cache's, and a long run drops its mappings of them (ReleaseMapped)
// so that they do not count in its resident set.
const (
	budgetMemtables  = 2
	budgetIndexCache = 4 << 20
)

// withMemoryBudget sets the budget above on b (LowMemory shrinks it
// further).
func withMemoryBudget(b badger.Options) badger.Options {
	return b.WithNumMemtables(budgetMemtables).WithIndexCacheSize(budgetIndexCache)
}

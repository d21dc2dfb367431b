//go:build !unix

package ledger

// freeBytes cannot tell here: free space is not checked.
func freeBytes(string) (int64, bool) { return 0, false }

// allocatedBytes cannot tell here.
func allocatedBytes(string) int64 { return 0 }

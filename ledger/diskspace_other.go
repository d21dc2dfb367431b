//go:build !unix

package ledger

import "errors"

// freeBytes cannot tell here: free space is not checked.
func freeBytes(string) (int64, bool) { return 0, false }

// statFS cannot tell here.
func statFS(string) (int64, bool, bool) { return 0, false, false }

// statID cannot tell here: the store's place is not checked.
func statID(string) (fileID, error) { return fileID{}, errors.New("not supported") }

// allocatedBytes cannot tell here.
func allocatedBytes(string) int64 { return 0 }

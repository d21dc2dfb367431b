package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/ralphloop/ralph/rtfs"
)

// maxKVValue bounds one stored value's canonical text.
const maxKVValue = 1 << 20

// KV is the store's key/value table.
type KV struct{ s *Store }

// KV returns the store's key/value table.
func (s *Store) KV() *KV { return &KV{s: s} }

// Get returns the value stored under key.
func (k *KV) Get(_ context.Context, key string) (rtfs.Value, bool, error) {
	var text []byte
	err := k.s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(kvKey(key))
		if err != nil {
			return err
		}
		text, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return rtfs.Nil, false, nil
	}
	if err != nil {
		return rtfs.Nil, false, err
	}
	v, err := rtfs.ReadValue(string(text))
	if err != nil {
		return rtfs.Nil, false, fmt.Errorf("stored value for %q is corrupt: %w", key, err)
	}
	return v, true, nil
}

// Put stores v under key, durably when the store syncs writes. When ctx
// carries a KVStage (StageKV), the write is checked and kept there instead,
// to commit with the action that records it.
func (k *KV) Put(ctx context.Context, key string, v rtfs.Value) error {
	text, err := kvText(key, v)
	if err != nil {
		return err
	}
	if st, ok := ctx.Value(stageKey{}).(*KVStage); ok {
		st.mu.Lock()
		st.writes = append(st.writes, KVWrite{Key: key, Value: v})
		st.mu.Unlock()
		return nil
	}
	k.s.readMu.RLock()
	defer k.s.readMu.RUnlock()
	if k.s.closed {
		return ErrClosed
	}
	if err := k.s.writable(); err != nil {
		return err
	}
	// A record written on its own (a run's state) may use the room kept
	// for closing a run.
	if err := k.s.checkSpace(int64(len(key)+len(text)), true); err != nil {
		return err
	}
	return k.s.lostOnWrite(k.s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(kvKey(key), []byte(text))
	}))
}

// kvText checks a write and returns the value's stored text.
func kvText(key string, v rtfs.Value) (string, error) {
	if key == "" {
		return "", errors.New("key is empty")
	}
	if err := checkData(v); err != nil {
		return "", err
	}
	if n, ok := rtfs.Size(v, rtfs.MaxPrintNodes); !ok {
		return "", fmt.Errorf("value has more than %d nodes (at least %d); store something smaller", rtfs.MaxPrintNodes, n)
	}
	text := rtfs.Print(v)
	if len(text) > maxKVValue {
		return "", fmt.Errorf("value is %d bytes; at most %d can be stored", len(text), maxKVValue)
	}
	return text, nil
}

// KVWrite is one write to the key/value table (Action.KV); a Nil value
// is stored as nil, which Get returns as present.
type KVWrite struct {
	Key   string
	Value rtfs.Value
}

// KVStage gathers the kv writes a capability makes, so that they commit
// with the action that records the call instead of on their own.
type KVStage struct {
	mu     sync.Mutex
	writes []KVWrite
}

type stageKey struct{}

// StageKV returns a context whose kv writes (KV.Put) are kept in the
// returned stage instead of being written.
func StageKV(ctx context.Context) (context.Context, *KVStage) {
	st := &KVStage{}
	return context.WithValue(ctx, stageKey{}, st), st
}

// Writes returns the writes staged so far, in order.
func (st *KVStage) Writes() []KVWrite {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]KVWrite(nil), st.writes...)
}

// Scan calls fn for every key starting with prefix, in key order, until fn
// returns false.
func (k *KV) Scan(prefix string, fn func(key string, v rtfs.Value) bool) error {
	return k.s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: kvKey(prefix), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			text, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			v, err := rtfs.ReadValue(string(text))
			if err != nil {
				return fmt.Errorf("stored value for %q is corrupt: %w", kvKeyOf(item.Key()), err)
			}
			if !fn(kvKeyOf(item.Key()), v) {
				return nil
			}
		}
		return nil
	})
}

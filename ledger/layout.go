package ledger

import "encoding/binary"

// The store's layout: every key ralph writes in Badger, with its builder
// and its parser, and the namespaces of the kv table. Nothing outside this
// file spells a key or decodes one by byte offset. docs/ledger.md §2 lists
// the same keys; TestLayoutMatchesDoc fails when one is added to one and
// not to the other, and when a key constant here (prefix…, key…, KV…) is
// left out of layoutKeys.
const (
	prefixAction     = "a/"
	prefixCheckpoint = "c/"
	prefixIndex      = "i/"
	prefixTree       = "t/"
	prefixMeta       = "m/"
	keyHead          = "h"
	keyStoreID       = prefixMeta + "id"
	keyVerifier      = prefixMeta + "key"
	keyTreeSize      = prefixMeta + "tree"
	// keyWitnessFailed records the first checkpoint whose witness could
	// not be written since the witness was last written (witness_fail.go).
	keyWitnessFailed = prefixMeta + "witness-failed"

	// keyImportMark holds the head an unfinished import started from
	// (importmark.go).
	keyImportMark = keyHead + "/import"

	// prefixKV holds the key/value table beside the chain: values kept by
	// the kv.* capabilities, run records and idempotency records. It is
	// durable like the chain but not part of it, so Verify does not read
	// it. A write that is an action's effect rides on the action
	// (Action.KV, often gathered by a KVStage) and commits in its
	// transaction, so the table never holds an effect the chain does not
	// record.
	prefixKV = "k/"
)

// Namespaces of the kv table (keys of KV.Get, KV.Put and Action.KV; the
// table stores them under k/).
const (
	// KVUser holds the keys plans name with kv.get and kv.put, so a plan
	// can neither read nor forge ralph's own records.
	KVUser = "user/"
	// KVRun holds one record per run: its state, counters and ending.
	KVRun = "run/"
	// KVIdem holds the idempotency records of steps with :idempotency.
	KVIdem = "idem/"
)

// UserKVKey is the kv key of a plan's key.
func UserKVKey(key string) string { return KVUser + key }

// RunKVKey is the kv key of run id's record.
func RunKVKey(id string) string { return KVRun + id }

// IdemKVKey is the kv key of an idempotency record: scope is plan, intent
// or global, id the plan or intent id it is scoped to ("" for global).
func IdemKVKey(scope, id, key string) string { return KVIdem + scope + "/" + id + "/" + key }

// layoutKey is one row of docs/ledger.md §2.
type layoutKey struct {
	prefix string // the constant the key or prefix is written with
	doc    string // the key column of the doc's table
}

// layoutKeys is every key and prefix of the store, as docs/ledger.md §2
// lists them.
var layoutKeys = []layoutKey{
	{prefixAction, "`a/` ‖ be64(seq)"},
	{keyHead, "`h`"},
	{keyImportMark, "`h/import`"},
	{prefixCheckpoint, "`c/` ‖ be64(seq)"},
	{prefixIndex, "`i/` ‖ field ‖ `/` ‖ value ‖ `/` ‖ be64(seq)"},
	{prefixTree, "`t/` ‖ u8(level) ‖ be64(index)"},
	{prefixMeta, "`m/` ‖ name"},
	{keyStoreID, "`m/id`"},
	{keyVerifier, "`m/key`"},
	{keyTreeSize, "`m/tree`"},
	{keyWitnessFailed, "`m/witness-failed`"},
	{prefixKV, "`k/` ‖ key"},
	{prefixKV + KVUser, "`k/user/` ‖ key"},
	{prefixKV + KVRun, "`k/run/` ‖ run id"},
	{prefixKV + KVIdem, "`k/idem/` ‖ scope ‖ `/` ‖ id ‖ `/` ‖ key"},
}

// Key lengths, for the transaction budget (writer.go).
const (
	actionKeyLen = len(prefixAction) + 8
	treeKeyLen   = len(prefixTree) + 1 + 8
)

// indexKeyLen is the length of i/<field>/<value>/<be64 seq>.
func indexKeyLen(field, value string) int {
	return len(prefixIndex) + len(field) + 1 + len(value) + 1 + 8
}

// seqKey returns prefix ‖ be64(seq).
func seqKey(prefix string, seq uint64) []byte {
	k := make([]byte, len(prefix)+8)
	copy(k, prefix)
	binary.BigEndian.PutUint64(k[len(prefix):], seq)
	return k
}

func actionKey(seq uint64) []byte     { return seqKey(prefixAction, seq) }
func checkpointKey(seq uint64) []byte { return seqKey(prefixCheckpoint, seq) }

// kvKey returns the stored key of kv key.
func kvKey(key string) []byte { return []byte(prefixKV + key) }

// kvKeyOf returns the kv key a stored k/ key holds.
func kvKeyOf(k []byte) string { return string(k[len(prefixKV):]) }

// indexPrefix returns i/<field>/<value>/ — the keys of every action whose
// field equals value. Values may contain '/', so a scan must also check that
// exactly 8 bytes (the seq) follow the prefix.
func indexPrefix(field, value string) []byte {
	return appendIndexPrefix(make([]byte, 0, indexKeyLen(field, value)), field, value)
}

func indexKey(field, value string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(field, value), seq)
}

// appendIndexPrefix appends i/<field>/<value>/ to k.
func appendIndexPrefix[V string | []byte](k []byte, field string, value V) []byte {
	k = append(k, prefixIndex...)
	k = append(k, field...)
	k = append(k, '/')
	k = append(k, value...)
	return append(k, '/')
}

// appendIndexKey appends i/<field>/<value>/<be64 seq> to k.
func appendIndexKey(k []byte, field string, value []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendIndexPrefix(k, field, value), seq)
}

// treeKey returns t/ ‖ u8(level) ‖ be64(index).
func treeKey(level uint, index uint64) []byte {
	k := make([]byte, 0, treeKeyLen)
	k = append(k, prefixTree...)
	k = append(k, byte(level))
	return binary.BigEndian.AppendUint64(k, index)
}

// seqOf returns the be64 seq a key ends with (an action, checkpoint or
// index key); the caller has checked the key is long enough.
func seqOf(key []byte) uint64 {
	return binary.BigEndian.Uint64(key[len(key)-8:])
}

// parseSeqKey returns the seq of prefix ‖ be64(seq); ok is false for a key
// of any other length (a malformed key under prefix).
func parseSeqKey(prefix string, k []byte) (seq uint64, ok bool) {
	if len(k) != len(prefix)+8 {
		return 0, false
	}
	return seqOf(k), true
}

// parseActionKey returns the seq of an a/ key.
func parseActionKey(k []byte) (uint64, bool) { return parseSeqKey(prefixAction, k) }

// parseCheckpointKey returns the seq of a c/ key.
func parseCheckpointKey(k []byte) (uint64, bool) { return parseSeqKey(prefixCheckpoint, k) }

// parseTreeKey returns the level and index of a t/ key.
func parseTreeKey(k []byte) (level uint, index uint64, ok bool) {
	if len(k) != treeKeyLen {
		return 0, 0, false
	}
	return uint(k[len(prefixTree)]), binary.BigEndian.Uint64(k[len(prefixTree)+1:]), true
}

// indexKeySeq returns the seq an i/ key ends with (0 for a key too short
// to hold one).
func indexKeySeq(k []byte) uint64 {
	if len(k) < len(prefixIndex)+8 {
		return 0
	}
	return seqOf(k)
}

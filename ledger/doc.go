// Package ledger records ralph's causal chain: an append-only, hash-chained,
// Ed25519-signed sequence of actions stored in Badger, with indexes for
// queries, a live tail for subscribers and a verifier a third party can
// reimplement from docs/ledger.md.
//
// Every key the store writes, its builder and its parser, and the
// namespaces of the kv table are in layout.go, nowhere else; docs/ledger.md
// §2 lists the same keys (a test holds the two equal), and §20 follows one
// action from Append to the witness.
//
// Invariants:
//   - seq is gap-free and starts at 1: action n is stored under a/<be64 n>
//     and its canonical encoding names n.
//   - action_hash = SHA-256(canonical encoding) and
//     chain_hash[n] = SHA-256(chain_hash[n-1] ‖ action_hash[n] ‖ be64(n)),
//     with chain_hash[0] = 32 zero bytes.
//   - The head, every index entry and the checkpoint of a commit change in
//     the same Badger transaction as the actions they describe: a reader or a
//     crash never sees one without the other.
//   - One writer goroutine owns seq, the head and the chain; Append sends to
//     it and waits until its action is durable (per Options.SyncWrites).
//   - Each commit ends with exactly one checkpoint c/<be64 last seq> signing
//     {seq, chain_hash, time}; every action in the commit records that
//     checkpoint's seq as its checkpoint_seq.
//   - Subscribers never block the writer: a slow subscriber catches up from
//     the store instead of the writer waiting or dropping actions.
//   - Stored actions are never rewritten or deleted by this package; Verify
//     reports the first seq where the stored chain disagrees with itself.
//   - The kv writes that are an action's effect (Action.KV) commit in its
//     transaction or not at all.
//   - No open lets Badger cut a log before the store was compared with its
//     witness and the tail the cut would drop was read (view.go,
//     waltail.go): a store behind its witness, or with whole commits
//     after damage in a log, opens read-only and refuses every append.
//   - A witness that could not be written is reported once and recorded
//     under m/witness-failed; Verify names it until a saved checkpoint it
//     proves consistent covers it (witness_fail.go).
//   - No Badger file is opened before it was read here with panics
//     recovered (precheck.go), and no commit starts without the free space
//     Badger may need for it (diskspace.go).
package ledger

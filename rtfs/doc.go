// Package rtfs implements RTFS, ralph's kernel language for plans, contracts
// and completion predicates: a reader with positions, a canonical printer,
// and a compiler from syntax to Go closures that runs under fuel and depth
// limits.
//
// Invariants:
//   - Every syntax node carries its line:col; every read, compile and run-time
//     error names file:line:col.
//   - Values are immutable; Print is canonical and Read(Print(v)) equals v for
//     every value that holds no function.
//   - Names are resolved at compile time to frame slots or builtins: evaluation
//     does no map look-ups by name and never copies an environment.
//   - Evaluation is bounded: fuel counts calls and produced elements, depth
//     counts nested calls; exhausting either, or cancelling the context, is an
//     error that try/catch cannot swallow.
//   - Pure programs (contracts, predicates, ralph eval) cannot contain call or
//     step forms; plan programs reach capabilities only through Host.
//   - recur is compiled only in tail position of its loop or fn, so the
//     signal it returns never leaves them; a loop pass allocates nothing
//     unless a closure keeps its frame.
//   - Sets, like map keys, are observed in canonical order only.
//
// Value is a three-word tagged struct; strings, sequences, maps and
// functions point at immutable data, so ints, floats, booleans and nil never
// allocate and sequences can share structure (rest does not copy).
package rtfs

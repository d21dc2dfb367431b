// Package capability is the registry of what plans may call: each
// capability has a spec (id, version, input and output schemas as RTFS
// type expressions, declared effects, risk tier, examples, and an
// attestation id hashing all of it) and a handler.
//
// Invariants:
//   - Arguments reach a handler only after InputFrom has shaped and
//     checked them against the spec's input schema.
//   - Risk and effects are declared by specs, never inferred from names.
//   - A Registry is filled before use and only read afterwards.
package capability

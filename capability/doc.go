// Package capability is the registry of what plans may call: each
// capability has a spec (id, version, input and output schemas as RTFS
// type expressions, declared effects, risk tier, examples, and an
// attestation id hashing all of it) and a handler.
//
// Invariants:
//   - Arguments reach a handler only after InputFrom has shaped and
//     checked them against the spec's input schema.
//   - Risk and effects are declared by specs, never inferred from names;
//     so is every other fact code asks of a capability (the program or
//     agent CLI a call runs, whether its result echoes stored text, whether
//     it stores its result in the kv, whether it prints an agent's output,
//     the metadata it records): each is a field of Spec, and no code
//     outside a capability's owner compares its id.
//   - A Registry is filled before use and only read afterwards.
//
// The built-in capabilities are rows of capability/builtin; its doc says
// how to add one.
package capability

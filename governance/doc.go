// Package governance enforces the constitution: named rules (allow/deny
// globs, the shell allowlist, required contracts and compensations,
// contract purity, a step limit) applied to a plan at admission and to
// every call again at run time.
//
// Invariants:
//   - Admission derives the capabilities and effects a plan requires from its
//     AST; a non-literal capability id is refused, never guessed.
//   - Every decision names the rule ids that made it and gives one reason per
//     refusal with the plan position.
//   - Risk is whatever a capability's spec declares; nothing is inferred from
//     names, and nothing is approved automatically.
package governance

// Package runsource is where ralph mcp and ralph web read runs and steer
// them: a local store (Store: opened read-only for each request, or
// reached through its socket while a ralph holds it) or a fleet (Fleet:
// each run's chain rebuilt from the fleet's stream per request). Both
// satisfy mcpserver.Source, and add what the web needs beyond it: a live
// run's event stream, approvals, and (for a fleet) its workers.
//
// Invariants:
//   - Every request opens what it reads and closes it again: a source never
//     keeps a store open, so it never keeps a run from starting.
//   - A store that does not exist yet is no error at start: each request
//     says there is none, and how to make one.
//   - Controls reach only a run a process runs now: a local store's by its
//     socket (whose peer is checked to be the store's owner), a fleet's as
//     a control signed with the member's credentials (§17).
package runsource

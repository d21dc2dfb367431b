// Package sealenv keeps the environment's secrets (a model's API key, any
// variable whose name looks like a credential) away from the processes
// ralph starts and from /proc (DESIGN §18): Hide, ralph's first act, runs
// ralph again without them in its initial environment and takes them back
// on an inherited pipe; HandOver starts another ralph the same way.
//
// Invariants: a secret handed over never appears in a started ralph's
// initial environment, only on the descriptor RALPH_SEALED_FD names, which
// is read once and closed; as root, no thread of ralph keeps a bounding,
// ambient or inheritable capability once Hide returns, so no command it
// starts has one; every step is best effort, so where the kernel refuses
// ralph goes on with the secrets where they were (and Hide says so).
package sealenv

// Package config reads ralph.toml (DESIGN §4): the intent, model, plan,
// loop, stop conditions, governance and store sections, with defaults and
// environment overrides.
//
// Invariants:
//   - Unknown keys and bad values are errors that name file:line.
//   - Paths in a loaded Config are absolute, anchored at the config file.
//   - Secrets are never part of a Config: API keys are read from the
//     environment variable api_key_env names, Snapshot redacts
//     credentials in URLs, and RefuseCredential refuses a config submitted
//     to a fleet whose text carries one (credential.go).
package config

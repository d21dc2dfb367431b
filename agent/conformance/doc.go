// Package conformance runs ralph with the real agent CLIs (Claude Code,
// Codex, Gemini CLI, OpenCode; pinned in agents/package.json) against the
// mock model server of internal/mockmodel, as a user runs them: `ralph init
// --agent X` in a Go module whose test fails, then `ralph run`. It holds
// only tests; `make test-agents` installs the CLIs and runs them. Without
// RALPH_AGENTS_BIN (the directory install.sh prints, plus /bin) every test
// skips and says why.
package conformance

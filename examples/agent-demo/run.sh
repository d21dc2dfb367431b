#!/usr/bin/env bash
# examples/agent-demo/run.sh [RALPH [DIR]]: the README's agent loop, with no
# agent installed, no key and no network. It writes a Go module whose Add
# subtracts into DIR/demo (default: a new temporary directory), writes its
# agent loop with `ralph init --agent claude`, and runs it headless with the
# repository's stand-in claude (agent/testdata/bin, which speaks Claude
# Code's stream format) first on PATH. The stand-in edits progress.txt on
# each call and, on its third, runs FAKE_AGENT_ON_DONE, which fixes Add; the
# tests then pass and the run ends with exit 0. `make demo-agent` runs it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ralph=${1:-$root/bin/ralph}
base=${2:-$(mktemp -d)}
work=$base/demo
mkdir -p "$work" "$base/fake-agent-state"
cd "$work"

cat > go.mod <<'MOD'
module example.com/calc

go 1.22
MOD
printf 'package calc\n\nfunc Add(a, b int) int { return a - b }\n' > calc.go
cat > calc_test.go <<'TEST'
package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 3); got != 5 {
		t.Fatalf("Add(2, 3) = %d, want 5", got)
	}
}
TEST

export PATH="$root/agent/testdata/bin:$PATH"
export FAKE_AGENT_STATE="$base/fake-agent-state" # the call counter, outside the project
export FAKE_AGENT_ON_DONE="printf 'package calc\n\nfunc Add(a, b int) int { return a + b }\n' > calc.go"

echo "\$ ralph init --agent claude --test \"go test ./...\"   # in $work"
"$ralph" init --agent claude --test "go test ./..."
# The stand-in agent runs unconfined: this demo shows the loop, not the
# sandbox init configured (docs/sandbox.md shows that).
echo "\$ ralph run --no-tui --sandbox off"
"$ralph" run --no-tui --sandbox off

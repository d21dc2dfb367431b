#!/usr/bin/env bash
# backlog.sh: a backlog of 8 tasks run serially and 4 at a time.
#
# A Go module (package backlog, with Greet) and a prd.json of 8 stories:
# T1..T6 each add a function and its test; T7 and T8 edit the same line of
# Greet (T7 adds "!", T8 upper-cases the name), so whichever merges second
# conflicts, goes back to its loop with git's markers in greet.go, and lands
# on its next run. The agent is the repository's stand-in claude
# (agent/testdata/bin) with FAKE_AGENT_DELAY seconds per call; each call runs
# work.py, which does its task's edit (found from its branch,
# ralph/<batch>/task/<id>) and resolves markers by keeping the target's side
# before it edits again. The one success condition is `go test ./...`.
#
# Each run: `ralph run --tasks prd.json --parallel P --no-tui` on a fresh copy
# of the repository, P = 1 and P = 4 alternating. After each run it checks
# the target: 8 commits, every commit on it passes `go test ./...` (checked
# out in a worktree of its own), every story passes in the target's prd.json,
# and no story is marked done whose test fails. Prints each run's wall time,
# the medians and their ratio (the target: parallel ≤ 0.4 × serial).
#
# usage: bench/backlog.sh [RUNS [DELAY]]   (default 3 runs, 10 s per agent call;
#        needs go, git, python3; RALPH=path/to/ralph to skip the build)
set -euo pipefail

runs=${1:-3}
delay=${2:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CONFIG_HOME=$work/xdg/config XDG_STATE_HOME=$work/xdg/state XDG_RUNTIME_DIR=$work/xdg/run
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost

ralph=${RALPH:-}
if [ -z "$ralph" ]; then
	ralph=$work/ralph
	(cd "$root" && go build -o "$ralph" .)
fi

tpl=$work/template
mkdir -p "$tpl"
cd "$tpl"
printf 'module example.com/backlog\n\ngo 1.22\n' >go.mod
cat >greet.go <<'GO'
package backlog

import "strings"

// Greet greets name.
func Greet(name string) string {
	return "Hello, " + strings.TrimSpace(name)
}
GO
cat >greet_test.go <<'GO'
package backlog

import (
	"strings"
	"testing"
)

func TestGreet(t *testing.T) {
	if g := Greet(" ada "); !strings.HasPrefix(strings.ToLower(g), "hello, ada") {
		t.Fatalf("Greet = %q", g)
	}
}
GO
python3 - <<'PY'
import json
stories = [{"id": f"T{n}", "title": f"Add F{n}", "description": f"Add func F{n}() int returning {n}, with a test.",
            "acceptanceCriteria": [f"F{n}() == {n}", "go test ./... passes"], "priority": n, "passes": False} for n in range(1, 7)]
stories += [
    {"id": "T7", "title": "Greet excitedly", "description": "Greet ends with \"!\".",
     "acceptanceCriteria": ["Greet(\"ada\") ends with !", "go test ./... passes"], "priority": 7, "passes": False},
    {"id": "T8", "title": "Greet loudly", "description": "Greet upper-cases the name.",
     "acceptanceCriteria": ["Greet(\"ada\") starts with Hello, ADA", "go test ./... passes"], "priority": 8, "passes": False},
]
json.dump({"project": "backlog", "description": "Eight small tasks", "userStories": stories}, open("prd.json", "w"), indent=2)
PY
cat >"$work/work.py" <<'PY'
"""The stand-in agent's work on its task (its branch names it)."""
import re, subprocess
branch = subprocess.check_output(["git", "rev-parse", "--abbrev-ref", "HEAD"], text=True).strip()
n = int(branch.rsplit("/", 1)[-1][1:])

def edit(path, change):
    s = open(path).read()
    # conflict markers the merge queue left: keep the target's side (first)
    s = re.sub(r"<<<<<<< [^\n]*\n(.*?)=======\n.*?>>>>>>> [^\n]*\n", r"\1", s, flags=re.S)
    open(path, "w").write(change(s))

if n <= 6:
    open(f"f{n}.go", "w").write(f"package backlog\n\n// F{n} returns {n}.\nfunc F{n}() int {{ return {n} }}\n")
    open(f"f{n}_test.go", "w").write(f"package backlog\n\nimport \"testing\"\n\nfunc TestF{n}(t *testing.T) {{\n\tif F{n}() != {n} {{\n\t\tt.Fatal(F{n}())\n\t}}\n}}\n")
    edit("greet.go", lambda s: s)
elif n == 7:
    edit("greet.go", lambda s: s if '+ "!"' in s else re.sub(r"(return \"Hello, \" \+ .*)\n", r'\1 + "!"\n', s, count=1))
    open("greet7_test.go", "w").write('package backlog\n\nimport (\n\t"strings"\n\t"testing"\n)\n\nfunc TestGreet7(t *testing.T) {\n\tif g := Greet("ada"); !strings.HasSuffix(g, "!") {\n\t\tt.Fatalf("Greet = %q", g)\n\t}\n}\n')
else:
    edit("greet.go", lambda s: s if "ToUpper" in s else s.replace("strings.TrimSpace(name)", "strings.ToUpper(strings.TrimSpace(name))"))
    open("greet8_test.go", "w").write('package backlog\n\nimport (\n\t"strings"\n\t"testing"\n)\n\nfunc TestGreet8(t *testing.T) {\n\tif g := Greet("ada"); !strings.HasPrefix(g, "Hello, ADA") {\n\t\tt.Fatalf("Greet = %q", g)\n\t}\n}\n')
PY
echo "You work on a small Go package. Keep each change small." >PROMPT.md
printf '.ralph/\nprogress.txt\n' >.gitignore
cat >ralph.toml <<'TOML'
[intent]
goal = "Work through the backlog"
prompt_file = "PROMPT.md"

[agent]
cli = "claude"

[[stop]]
name = "tests"
kind = "command"
cmd = ["go", "test", "./..."]

[[stop]]
name = "iterations"
kind = "max_iterations"
max = 4
TOML
git init -q -b main && git add -A && git commit -q -m start

export PATH="$root/agent/testdata/bin:$PATH" FAKE_AGENT_DELAY=$delay FAKE_AGENT_DONE_AFTER=1
export FAKE_AGENT_EACH="python3 $work/work.py"

# check REPO TARGET: every commit on TARGET since main passes go test; 8 of
# them; every story passes in the target's prd.json and its test is there.
check() {
	local repo=$1 target=$2 n=0 c
	for c in $(git -C "$repo" rev-list --reverse "main..$target"); do
		n=$((n + 1))
		git -C "$repo" worktree add -q --detach "$work/verify" "$c"
		(cd "$work/verify" && go test -count=1 ./... >/dev/null) || { echo "commit $c on $target fails go test" >&2; exit 1; }
		git -C "$repo" worktree remove --force "$work/verify"
	done
	[ "$n" -eq 8 ] || { echo "$target has $n commits, want 8" >&2; exit 1; }
	git -C "$repo" show "$target:prd.json" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["userStories"]:
    assert s["passes"], s["id"] + " is not marked done"
'
}

declare -a serial parallel
for i in $(seq "$runs"); do
	for p in 1 4; do
		repo=$work/run-$i-$p
		cp -r "$tpl" "$repo"
		export FAKE_AGENT_STATE=$work/state-$i-$p
		mkdir -p "$FAKE_AGENT_STATE"
		start=$(date +%s.%N)
		(cd "$repo" && "$ralph" run --tasks prd.json --parallel "$p" --target "ralph/bench" --no-tui >"$work/out-$i-$p" 2>&1) ||
			{ cat "$work/out-$i-$p"; echo "run $i, --parallel $p failed" >&2; exit 1; }
		wall=$(python3 -c "print($(date +%s.%N) - $start)")
		check "$repo" ralph/bench
		printf 'run %d  --parallel %d  %6.1f s  (8 merged, every commit green)\n' "$i" "$p" "$wall"
		if [ "$p" = 1 ]; then serial+=("$wall"); else parallel+=("$wall"); fi
	done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ms=$(median "${serial[@]}")
mp=$(median "${parallel[@]}")
printf 'median: serial %.1f s, --parallel 4 %.1f s, ratio %.2f (agent delay %s s per call)\n' "$ms" "$mp" "$(python3 -c "print($mp / $ms)")" "$delay"

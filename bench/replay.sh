#!/usr/bin/env bash
# replay.sh: how long `ralph replay` takes over a 1,000-iteration recorded run
# without reruns (target: ≤ 1 s, DESIGN §19).
#
# A static plan (one ccos.echo step) runs 1,000 iterations under `ralph run`
# (sync_writes = false, so recording is quick; checkpoints off: the replay
# reads the chain only), stopped by max_iterations = 1000. Then another
# configuration is replayed against it RUNS times: a predicate, an
# output_pattern, consecutive_failures, no_progress (on the recorded
# verdicts), max_cost and a tighter max_iterations = 990, which is where it
# would have stopped. Prints each replay's wall time and the median.
#
# usage: bench/replay.sh [RUNS]     (default 5; needs go, or RALPH=path/to/ralph)
set -euo pipefail

runs=${1:-5}
iters=1000
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CONFIG_HOME=$work/xdg-config XDG_STATE_HOME=$work/xdg-state XDG_RUNTIME_DIR=$work/xdg-run

ralph=${RALPH:-}
if [ -z "$ralph" ]; then
	ralph=$work/ralph
	(cd "$root" && go build -o "$ralph" .)
fi

mkdir -p "$work/loop"
cat >"$work/loop/ralph.toml" <<TOML
[intent]
goal = "a long recorded run"

[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message (str "iteration " (:iteration ctx))}))'

[loop]
checkpoints = false

[[stop]]
name = "iterations"
kind = "max_iterations"
max = $iters

[store]
dir = "$work/store"
sync_writes = false
TOML
sed -e "s/max = $iters/max = 990/" "$work/loop/ralph.toml" >"$work/loop/other.toml"
cat >>"$work/loop/other.toml" <<'TOML'

[[stop]]
name = "echoed-2000"
kind = "predicate"
rtfs = '(>= (audit.count "ccos.echo" :succeeded) 2000)'

[[stop]]
name = "promise"
kind = "output_pattern"
pattern = "<promise>DONE</promise>"

[[stop]]
name = "broken"
kind = "consecutive_failures"
count = 3

[[stop]]
name = "stuck"
kind = "no_progress"
iterations = 1000

[[stop]]
name = "budget"
kind = "max_cost"
usd = 5.0
TOML

t0=$(date +%s%N)
(cd "$work/loop" && "$ralph" run --no-tui >/dev/null) || [ $? -eq 3 ]
t1=$(date +%s%N)
run=$(cd "$work/loop" && "$ralph" runs --json | head -1 | sed -e 's/.*"id":"\([^"]*\)".*/\1/')
echo "recorded $iters iterations in $(( (t1 - t0) / 1000000 )) ms (run $run)"

# Wall time is what the target is about; CPU time (user + sys) says how much
# of it is ralph's own work on a machine other jobs share.
TIMEFORMAT='%R %U %S'
walls=() cpus=()
for i in $(seq "$runs"); do
	t=$( { time (cd "$work/loop" && "$ralph" replay "$run" --config other.toml --json >"$work/replay.json" 2>/dev/null || [ $? -eq 3 ]); } 2>&1)
	[ -s "$work/replay.json" ] && grep -q '"exit_code":3' "$work/replay.json" ||
		{ echo "replay did not say exit 3 (a limit at iteration 990)" >&2; exit 1; }
	read -r real user sys <<<"$t"
	wall=$(awk -v r="$real" 'BEGIN {printf "%d", r * 1000}')
	cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%d", (u + s) * 1000}')
	walls+=("$wall") cpus+=("$cpu")
	echo "replay $i: ${wall} ms wall, ${cpu} ms CPU"
done
grep -o '"summary":"[^"]*"' "$work/replay.json"
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median replay of $iters iterations: $(median "${walls[@]}") ms wall, $(median "${cpus[@]}") ms CPU (target ≤ 1000 ms)"

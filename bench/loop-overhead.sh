#!/usr/bin/env bash
# loop-overhead.sh: what ralph adds per iteration of an agent loop.
#
# An agent that returns at once (reads its prompt, prints one line) runs 20
# times under `ralph run` (provider "agent", sync_writes = true, the only stop
# condition max_iterations = 20), and 20 times from a bash loop, in the same
# run, alternating. The overhead per iteration is
#   (ralph's wall time − the bash loop's wall time) / 20,
# so it includes ralph's start-up, every action recorded and made durable, the
# plan written, admitted and executed, and the stop conditions evaluated.
# Prints each run's figures and the medians.
#
# usage: bench/loop-overhead.sh [RUNS]     (default 7; needs go, or RALPH=path/to/ralph)
set -euo pipefail

runs=${1:-7}
iters=20
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ralph=${RALPH:-}
if [ -z "$ralph" ]; then
	ralph=$work/ralph
	(cd "$root" && go build -o "$ralph" .)
fi

cat >"$work/agent" <<'AGENT'
#!/bin/sh
# An agent that returns at once: it reads the prompt and answers.
cat >/dev/null
echo "nothing to do"
AGENT
chmod +x "$work/agent"

mkdir -p "$work/loop"
cat >"$work/loop/ralph.toml" <<TOML
[intent]
goal = "measure the loop's overhead"

[agent]
cli = "command"
command = ["$work/agent"]

[[stop]]
kind = "max_iterations"
max = $iters

[store]
dir = "$work/store"
sync_writes = ${SYNC:-true}
TOML
echo "Fix the tests." >"$work/prompt.txt"

now_ns() { date +%s%N; }

ralph_run() {
	rm -rf "$work/store"
	local t0 t1
	t0=$(now_ns)
	"$ralph" run "$work/loop/ralph.toml" --no-tui >"$work/out.txt" 2>&1 || [ $? -eq 3 ] || {
		cat "$work/out.txt" >&2
		exit 1
	}
	t1=$(now_ns)
	grep -q "stopped after $iters iteration(s)" "$work/out.txt" || {
		cat "$work/out.txt" >&2
		exit 1
	}
	echo $((t1 - t0))
}

bash_run() {
	local t0 t1 i
	t0=$(now_ns)
	for ((i = 1; i <= iters; i++)); do
		"$work/agent" <"$work/prompt.txt" >/dev/null
	done
	t1=$(now_ns)
	echo $((t1 - t0))
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

ralph_run >/dev/null # warm the caches once
printf '%-4s %14s %14s %16s\n' run ralph_ms/iter bash_ms/iter overhead_ms/iter
: >"$work/r"
: >"$work/b"
: >"$work/o"
for ((r = 1; r <= runs; r++)); do
	rn=$(ralph_run)
	bn=$(bash_run)
	echo "$rn" >>"$work/r"
	echo "$bn" >>"$work/b"
	echo $((rn - bn)) >>"$work/o"
	awk -v r="$r" -v rn="$rn" -v bn="$bn" -v n="$iters" \
		'BEGIN {printf "%-4d %14.2f %14.2f %16.2f\n", r, rn/n/1e6, bn/n/1e6, (rn-bn)/n/1e6}'
done
awk -v r="$(median <"$work/r")" -v b="$(median <"$work/b")" -v o="$(median <"$work/o")" -v n="$iters" -v runs="$runs" \
	'BEGIN {printf "median of %d runs: ralph %.2f ms/iter, bash %.2f ms/iter, overhead %.2f ms/iter\n", runs, r/n/1e6, b/n/1e6, o/n/1e6}'

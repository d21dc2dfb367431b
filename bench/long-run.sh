#!/usr/bin/env bash
# long-run.sh: a headless run's memory against the chain's length.
#
# A loop whose iterations are as quick as ralph can make them (provider
# "static", one ccos.echo step, no delay) runs ITERS iterations (default
# 20,000) under `ralph run --no-tui`. Its resident set (VmRSS in
# /proc/PID/status, read every 50 ms) is taken at its trough over the 300
# iterations up to 2,000 (ITERS/10) and over the 300 up to ITERS-50, just
# before the end (between them Badger's flushes and compactions come and
# go); the peak so far (VmHWM) is read then too. Then: the store's bytes
# per iteration (du) and the wall time of `ralph chain verify` on it.
# Target (DESIGN §18): RSS at 20k ≤ 1.1 × RSS at 2k, both ≤ 128 MiB.
#
# usage: bench/long-run.sh [ITERS]     (needs go, or RALPH=path/to/ralph; SYNC=true for durable commits)
set -euo pipefail

iters=${1:-20000}
early=$((iters / 10))
late=$((iters - 50))
window=$((early < 600 ? early / 2 : 300))
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
export HOME=$work XDG_CONFIG_HOME=$work/config XDG_STATE_HOME=$work/state XDG_RUNTIME_DIR=$work/run

ralph=${RALPH:-}
if [ -z "$ralph" ]; then
	ralph=$work/ralph
	(cd "$root" && go build -o "$ralph" .)
fi

mkdir -p "$work/loop"
cat >"$work/loop/ralph.toml" <<TOML
[intent]
goal = "measure memory against the chain's length"

[model]
provider = "static"

[plan]
rtfs = '(do (step "Greet" (call :ccos.echo {:message "hi"})))'

[governance]
allow = ["ccos.*"]

[[stop]]
kind = "max_iterations"
max = $iters

[store]
dir = "$work/store"
sync_writes = ${SYNC:-false}
TOML

rss_kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
iteration() { tail -c 300 "$work/out.txt" 2>/dev/null | awk '$2 == "it" {n=$3} END {print n+0}'; }

t0=$(date +%s%N)
"$ralph" run "$work/loop/ralph.toml" --no-tui >"$work/out.txt" 2>&1 &
pid=$!
rss_early= rss_late= anon_early= anon_late= hwm=
# trough: the lowest RSS (and its anonymous part) seen while the iteration is in (from, to]
trough() { # var_rss var_anon
	local r a
	r=$(rss_kib "$pid" VmRSS) a=$(rss_kib "$pid" RssAnon)
	if [ -z "${!1}" ] || [ "$r" -lt "${!1}" ]; then
		printf -v "$1" %s "$r"
		printf -v "$2" %s "$a"
	fi
}
while kill -0 "$pid" 2>/dev/null; do
	it=$(iteration)
	if [ "$it" -gt $((early - window)) ] && [ "$it" -le "$early" ]; then
		trough rss_early anon_early
	fi
	if [ "$it" -gt $((late - window)) ] && [ "$it" -le "$late" ]; then
		trough rss_late anon_late
		hwm=$(rss_kib "$pid" VmHWM)
	fi
	sleep 0.05
done
wait "$pid" || [ $? -eq 3 ] || {
	tail -5 "$work/out.txt" >&2
	exit 1
}
t1=$(date +%s%N)
grep -q "stopped after $iters iteration(s)" "$work/out.txt" || {
	tail -5 "$work/out.txt" >&2
	exit 1
}
[ -n "$rss_early" ] && [ -n "$rss_late" ] || {
	echo "the run ended before both samples were taken" >&2
	exit 1
}
store_bytes=$(du -sb "$work/store" | awk '{print $1}')
actions=$("$ralph" chain verify --store "$work/store" | awk '$1 == "verified" {print $2}')
v0=$(date +%s%N)
"$ralph" chain verify --store "$work/store" >/dev/null
v1=$(date +%s%N)
awk -v n="$iters" -v e="$early" -v l="$late" -v re="$rss_early" -v rl="$rss_late" -v h="$hwm" -v ae="$anon_early" -v al="$anon_late" -v sb="$store_bytes" \
	-v a="$actions" -v rt=$((t1 - t0)) -v vt=$((v1 - v0)) 'BEGIN {
	printf "iterations %d (%d actions) in %.1f s, %.2f ms/iter\n", n, a, rt/1e9, rt/n/1e6
	printf "RSS trough up to iteration %d: %.1f MiB (%.1f MiB anonymous)\n", e, re/1024, ae/1024
	printf "RSS trough up to iteration %d: %.1f MiB (%.1f MiB anonymous), %.2f x; peak so far %.1f MiB\n", l, rl/1024, al/1024, rl/re, h/1024
	printf "store: %.1f MiB, %.0f bytes/iteration\n", sb/1048576, sb/n
	printf "chain verify: %.2f s (%.1f us/action)\n", vt/1e9, vt/a/1e3
}'

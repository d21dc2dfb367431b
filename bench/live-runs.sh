#!/bin/sh
# live-runs.sh: wall time of `ralph runs` on a store with 1M actions while a
# running ralph holds it (the command then reads it through the store's
# socket). Prints hyperfine's summary (median of 30 runs), or the median of a
# plain loop when hyperfine is not installed.
#
#   bench/live-runs.sh [ACTIONS]     (default 1000000; needs go and python3)
set -eu
n=${1:-1000000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
# Keep the script's own status: the held run, stopped here, ends "aborted".
trap 'st=$?; set +e; [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; exit $st' EXIT
export XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/state" XDG_RUNTIME_DIR="$work/run"
(cd "$root" && go build -o "$work/ralph" .)
ralph="$work/ralph"
store="$work/store"

# n actions of a typical size (a capability call with its arguments, result
# and metadata), as JSON lines; import re-chains and signs them.
python3 - "$n" > "$work/chain.jsonl" <<'PY'
import json, sys
n = int(sys.argv[1])
out = sys.stdout
for i in range(n):
    out.write(json.dumps({
        "seq": 0, "run_id": "bench-run-%d" % (i // 10000), "action_id": "bench-%08d" % i,
        "plan_id": "plan-%d" % (i // 10), "intent_id": "intent-bench", "action_type": "CapabilityCall",
        "function_name": "shell.exec", "arguments": [{":cmd": "go", ":args": ["test", "./..."]}],
        "result": {":exit": 0, ":stdout": "ok  \tgithub.com/ralphloop/ralph/ledger\t1.%03ds\n" % (i % 1000)},
        "success": True, "cost": 0, "duration_ms": 1200 + i % 300,
        "timestamp": "2026-01-01T00:00:00.%09dZ" % i,
        "metadata": {"exit": "0", "cmd": "go"}, "checkpoint_seq": 0}, separators=(",", ":")))
    out.write("\n")
PY
"$ralph" chain import --store "$store" < "$work/chain.jsonl"

# A loop that runs for as long as the measurement takes, holding the store.
cat > "$work/ralph.toml" <<'TOML'
[intent]
goal = "Hold the store"
[model]
provider = "static"
[plan]
rtfs = '(do (step "Greet" (call :ccos.echo {:message "hi"})))'
[loop]
delay = "1s"
[[stop]]
kind = "max_iterations"
max = 100000
[governance]
allow = ["ccos.*"]
TOML
"$ralph" run "$work/ralph.toml" --no-tui --store "$store" > "$work/run.log" 2>&1 &
pid=$!
until "$ralph" runs --store "$store" 2>/dev/null | grep -q running; do sleep 0.2; done

if command -v hyperfine > /dev/null; then
	hyperfine --warmup 3 --runs 30 --export-json "$work/runs.json" "$ralph runs --store $store"
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("median %.1f ms over %d runs" % (r["median"]*1000, len(r["times"])))' "$work/runs.json"
else
	python3 - "$ralph" "$store" <<'PY'
import statistics, subprocess, sys, time
times = []
for _ in range(30):
    t = time.perf_counter()
    subprocess.run([sys.argv[1], "runs", "--store", sys.argv[2]], check=True, stdout=subprocess.DEVNULL)
    times.append(time.perf_counter() - t)
print("median %.1f ms over %d runs" % (statistics.median(times) * 1000, len(times)))
PY
fi

#!/usr/bin/env bash
# agent-flood.sh: ralph's memory and throughput while an agent prints a flood.
#
# The real ralph binary runs one iteration (`ralph run --no-tui`, stop condition
# max_iterations = 1) of an agent that prints MB mebibytes (default 1024):
#   (a) plain text, cli = "command": numbered lines of prose;
#   (b) Claude Code stream-json, cli = "claude" (a stand-in `claude` on PATH):
#       a system init line, assistant text messages with usage, as in
#       agent/testdata/transcripts/claude.jsonl, and a closing result line.
# For each run it prints ralph's peak RSS (/usr/bin/time -v, maximum resident
# set size) and the throughput through the parser to the log file: the bytes
# the call recorded (output_bytes) over the call's duration (duration_ms on its
# CapabilityCall). It checks that the output file holds every byte (size and
# SHA-256 as recorded). Prints each run's figures and the medians.
# Targets: peak RSS <= 64 MiB; >= 100 MB/s plain text, >= 50 MB/s stream-json.
# SANDBOX (off, auto, landlock or bwrap; default: no [sandbox] at all) runs the
# agent under that [sandbox] mode, its flood files and programs readable ([sandbox] read):
# what confining the agent costs its output's way through ralph.
#
# usage: bench/agent-flood.sh [RUNS] [MB] [SANDBOX]   (default 3 1024; needs go, or RALPH=path/to/ralph)
set -euo pipefail

runs=${1:-3}
mb=${2:-1024}
sandbox=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ralph=${RALPH:-}
if [ -z "$ralph" ]; then
	ralph=$work/ralph
	(cd "$root" && go build -o "$ralph" .)
fi
[ -x /usr/bin/time ] || {
	echo "agent-flood.sh needs /usr/bin/time (GNU time) for the peak RSS" >&2
	exit 1
}

mkdir -p "$work/data"
# 64 MiB blocks, printed mb/64 times (the rest from a 1 MiB piece): the
# agent's own cost is a cat from the page cache.
awk 'BEGIN { for (i = 0; n < 1048576; i++) {
	l = sprintf("line %07d of the flood: the agent explains, at some length, what it is about to change and why.", i)
	if (n + length(l) + 1 > 1048576) break
	print l; n += length(l) + 1 } }' >"$work/data/plain.1m"
awk 'BEGIN { for (i = 0; n < 1048576; i++) {
	l = sprintf("{\"type\":\"assistant\",\"message\":{\"id\":\"msg_%08d\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[{\"type\":\"text\",\"text\":\"Step %d: I read calc.go and calc_test.go again; Add subtracts where it should add, so the fix is one line, and then I run go test ./... to check that TestAdd passes.\"}],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":4,\"cache_creation_input_tokens\":310,\"cache_read_input_tokens\":11800,\"output_tokens\":%d,\"service_tier\":\"standard\"}},\"parent_tool_use_id\":null,\"session_id\":\"8f1c2a4e-3b9d-4f6a-9c1e-2d7b5a0e6f31\",\"uuid\":\"0b6e8d2c-1f4a-4e5b-8a9c-%012d\"}", i, i, 40 + i % 50, i)
	if (n + length(l) + 1 > 1048576) break
	print l; n += length(l) + 1 } }' >"$work/data/claude.1m"
for kind in plain claude; do
	: >"$work/data/$kind.64m"
	for ((i = 0; i < 64; i++)); do cat "$work/data/$kind.1m" >>"$work/data/$kind.64m"; done
done

mkdir -p "$work/bin"
cat >"$work/bin/flood" <<AGENT
#!/bin/sh
# flood KIND: print $mb MiB of KIND's lines (with Claude's first and last lines).
cat >/dev/null
kind=\$1
if [ "\$kind" = claude ]; then
	echo '{"type":"system","subtype":"init","cwd":"$work","session_id":"8f1c2a4e-3b9d-4f6a-9c1e-2d7b5a0e6f31","tools":["Bash","Edit","Read"],"model":"claude-sonnet-4-5-20250929","permissionMode":"acceptEdits"}'
fi
i=0
while [ \$i -lt $((mb / 64)) ]; do cat "$work/data/\$kind.64m"; i=\$((i + 1)); done
i=0
while [ \$i -lt $((mb % 64)) ]; do cat "$work/data/\$kind.1m"; i=\$((i + 1)); done
if [ "\$kind" = claude ]; then
	echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":14210,"num_turns":3,"result":"Add now returns the sum; the tests pass.","session_id":"8f1c2a4e-3b9d-4f6a-9c1e-2d7b5a0e6f31","total_cost_usd":0.0371205,"usage":{"input_tokens":15,"cache_creation_input_tokens":5430,"cache_read_input_tokens":35400,"output_tokens":412}}'
fi
AGENT
cat >"$work/bin/claude" <<AGENT
#!/bin/sh
exec "$work/bin/flood" claude
AGENT
chmod +x "$work/bin/flood" "$work/bin/claude"

loop_config() { # KIND
	local agent
	if [ "$1" = claude ]; then
		agent='cli = "claude"'
	else
		agent="cli = \"command\"
command = [\"$work/bin/flood\", \"plain\"]"
	fi
	mkdir -p "$work/$1"
	cat >"$work/$1/ralph.toml" <<TOML
[intent]
goal = "measure an agent's flood"

[agent]
$agent
timeout = "30m"

[[stop]]
kind = "max_iterations"
max = 1

[store]
dir = "$work/store"
TOML
	if [ -n "$sandbox" ]; then
		cat >>"$work/$1/ralph.toml" <<TOML

[sandbox]
mode = "$sandbox"
read = ["$work/data", "$work/bin"]
TOML
	fi
}

# one KIND: prints "RSS_KIB MBPS"
one() {
	local kind=$1
	rm -rf "$work/store"
	PATH="$work/bin:$PATH" /usr/bin/time -v -o "$work/time.txt" "$ralph" run "$work/$kind/ralph.toml" --no-tui >"$work/out.txt" 2>"$work/err.txt" || [ $? -eq 3 ] || {
		cat "$work/err.txt" >&2
		exit 1
	}
	if [ -n "$sandbox" ] && [ "$sandbox" != off ] && ! head -1 "$work/out.txt" | grep -q ' · sandbox: '; then
		echo "the $kind run names no sandbox on its first line: $(head -1 "$work/out.txt")" >&2
		exit 1
	fi
	head -1 "$work/out.txt" | sed -n 's/.* · sandbox: \([^ ]*\).*/\1/p' >"$work/mechanism"
	local rss call bytes ms sha file
	rss=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$work/time.txt")
	call=$("$ralph" chain show --json --store "$work/store" | grep '"function_name":"agent.run"' | grep '"CapabilityCall"')
	bytes=$(echo "$call" | sed -n 's/.*"output_bytes":"\([0-9]*\)".*/\1/p')
	ms=$(echo "$call" | sed -n 's/.*"duration_ms":\([0-9]*\).*/\1/p')
	sha=$(echo "$call" | sed -n 's/.*"output_sha256":"\([0-9a-f]*\)".*/\1/p')
	file=$(echo "$call" | sed -n 's/.*"output_file":"\([^"]*\)".*/\1/p')
	[ -n "$bytes" ] && [ "$(stat -c %s "$work/store/$file")" = "$bytes" ] &&
		[ "$(sha256sum "$work/store/$file" | cut -d' ' -f1)" = "$sha" ] || {
		echo "the $kind call's output file does not match its record: $call" >&2
		exit 1
	}
	echo "$rss $(awk -v b="$bytes" -v ms="$ms" 'BEGIN { printf "%.1f", b / 1e6 / (ms / 1000) }')"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "agent-flood: $mb MiB per call, $runs runs, sandbox ${sandbox:-none}, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in plain claude; do
	loop_config "$kind"
	: >"$work/$kind.results"
	for ((r = 1; r <= runs; r++)); do
		res=$(one "$kind")
		echo "$res" >>"$work/$kind.results"
		printf '%-7s run %d: peak RSS %6.1f MiB, %7.1f MB/s\n' "$kind" "$r" "$(echo "$res" | awk '{ print $1 / 1024 }')" "$(echo "$res" | cut -d' ' -f2)"
	done
	if [ -s "$work/mechanism" ]; then
		echo "$kind: confined by $(cat "$work/mechanism")"
	fi
	printf '%-7s median: peak RSS %6.1f MiB, %7.1f MB/s\n' "$kind" \
		"$(cut -d' ' -f1 "$work/$kind.results" | median | awk '{ print $1 / 1024 }')" \
		"$(cut -d' ' -f2 "$work/$kind.results" | median)"
done

#!/bin/sh
# fleet-auth.sh: what authentication and TLS cost the fleet (DESIGN §17).
#
#   bench/fleet-auth.sh [ROUNDS] [RUNS] [WORKERS] [SLOTS]
#       (default 5 rounds of 60 runs, 2 workers × 4 slots; needs go, git, python3, openssl)
#
# Each round runs bench/fleet.sh twice, in alternating order: once with this
# tree's binary, authentication and TLS on (signed submits through the
# keeper, certified chain keys, tls:// on loopback), once with the binary of
# BASE (default 043f670, the last commit before fleet authentication),
# plain nats:// with no credentials. It prints each round's runs/s and
# dispatch p99, then the medians and their ratios (the target: within 15%).
# Failover is measured by bench/fleet.sh itself (FLEET_TLS=1 bench/fleet.sh).
set -eu
rounds=${1:-5}
runs=${2:-60}
workers=${3:-2}
slots=${4:-4}
base=${BASE:-043f670}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/ralph-auth" .)
mkdir "$work/base"
git -C "$root" archive "$base" | tar -x -C "$work/base"
(cd "$work/base" && go build -o "$work/ralph-base" .)
i=0
while [ $i -lt "$rounds" ]; do
	i=$((i + 1))
	order="auth base"
	[ $((i % 2)) = 0 ] && order="base auth"
	for m in $order; do
		if [ "$m" = auth ]; then
			RALPH_BIN="$work/ralph-auth" FLEET_TLS=1 FLEET_AUTH=1 FLEET_FAILOVER=0 sh "$root/bench/fleet.sh" "$runs" "$workers" "$slots" > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
		else
			RALPH_BIN="$work/ralph-base" FLEET_TLS=0 FLEET_AUTH=0 FLEET_FAILOVER=0 sh "$root/bench/fleet.sh" "$runs" "$workers" "$slots" > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
		fi
		rps=$(sed -n 's/^runs\/s *\([0-9.]*\).*/\1/p' "$work/out")
		p99=$(sed -n 's/^dispatch .*p99 \([0-9.]*\) ms.*/\1/p' "$work/out")
		echo "round $i $m runs/s $rps p99 $p99" | tee -a "$work/rounds"
	done
done
python3 - "$work/rounds" <<'PY'
import statistics, sys
r = {"auth": {"rps": [], "p99": []}, "base": {"rps": [], "p99": []}}
for l in open(sys.argv[1]):
    f = l.split()
    r[f[2]]["rps"].append(float(f[4])); r[f[2]]["p99"].append(float(f[6]))
m = {k: {q: statistics.median(v[q]) for q in v} for k, v in r.items()}
print(f"median runs/s      auth+TLS {m['auth']['rps']:.1f}   base {m['base']['rps']:.1f}   ratio {m['auth']['rps'] / m['base']['rps']:.2f}")
print(f"median dispatch p99 auth+TLS {m['auth']['p99']:.1f} ms   base {m['base']['p99']:.1f} ms   ratio {m['auth']['p99'] / m['base']['p99']:.2f}")
PY

#!/bin/sh
# fleet.sh: ralph's fleet on this machine, end to end with the real binary.
#
#   bench/fleet.sh [RUNS] [WORKERS] [SLOTS]     (default 200 runs, 4 workers × 4 slots; needs go and python3)
#
# 1. RUNS no-op one-iteration loops submitted to `ralph fleet serve` and run by
#    WORKERS `ralph worker --slots SLOTS`: runs/s (first submit → last run
#    ended) and dispatch latency (the job's submit time → its
#    IterationStarted on the chain) p50/p99.
# 2. Failover: a long run's worker is killed with -9; the time from the kill to
#    the run's next IterationStarted on another worker, against --ack-wait.
# Replication lag is BenchmarkFleet/replication-lag in fleet/ (make bench).
#
# Environment: RALPH_BIN runs that binary instead of building one;
# FLEET_TLS=1 serves TLS on loopback (a certificate made with openssl, clients
# trusting it with --tls-ca); FLEET_AUTH=0 drives a binary from before fleet
# authentication (no --creds anywhere); FLEET_FAILOVER=0 skips part 2.
# bench/fleet-auth.sh compares authentication and TLS against that baseline.
set -eu
runs=${1:-200}
workers=${2:-4}
slots=${3:-4}
ackwait=${ACK_WAIT:-5s}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=
wpids=
# Workers stop before the server (a stopping worker hands its runs back through NATS).
trap 'st=$?; set +e; for p in $wpids; do kill "$p" 2>/dev/null; done; wait $wpids 2>/dev/null; for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; exit $st' EXIT
export XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/state" XDG_RUNTIME_DIR="$work/run"
if [ -n "${RALPH_BIN:-}" ]; then
	ralph=$RALPH_BIN
else
	(cd "$root" && go build -o "$work/ralph" .)
	ralph="$work/ralph"
fi
auth=${FLEET_AUTH:-1}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="nats://127.0.0.1:$port"
serveflags=
tlsca=
if [ "${FLEET_TLS:-0}" = 1 ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
		-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$work/key.pem" -out "$work/cert.pem" 2> /dev/null
	serveflags="--tls-cert $work/cert.pem --tls-key $work/key.pem"
	tlsca="--tls-ca $work/cert.pem"
	url="tls://127.0.0.1:$port"
fi
# shellcheck disable=SC2086
"$ralph" fleet serve --dir "$work/nats" --listen "127.0.0.1:$port" $serveflags > "$work/serve.log" 2>&1 &
pids="$pids $!"
# The fleet lets in only its members (docs/fleet.md): readers sign in as its
# viewer, workers and submitters with their own credentials.
creds="$work/nats/creds"
wcreds= screds=
if [ "$auth" = 1 ]; then
	export RALPH_NATS_CREDS="$creds/viewer.creds"
	wcreds="--creds $creds/worker.creds"
	screds="--creds $creds/submitter.creds"
fi
# Every reading command below gets $tlsca through the python parts too.
export FLEET_TLSCA="$tlsca"
i=0
# shellcheck disable=SC2086
until "$ralph" runs --nats "$url" $tlsca > /dev/null 2>&1; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$work/serve.log"; exit 1; }; sleep 0.1
done

cat > "$work/noop.toml" <<'TOML'
[intent]
goal = "no-op"
[model]
provider = "static"
[plan]
rtfs = '(step "Noop" (call :ccos.echo {:message "x"}))'
[loop]
delay = "0s"
[[stop]]
kind = "max_iterations"
max = 1
TOML

# The workers' policy lets the failover run's plan run sleep (without one a
# worker runs no program).
cat > "$work/worker.toml" <<'TOML'
[governance]
shell_allow = ["sleep"]
TOML

policy="--policy $work/worker.toml"
"$ralph" worker --help 2>&1 | grep -q -- --policy || policy= # a binary from before worker policies
n=0
while [ $n -lt "$workers" ]; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	"$ralph" worker --nats "$url" $wcreds $tlsca --slots "$slots" --dir "$work/w$n" --ack-wait "$ackwait" $policy > "$work/w$n.log" 2>&1 &
	wpids="$wpids $!"
	echo "$work/w$n $!" >> "$work/workers"
done

# Submit one after another (each `ralph submit` checks the config and admits
# its plan first); workers start on the first jobs while later ones queue.
n=0
while [ $n -lt "$runs" ]; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	"$ralph" submit "$work/noop.toml" --nats "$url" $screds $tlsca >> "$work/ids" 2>> "$work/submit.log"
done
python3 - "$ralph" "$url" "$work/ids" <<'PY'
import json, os, subprocess, sys, time
from datetime import datetime
ralph, url, idfile = sys.argv[1:4]
tls = os.environ.get("FLEET_TLSCA", "").split()
ids = [l.strip() for l in open(idfile) if l.strip()]
ended = {"succeeded", "failed", "limit", "aborted"}
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
deadline = time.time() + 900
while True:
    out = subprocess.run([ralph, "runs", "--nats", url, "--json"] + tls, capture_output=True, text=True, check=True).stdout
    rs = {r["run_id"]: r for r in (json.loads(l) for l in out.splitlines() if l.strip())}
    if all(rs.get(i, {}).get("state") in ended for i in ids):
        break
    if time.time() > deadline:
        sys.exit("runs did not end within 900s")
    time.sleep(0.2)
lat = []
for i in ids:
    out = subprocess.run([ralph, "chain", "show", "--nats", url, "--run", i, "--json"] + tls, capture_output=True, text=True, check=True).stdout
    first = next(json.loads(l) for l in out.splitlines() if '"IterationStarted"' in l)
    lat.append((ts(first["timestamp"]) - ts(rs[i]["submitted"])) * 1000)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(round(p * (len(lat) - 1))))]
t0 = min(ts(rs[i]["submitted"]) for i in ids)
t1 = max(ts(rs[i]["updated"]) for i in ids)
states = {}
for i in ids:
    states[rs[i]["state"]] = states.get(rs[i]["state"], 0) + 1
print(f"runs         {len(ids)} ({', '.join(f'{v} {k}' for k, v in sorted(states.items()))})")
print(f"runs/s       {len(ids) / (t1 - t0):.1f}  (first submit → last run ended: {t1 - t0:.2f}s)")
print(f"dispatch     p50 {q(0.5):.1f} ms  p99 {q(0.99):.1f} ms  max {lat[-1]:.1f} ms  (submit → IterationStarted)")
PY

[ "${FLEET_FAILOVER:-1}" = 1 ] || exit 0

# Failover: one long run; kill -9 the worker that holds it.
cat > "$work/long.toml" <<'TOML'
[intent]
goal = "a long run"
[model]
provider = "static"
[plan]
rtfs = '(step "Wait" (call :shell.exec {:cmd "sleep" :args ["1"]}))'
[governance]
shell_allow = ["sleep"]
[loop]
delay = "0s"
[[stop]]
kind = "max_iterations"
max = 30
TOML
# shellcheck disable=SC2086
id=$("$ralph" submit "$work/long.toml" --nats "$url" $screds $tlsca 2>> "$work/submit.log")
python3 - "$ralph" "$url" "$id" "$ackwait" "$work" <<'PY'
import json, os, re, signal, subprocess, sys, time
from datetime import datetime
ralph, url, rid, ackwait, work = sys.argv[1:6]
tls = os.environ.get("FLEET_TLSCA", "").split()
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
def state():
    out = subprocess.run([ralph, "runs", "--nats", url, "--json"] + tls, capture_output=True, text=True, check=True).stdout
    return next(r for r in (json.loads(l) for l in out.splitlines() if l.strip()) if r["run_id"] == rid)
while True:
    r = state()
    if r["state"] == "running" and r["iteration"] >= 2:
        break
    time.sleep(0.1)
pid = None
for l in open(os.path.join(work, "workers")):  # "<worker dir> <pid>": the run's clone is under its worker's dir
    d, p = l.split()
    if os.path.isdir(os.path.join(d, "runs", rid)):
        pid = int(p)
if pid is None:
    sys.exit("no worker directory holds run " + rid)
kill = time.time()
os.kill(pid, signal.SIGKILL)
deadline = kill + 120
while time.time() < deadline:
    out = subprocess.run([ralph, "chain", "show", "--nats", url, "--run", rid, "--json"] + tls, capture_output=True, text=True).stdout
    later = [ts(a["timestamp"]) for a in (json.loads(l) for l in out.splitlines() if '"IterationStarted"' in l) if ts(a["timestamp"]) > kill]
    if later:
        print(f"failover     {min(later) - kill:.2f} s  (kill -9 → next IterationStarted elsewhere; --ack-wait {ackwait}, target ≤ ack wait + 5 s)")
        sys.exit(0)
    time.sleep(0.2)
sys.exit("the run did not continue within 120s of the kill")
PY

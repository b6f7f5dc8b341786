#!/bin/sh
# Ctrl-C (SIGINT), or SIGTERM, stops a bench run before its next timed path: exit status
# 130, the run's databases dropped, its scratch directory removed, bench.json written,
# and the signal named. SIGINT goes to the whole process group, as Ctrl-C on a terminal
# sends it, so the step running dies of it too; the scenario not yet run is listed as such.
# Usage: interrupt.sh FLOTILLA_BENCH FLOTILLA OUT_DIR [INT|TERM]
set -eu
bench=$1 flotilla=$2 out=$3 signal=${4:-INT}
if [ -z "${FLOTILLA_PG_DSN:-}" ]; then
  echo "FLOTILLA_PG_DSN is not set: run through scripts/test" >&2
  exit 1
fi
q() {
  PGOPTIONS="-c client_min_messages=warning" psql "$FLOTILLA_PG_DSN" -v ON_ERROR_STOP=1 -Atqc "$1"
}
rm -rf "$out"
# In a process group of its own (setsid, which does not fork here: a background job is no
# group leader), so that SIGINT can reach the whole group.
setsid "$bench" drift-check prune --drift-tables 300 --runs 50 --warmup 0 --prune-grid 2x2 \
  --prune-rows 4 --out "$out" --flotilla "$flotilla" >"$out.log" 2>&1 &
pid=$!
# Wait (up to 120 s) until the run has made its databases: it is then well under way.
n=0
until [ "$(q "SELECT count(*) FROM pg_database WHERE datname LIKE 'flotilla\_bench\_${pid}\_%'")" -gt 0 ]; do
  n=$((n + 1))
  if [ $n -gt 1200 ] || ! kill -0 $pid 2>/dev/null; then
    echo "the run made no database"; cat "$out.log"; exit 1
  fi
  sleep 0.1
done
if [ "$signal" = INT ]; then /bin/kill -INT -- -$pid; else kill -$signal $pid; fi
status=0
wait $pid || status=$?
[ "$status" = 130 ] || { echo "exit $status after SIG$signal, expected 130"; cat "$out.log"; exit 1; }
left=$(q "SELECT count(*) FROM pg_database WHERE datname LIKE 'flotilla\_bench\_${pid}\_%'")
[ "$left" = 0 ] || { echo "$left database(s) of the interrupted run left"; exit 1; }
[ ! -e "$out/work" ] || { echo "the scratch directory was left"; exit 1; }
[ -s "$out/bench.json" ] || { echo "no bench.json"; exit 1; }
case $signal in INT) said="interrupted (Ctrl-C)" ;; *) said="interrupted (SIG$signal)" ;; esac
grep -qF "$said" "$out.log" || { echo "the run did not say '$said'"; cat "$out.log"; exit 1; }
# The scenario running failed as interrupted (not as its step's own failure), the one not
# run is listed as such, and every target of both is there, not measured.
python3 - "$out/bench.json" "$said" <<'PY' || { cat "$out.log"; exit 1; }
import json, sys
doc = json.load(open(sys.argv[1])); said = sys.argv[2]
by = {s["name"]: s for s in doc["scenarios"]}
assert by["drift-check"]["status"] == "failed", by["drift-check"]
assert by["drift-check"]["message"].startswith(said), by["drift-check"]["message"]
assert by["prune"]["status"] == "not_run", by["prune"]
targets = {t["what"]: t for s in doc["scenarios"] for t in s["targets"]}
for what in ("drift-check <= 100 us per table (catalog read + drift evaluation)",
             "prune <= 10 us per unchanged table"):
    t = targets.get(what)
    assert t is not None and t["met"] is None and said in t["figure"], (what, t)
PY
grep -qF "NOT MEASURED   prune" "$out.log" || { echo "prune's target not listed"; cat "$out.log"; exit 1; }
echo "ok"

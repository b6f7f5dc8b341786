#!/bin/sh
# Ctrl-C (SIGINT), or SIGTERM, stops a bench run before its next timed path: exit status
# 130, the run's databases dropped, its scratch directory removed, bench.json written,
# and the signal named.
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
"$bench" drift-check --drift-tables 300 --runs 50 --warmup 0 --out "$out" \
  --flotilla "$flotilla" >"$out.log" 2>&1 &
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
kill -$signal $pid
status=0
wait $pid || status=$?
[ "$status" = 130 ] || { echo "exit $status after SIG$signal, expected 130"; cat "$out.log"; exit 1; }
left=$(q "SELECT count(*) FROM pg_database WHERE datname LIKE 'flotilla\_bench\_${pid}\_%'")
[ "$left" = 0 ] || { echo "$left database(s) of the interrupted run left"; exit 1; }
[ ! -e "$out/work" ] || { echo "the scratch directory was left"; exit 1; }
[ -s "$out/bench.json" ] || { echo "no bench.json"; exit 1; }
case $signal in INT) said="interrupted (Ctrl-C)" ;; *) said="interrupted (SIG$signal)" ;; esac
grep -qF "$said" "$out.log" || { echo "the run did not say '$said'"; cat "$out.log"; exit 1; }
echo "ok"

#!/bin/sh
# A database a killed bench run left behind (its pid gone) is dropped by the next run;
# one of a running process, one merely named alike, and one of the harness's name
# pattern that the harness did not make (no marker comment) are kept.
# Usage: abandoned_databases.sh FLOTILLA_BENCH FLOTILLA OUT_DIR
set -eu
bench=$1 flotilla=$2 out=$3
if [ -z "${FLOTILLA_PG_DSN:-}" ]; then
  echo "FLOTILLA_PG_DSN is not set: run through scripts/test" >&2
  exit 1
fi
q() {
  PGOPTIONS="-c client_min_messages=warning" psql "$FLOTILLA_PG_DSN" -v ON_ERROR_STOP=1 -Atqc "$1"
}
gone=flotilla_bench_2147483000_abandoned   # no process has this pid
alive="flotilla_bench_$$_running"          # this shell runs
alike=flotilla_benchmark_1_other
users=flotilla_bench_2147483001_archive    # the name pattern, a dead pid, but not marked
drop_all() { for d in $gone $alive $alike $users; do q "DROP DATABASE IF EXISTS $d"; done; }
trap drop_all EXIT
drop_all
for d in $gone $alive $alike $users; do q "CREATE DATABASE $d"; done
for d in $gone $alive $alike; do q "COMMENT ON DATABASE $d IS 'flotilla-bench scratch database'"; done
# A run refused for its arguments (here an unwritable --out) drops nothing.
if "$bench" kafka-events --smoke --out /proc/flotilla-bench-out --flotilla "$flotilla" \
     >/dev/null 2>&1; then
  echo "the bench accepted an unwritable --out"; exit 1
fi
[ "$(q "SELECT count(*) FROM pg_database WHERE datname = '$gone'")" = 1 ] || {
  echo "a run refused for its --out dropped $gone"; exit 1; }
# A scenario that uses PostgreSQL (kafka-events does not touch it).
log=$("$bench" drift-check --smoke --out "$out" --flotilla "$flotilla" 2>&1)
left=$(q "SELECT string_agg(datname, ' ' ORDER BY datname COLLATE \"C\") FROM pg_database
          WHERE datname IN ('$gone', '$alive', '$alike', '$users')")
echo "$log" | grep -q "dropped database $gone, left by a bench run that no longer runs" || {
  echo "the bench did not report dropping $gone:"; echo "$log"; exit 1; }
expected=$(printf '%s\n' "$alive" "$users" "$alike" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')
[ "$left" = "$expected" ] || {
  echo "databases left: '$left', expected '$expected'"; exit 1; }
echo "ok: dropped $gone, kept $alive, $users and $alike"

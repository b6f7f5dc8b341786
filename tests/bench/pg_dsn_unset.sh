#!/bin/sh
# Without FLOTILLA_PG_DSN, fleet-scale into PostgreSQL is skipped as the other PostgreSQL
# scenarios are (exit 0, its targets NOT MEASURED with the reason), and --require-pg
# refuses the run before any scenario (exit 2, naming the variable).
# Usage: pg_dsn_unset.sh FLOTILLA_BENCH FLOTILLA OUT_DIR
set -eu
bench=$1 flotilla=$2 out=$3
unset FLOTILLA_PG_DSN
rm -rf "$out"
status=0
"$bench" fleet-scale --fleet-target postgres --smoke --out "$out" --flotilla "$flotilla" \
  >"$out.log" 2>&1 || status=$?
[ "$status" = 0 ] || { echo "exit $status, expected 0 (skipped)"; cat "$out.log"; exit 1; }
grep -q "skipped: FLOTILLA_PG_DSN is not set" "$out.log" ||
  { echo "fleet-scale did not say it was skipped:"; cat "$out.log"; exit 1; }
grep -q "NOT MEASURED *fleet-scale .*skipped (FLOTILLA_PG_DSN is not set" "$out.log" ||
  { echo "fleet-scale's targets are not listed as not measured:"; cat "$out.log"; exit 1; }
status=0
"$bench" fleet-scale --fleet-target postgres --smoke --require-pg --out "$out" \
  --flotilla "$flotilla" >"$out.log" 2>&1 || status=$?
[ "$status" = 2 ] || { echo "exit $status with --require-pg, expected 2"; cat "$out.log"; exit 1; }
grep -q "FLOTILLA_PG_DSN is not set" "$out.log" || { cat "$out.log"; exit 1; }
if grep -q -- "-- fleet-scale" "$out.log"; then
  echo "--require-pg ran fleet-scale before refusing:"; cat "$out.log"; exit 1
fi
echo "ok"

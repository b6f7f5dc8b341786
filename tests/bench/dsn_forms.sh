#!/bin/sh
# The harness's scratch tables go into its own databases whatever form FLOTILLA_PG_DSN
# names its database in (a URI's ?dbname= parameter, which wins over the URI's path; a
# keyword/value dbname): the database it names is left without a table. A role that may
# not create databases is refused before any scenario runs, named.
# Usage: dsn_forms.sh FLOTILLA_BENCH FLOTILLA OUT_DIR
set -eu
bench=$1 flotilla=$2 out=$3
if [ -z "${FLOTILLA_PG_DSN:-}" ]; then
  echo "FLOTILLA_PG_DSN is not set: run through scripts/test" >&2
  exit 1
fi
q() {
  PGOPTIONS="-c client_min_messages=warning" psql "$FLOTILLA_PG_DSN" -v ON_ERROR_STOP=1 -Atqc "$1"
}
db=bench_dsn_forms_user_db
role=bench_dsn_forms_no_createdb
cleanup() {
  q "DROP DATABASE IF EXISTS $db WITH (FORCE)"
  q "DROP ROLE IF EXISTS $role"
}
trap cleanup EXIT
cleanup
q "CREATE DATABASE $db"
q "CREATE ROLE $role LOGIN"
# The server FLOTILLA_PG_DSN names, spelled out for each form.
user=$(q "SELECT current_user")
port=$(q "SELECT current_setting('port')")
host=$(q "SELECT coalesce(host(inet_server_addr()), '')")
if [ -z "$host" ]; then  # a local socket
  host=$(q "SELECT split_part(current_setting('unix_socket_directories'), ',', 1)")
  uri_query="?host=$host&port=$port&dbname=$db"
  uri="postgresql://$user@$uri_query"
  uri_path="postgresql://$user@/postgres$uri_query"
else
  uri="postgresql://$user@$host:$port?dbname=$db"
  uri_path="postgresql://$user@$host:$port/postgres?dbname=$db"
fi
keywords="host='$host' port=$port user=$user application_name='bench dsn forms' dbname='$db'"
tables_in_db() {
  PGOPTIONS="-c client_min_messages=warning" psql "$uri" -v ON_ERROR_STOP=1 -Atqc \
    "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'"
}
schemas_in_db() {
  PGOPTIONS="-c client_min_messages=warning" psql "$uri" -v ON_ERROR_STOP=1 -Atqc \
    "SELECT count(*) FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%'
     AND nspname NOT IN ('information_schema', 'public')"
}
run() {  # DSN, then the bench's arguments
  dsn=$1; shift
  rm -rf "$out"
  status=0
  FLOTILLA_PG_DSN=$dsn "$bench" "$@" --runs 1 --warmup 0 --require-pg --out "$out" \
    --flotilla "$flotilla" >"$out.log" 2>&1 || status=$?
  [ "$status" = 0 ] || { echo "exit $status with FLOTILLA_PG_DSN=$dsn:"; cat "$out.log"; exit 1; }
  [ "$(tables_in_db)" = 0 ] && [ "$(schemas_in_db)" = 0 ] || {
    echo "FLOTILLA_PG_DSN=$dsn: the run left $(tables_in_db) table(s) and $(schemas_in_db)" \
         "schema(s) in $db"; cat "$out.log"; exit 1; }
  if grep -q '"status": "\(failed\|skipped\)"' "$out/bench.json"; then
    echo "FLOTILLA_PG_DSN=$dsn: a scenario did not run:"; cat "$out.log"; exit 1
  fi
}
# Every scenario that uses PostgreSQL, its children included (steps, flotilla.toml's dsn,
# pg_dump | psql, pgcopydb), with the database in the URI's query.
run "$uri" copy-wide peer fleet-scale drift-check --rows 200 --peer-tables 2 --peer-rows 20 \
  --fleet-target postgres --fleet-tables 1,2 --fleet-grid '' --fleet-rows 20 --drift-tables 3
# Twice over: a second run into the same database used to find the first's schema there.
run "$uri_path" copy-wide --rows 200
run "$keywords" drift-check --drift-tables 3
# A role without CREATEDB: refused up front (exit 2), named, nothing run.
status=0
FLOTILLA_PG_DSN="host='$host' port=$port user=$role dbname=$db" "$bench" drift-check --smoke \
  --out "$out" --flotilla "$flotilla" >"$out.log" 2>&1 || status=$?
[ "$status" = 2 ] || { echo "exit $status for a role without CREATEDB, expected 2"; cat "$out.log"; exit 1; }
grep -q "role '$role' cannot create databases" "$out.log" ||
  { echo "the role was not named:"; cat "$out.log"; exit 1; }
echo "ok"

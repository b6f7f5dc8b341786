#!/usr/bin/env bash
# The quickstart end to end: make the fleet, plan, run, run again (pruned), drift the
# sources, plan and run again, and show what landed in DuckDB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
flotilla=${FLOTILLA_BIN:-$here/../../build/flotilla}
"$here/make_fleet.sh"
cd "$here/work"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step "$flotilla" plan
step "$flotilla" run
step "$flotilla" run --filter client=acme
"$here/drift.sh"
step "$flotilla" plan
step "$flotilla" run --output json
echo
echo "warehouse.duckdb now holds:"
"$flotilla" plan --no-prune --output json | python3 -c 'import json,sys; [print("  ", t["table"]) for t in json.load(sys.stdin)["tables"]]' 2>/dev/null || true

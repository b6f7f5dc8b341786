#!/bin/sh
# <out>/work is the harness's scratch directory: one it did not make is neither used nor
# removed (the run is refused), one it made goes after the run, and a bench.json that
# cannot be written fails the run.
# Usage: foreign_scratch.sh FLOTILLA_BENCH OUT_DIR
set -eu
bench=$1 out=$2
rm -rf "$out"
mkdir -p "$out/mine/work/src"
echo keep > "$out/mine/work/src/code.c"
if "$bench" kafka-events --events 50 --runs 1 --warmup 0 --out "$out/mine" >"$out/log" 2>&1; then
  echo "the bench used a work directory it did not make"; exit 1
fi
grep -q "exists and was not made by flotilla-bench" "$out/log" || { cat "$out/log"; exit 1; }
[ "$(cat "$out/mine/work/src/code.c")" = keep ] || { echo "the user's file is gone"; exit 1; }
# Its own scratch directory goes after the run; bench.json is there.
"$bench" kafka-events --events 50 --runs 1 --warmup 0 --out "$out/ours" >"$out/log" 2>&1 ||
  { cat "$out/log"; exit 1; }
[ ! -e "$out/ours/work" ] || { echo "the scratch directory was left"; exit 1; }
[ -s "$out/ours/bench.json" ] || { echo "no bench.json"; exit 1; }
# A bench.json that is a directory: refused before any scenario runs (exit 2), said,
# rather than found after the whole run.
mkdir -p "$out/bad/bench.json"
status=0
"$bench" kafka-events --events 50 --runs 1 --warmup 0 --out "$out/bad" >"$out/log" 2>&1 || status=$?
[ "$status" = 2 ] || { echo "exit $status for a bench.json directory, expected 2"; cat "$out/log"; exit 1; }
grep -q "bench.json exists and is not a file" "$out/log" || { cat "$out/log"; exit 1; }
! grep -q -- "-- kafka-events" "$out/log" || { echo "a scenario ran"; cat "$out/log"; exit 1; }
echo "ok"

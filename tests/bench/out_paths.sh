#!/bin/sh
# --out as users may give it: a directory whose name holds quotes and a space gets its
# bench.json and scaling.svg (every path in the gnuplot script quoted); a --out that names
# a file, or a path under a file, is refused as such before any scenario runs; so is a
# directory as --flotilla.
# Usage: out_paths.sh FLOTILLA_BENCH FLOTILLA OUT_DIR
set -eu
bench=$1 flotilla=$2 base=$3
rm -rf "$base"
mkdir -p "$base"
out="$base/it's a \"quoted\" dir"
status=0
"$bench" fleet-scale --fleet-rows 40 --fleet-tables 1,2 --fleet-grid '' --runs 1 --warmup 0 \
  --out "$out" --flotilla "$flotilla" >"$base/log" 2>&1 || status=$?
[ "$status" = 0 ] || { echo "exit $status with --out $out:"; cat "$base/log"; exit 1; }
grep -q "<svg" "$out/scaling.svg" || { echo "no plot in $out:"; cat "$base/log"; exit 1; }
[ -s "$out/bench.json" ] || { echo "no bench.json in $out"; exit 1; }
# A line break in --out: the scenario runs (the generated flotilla.toml escapes it); only
# the plot, which gnuplot cannot take there, is left out, saying so.
out="$base/two
lines"
status=0
"$bench" fleet-scale --fleet-rows 40 --fleet-tables 1,2 --fleet-grid '' --runs 1 --warmup 0 \
  --out "$out" --flotilla "$flotilla" >"$base/log" 2>&1 || status=$?
[ "$status" = 0 ] || { echo "exit $status with a line break in --out:"; cat "$base/log"; exit 1; }
[ -s "$out/bench.json" ] || { echo "no bench.json in $out"; exit 1; }
grep -q "gnuplot cannot take a path with a line break" "$base/log" ||
  { echo "the plot left out unsaid:"; cat "$base/log"; exit 1; }
# A directory as --flotilla: refused before anything runs.
status=0
"$bench" fleet-scale --fleet-rows 40 --fleet-tables 1 --fleet-grid '' --runs 1 --warmup 0 \
  --out "$base/dirflotilla" --flotilla "$base" >"$base/log" 2>&1 || status=$?
[ "$status" = 2 ] || { echo "exit $status for a directory as --flotilla, expected 2"; cat "$base/log"; exit 1; }
grep -qF "no flotilla executable at $base (a directory)" "$base/log" ||
  { echo "a directory as --flotilla not named:"; cat "$base/log"; exit 1; }
[ ! -e "$base/dirflotilla" ] || { echo "--out made for a refused run"; exit 1; }
# A file named as --out, or as a directory above it.
echo data > "$base/afile"
for given in "$base/afile" "$base/afile/sub"; do
  status=0
  "$bench" kafka-events --smoke --out "$given" >"$base/log" 2>&1 || status=$?
  [ "$status" = 2 ] || { echo "exit $status for --out $given, expected 2"; cat "$base/log"; exit 1; }
  grep -qF -- "--out: $base/afile is a file, not a directory" "$base/log" ||
    { echo "--out $given was not refused as a file:"; cat "$base/log"; exit 1; }
done
[ "$(cat "$base/afile")" = data ] || { echo "the file named as --out changed"; exit 1; }
echo "ok"

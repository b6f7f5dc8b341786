#!/bin/sh
# fleet-scale checks each table of the target against its source, not only the totals: a
# flotilla that moves one row from one table to another (totals unchanged) fails the
# scenario, naming both tables. Also: the generated fleet gives every table a row.
# Usage: wrong_copy_caught.sh FLOTILLA_BENCH FLOTILLA OUT_DIR
set -eu
bench=$1 flotilla=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
wrapper="$out/flotilla-moving-a-row"
cat > "$wrapper" <<WRAP
#!/bin/sh
"$flotilla" "\$@"
rc=\$?
config=flotilla.toml prev=
for a in "\$@"; do [ "\$prev" = "-c" ] && config=\$a; prev=\$a; done
target=\$(dirname "\$config")/warehouse.sqlite
case "\$config" in *2x2*) ;; *) exit \$rc ;; esac  # the 2x2 point only
if [ -f "\$target" ] && [ "\$1" != "plan" ]; then
  sqlite3 "\$target" "CREATE TEMP TABLE r AS SELECT * FROM c0000__t00000 WHERE id = (SELECT max(id) FROM c0000__t00000);
    DELETE FROM c0000__t00000 WHERE id = (SELECT id FROM r);
    UPDATE r SET id = id + 1000000; INSERT INTO c0000__t00001 SELECT * FROM r;"
fi
exit \$rc
WRAP
chmod +x "$wrapper"
set +e
log=$("$bench" fleet-scale --fleet-rows 400 --fleet-tables 1 --fleet-grid 2x2 --fleet-target sqlite \
        --runs 1 --warmup 0 --keep --out "$out/run" --flotilla "$wrapper" 2>&1)
rc=$?
set -e
if [ $rc -eq 0 ]; then
  echo "fleet-scale accepted a copy with a row moved between tables:"; echo "$log"; exit 1
fi
echo "$log" | grep -q "c0000__t00000 holds" || { echo "no table named:"; echo "$log"; exit 1; }
echo "$log" | grep -q "c0000__t00001 holds" || { echo "no table named:"; echo "$log"; exit 1; }
# Every generated table holds a row: 100 rows over a 10x10 grid is one each.
"$bench" fleet-scale --fleet-rows 100 --fleet-tables 1 --fleet-grid 10x10 --fleet-target sqlite \
  --runs 1 --warmup 0 --keep --out "$out/skew" --flotilla "$flotilla" >/dev/null 2>&1
empty=0
for f in "$out"/skew/work/fleet-scale/10x10/data/*.db; do
  for t in $(sqlite3 "$f" "SELECT name FROM sqlite_master WHERE type = 'table'"); do
    [ "$(sqlite3 "$f" "SELECT count(*) FROM \"$t\"")" -gt 0 ] || empty=$((empty + 1))
  done
done
[ $empty -eq 0 ] || { echo "$empty generated tables are empty"; exit 1; }
echo ok

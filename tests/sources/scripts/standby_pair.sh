#!/usr/bin/env bash
# A throwaway PostgreSQL primary and its hot standby (streaming replication), on loopback.
#   standby_pair.sh start DIR PRIMARY_PORT STANDBY_PORT
#   standby_pair.sh stop DIR
# Runs the servers as the postgres user when started as root (initdb refuses root).
set -euo pipefail
cmd=$1 dir=$2
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
case "$cmd" in
  start)
    primary_port=$3 standby_port=$4
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; fi
    as_pg "$pgbin/initdb" -D "$dir/primary" -U postgres -A trust --no-sync >/dev/null
    cat >> "$dir/primary/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $primary_port
unix_socket_directories = '$dir'
wal_level = replica
fsync = off
CONF
    echo "host replication all 127.0.0.1/32 trust" >> "$dir/primary/pg_hba.conf"
    as_pg "$pgbin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w -t 60 start >/dev/null
    as_pg "$pgbin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$dir/standby" -R
    sed -i "s/^port = $primary_port/port = $standby_port/" "$dir/standby/postgresql.conf"
    as_pg "$pgbin/pg_ctl" -D "$dir/standby" -l "$dir/standby.log" -w -t 60 start >/dev/null
    ;;
  stop)
    for d in standby primary; do
      [ -f "$dir/$d/PG_VERSION" ] && as_pg "$pgbin/pg_ctl" -D "$dir/$d" -m immediate -w stop >/dev/null 2>&1 || true
    done
    rm -rf "$dir"
    ;;
esac

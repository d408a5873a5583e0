#!/bin/bash
# The official images' behaviour, as far as the compose stack uses it: `postgres` initialises an
# empty $PGDATA from POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB (password authentication over
# the network), runs /docker-entrypoint-initdb.d/*.sql once, then serves; `redis-server` serves on
# every interface of the container's own network.
set -euo pipefail
case "${1:-}" in
postgres)
  shift
  user=${POSTGRES_USER:-postgres} db=${POSTGRES_DB:-${POSTGRES_USER:-postgres}}
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    chown -R postgres:postgres "$PGDATA"
    pwfile=$(mktemp); printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"; chown postgres "$pwfile"
    gosu postgres initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-host=scram-sha-256 --auth-local=trust >/dev/null
    rm -f "$pwfile"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    gosu postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    [ "$db" = postgres ] || gosu postgres psql -q -U "$user" -d postgres -c "CREATE DATABASE \"$db\""
    for f in /docker-entrypoint-initdb.d/*.sql; do
      [ -e "$f" ] && gosu postgres psql -q -v ON_ERROR_STOP=1 -U "$user" -d "$db" -f "$f"
    done
    gosu postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  exec gosu postgres postgres -D "$PGDATA" -c listen_addresses='*' "$@"
  ;;
redis-server)
  shift
  exec gosu redis redis-server --bind 0.0.0.0 --protected-mode no --save '' --appendonly no "$@"
  ;;
*)
  exec "$@"
  ;;
esac

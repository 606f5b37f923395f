#!/usr/bin/env bash
# Runs a command with a private, throw-away PostgreSQL server:
#   scripts/with-postgres.sh cargo test ...
# Installs Debian's postgresql when initdb is missing, initdb's a temp dir, starts the server on
# a free 127.0.0.1 port, exports AGCORE_TEST_POSTGRES_URL (and AGCORE_TEST_PG_BIN, the server's
# bin folder, for tests that start their own cluster), runs the command, and stops the server.
# initdb and postgres refuse to run as root, so as root they run as the `postgres` user.
set -euo pipefail

find_pg_bin() {
    if command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return
    fi
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; fi
}

PG_BIN=$(find_pg_bin)
if [ -z "$PG_BIN" ]; then
    echo "with-postgres: installing Debian's postgresql" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    PG_BIN=$(find_pg_bin)
fi
[ -n "$PG_BIN" ] || { echo "with-postgres: no initdb found" >&2; exit 1; }

as_pg=()
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    as_pg=(runuser -u postgres --)
fi

PG_DIR=$(mktemp -d /tmp/agcore-pg.XXXXXX)
chmod 755 "$PG_DIR"
if [ "${#as_pg[@]}" -gt 0 ]; then chown postgres "$PG_DIR"; fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

stop() {
    "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
}
trap stop EXIT

"${as_pg[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U agcore --auth=trust -E UTF8 >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log" >&2; exit 1; }
# Sockets in the temp dir (not /var/run/postgresql, which may not exist); TCP on loopback only.
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
    -o "-p $PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null \
    || { cat "$PG_DIR/server.log" >&2; exit 1; }

export AGCORE_TEST_POSTGRES_URL="postgres://agcore@127.0.0.1:$PORT/postgres"
export AGCORE_TEST_PG_BIN="$PG_BIN"
echo "with-postgres: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on $AGCORE_TEST_POSTGRES_URL" >&2
"$@"

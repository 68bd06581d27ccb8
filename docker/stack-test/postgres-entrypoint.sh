#!/bin/sh
# The stack test's PostgreSQL: on an empty data directory create the cluster, the user
# POSTGRES_USER with POSTGRES_PASSWORD and the database POSTGRES_DB; then serve on every address.
set -eu
PGDATA=/var/lib/postgresql/data
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    password=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$password"
    initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$password" \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$password"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl --pgdata="$PGDATA" --wait --silent --options="-c listen_addresses=''" start
    createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl --pgdata="$PGDATA" --wait --silent stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'

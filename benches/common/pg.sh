# Sourced by the benches that compare the run stores (store.sh, queue.sh): sets URL to a
# PostgreSQL 15 server, MEKARA_STORE_URL's when set (use an empty database), else one started
# here in "$TMP" (the Debian package, fsync on, as a real server has it; PGPID is its pid, for
# the caller's cleanup to stop). Leaves MEKARA_STORE_URL unset, so that each command says
# which store it uses.
PG=/usr/lib/postgresql/15/bin
if [ -z "${MEKARA_STORE_URL:-}" ]; then
  [ -x "$PG/initdb" ] || { echo "needs PostgreSQL 15: apt-get install postgresql" >&2; exit 2; }
  # initdb refuses root: the server runs as nobody.
  RUN=()
  if [ "$(id -u)" = 0 ]; then chown 65534:65534 "$TMP"; RUN=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
  echo bench-pw > "$TMP/pw"; [ "$(id -u)" = 0 ] && chown 65534:65534 "$TMP/pw"
  "${RUN[@]}" "$PG/initdb" -D "$TMP/data" -U mekara --auth=scram-sha-256 --pwfile="$TMP/pw" >/dev/null
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "${RUN[@]}" "$PG/postgres" -D "$TMP/data" -p "$PORT" -k "$TMP" -c listen_addresses=127.0.0.1 \
    -c max_connections=200 >"$TMP/pg.log" 2>&1 &
  PGPID=$!
  for _ in $(seq 100); do "$PG/pg_isready" -q -h 127.0.0.1 -p "$PORT" && break; sleep 0.1; done
  export MEKARA_STORE_URL="postgres://mekara:bench-pw@127.0.0.1:$PORT/postgres"
fi
URL=$MEKARA_STORE_URL
unset MEKARA_STORE_URL

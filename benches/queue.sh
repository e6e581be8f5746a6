#!/usr/bin/env bash
# The queue's throughput: N short runs (3 shell steps each) submitted to the shared store and
# drained by 1, 2 and 4 workers (`mekara worker --until-empty`, each a process of its own,
# each running one run at a time as a child `mekara run`), next to the same N runs done one
# after another with `mekara run` on the file store, in the same run of this script.
#
#   benches/queue.sh BIN [N]
#
# BIN is the mekara to measure (build it with `cargo build --release`); N defaults to 1000.
# It starts its own PostgreSQL 15 (the Debian package) in a temporary folder, fsync on, unless
# MEKARA_STORE_URL names one (use an empty database: it is migrated and filled).
#
# Prints, per line: how long the N runs took and the runs per second; for the queue also
# how long `mekara submit` took for the N runs (one process each, as a user would).
set -euo pipefail
BIN=$(realpath "${1:?usage: benches/queue.sh BIN [N]}")
N=${2:-1000}
TMP=$(mktemp -d)
cleanup() {
  for p in ${WORKERS:-}; do kill "$p" 2>/dev/null || true; done
  if [ -n "${PGPID:-}" ]; then kill -INT "$PGPID" 2>/dev/null || true; wait "$PGPID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

source "$(dirname "$0")/common/pg.sh"

project() {
  mkdir -p "$1/.mekara/scripts/nl" "$1/.mekara/scripts/compiled"
  printf '[store]\nproject = "bench"\n' > "$1/.mekara/config.toml"
  echo "Run 3 steps." > "$1/.mekara/scripts/nl/short.md"
  printf 'def execute(request):\n    auto("true", context = "a")\n    auto("echo b", context = "b")\n    auto("echo c", context = "c")\n' \
    > "$1/.mekara/scripts/compiled/short.star"
}
now() { date +%s.%N; }
rate() { python3 -c "d = $2 - $1; print(f'{d:8.1f} s  {$N / d:7.1f} runs/s')"; }

project "$TMP/files"
(cd "$TMP/files" && "$BIN" run short >/dev/null)  # warm the binary's pages
t0=$(now)
for _ in $(seq "$N"); do (cd "$TMP/files" && "$BIN" run short >/dev/null); done
t1=$(now)
echo "$N short runs (3 shell steps each):"
echo "  one after another, mekara run, files   $(rate "$t0" "$t1")"

project "$TMP/submit"
(cd "$TMP/submit" && MEKARA_STORE_URL=$URL "$BIN" store migrate >/dev/null)
for W in 1 2 4; do
  # Each round has its own project id, so the rounds do not see each other's runs.
  for d in "$TMP/submit" $(seq -f "$TMP/w%g" 1 "$W"); do
    project "$d"; printf '[store]\nproject = "bench-%s"\n' "$W" > "$d/.mekara/config.toml"
  done
  t0=$(now)
  for _ in $(seq "$N"); do
    (cd "$TMP/submit" && MEKARA_STORE_URL=$URL "$BIN" submit --agent-command false short >/dev/null 2>&1)
  done
  t1=$(now)
  WORKERS=""
  for k in $(seq "$W"); do
    (cd "$TMP/w$k" && MEKARA_STORE_URL=$URL MEKARA_HOST="w$k" exec "$BIN" worker --until-empty --allow-agent-command false 2>"$TMP/w$k.err") &
    WORKERS="$WORKERS $!"
  done
  for p in $WORKERS; do wait "$p"; done
  WORKERS=""
  t2=$(now)
  done_runs=$(cat $(seq -f "$TMP/w%g.err" 1 "$W") | grep -c '^finished run' || true)
  [ "$done_runs" = "$N" ] || { echo "only $done_runs of $N runs finished; see $TMP/w*.err" >&2; exit 1; }
  echo "  queue, $W worker(s), postgresql          $(rate "$t1" "$t2")  (submitting them: $(python3 -c "print(f'{$t1 - $t0:.1f}')") s)"
  rm -rf $(seq -f "$TMP/w%g" 1 "$W")
done

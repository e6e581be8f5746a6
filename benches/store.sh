#!/usr/bin/env bash
# The run store side by side: files against PostgreSQL, in the same run of this script.
#
#   benches/store.sh BIN [N]
#
# BIN is the mekara to measure (build it with `cargo build --release`); N is how many runs
# `mekara runs` lists (default 10000; `benches/store.sh BIN 100000` for the issue's figure:
# past 10,000 the database is filled in SQL rather than by `store import`). It starts its
# own PostgreSQL 15 (the Debian package, benches/common/pg.sh) in a temporary folder, with
# fsync on as a real server has it, unless MEKARA_STORE_URL names one (whose database it
# fills; use an empty one).
#
# Prints:
# - append latency per step: a script of 200 function steps (no process to start, so the
#   step's cost is evaluation plus the journal append), run with each store; the time per
#   step, and the difference, which is the store's own cost;
# - `mekara runs` listing N runs with each store (the runs are copies of one real run:
#   files written here, then `mekara store import`ed, which is timed too).
#
# The two stores are measured one after the other on the same machine and binary, so the
# figures compare; absolute numbers move with the machine's load.
set -euo pipefail
BIN=$(realpath "${1:?usage: benches/store.sh BIN [N]}")
N=${2:-10000}
TMP=$(mktemp -d)
cleanup() {
  if [ -n "${PGPID:-}" ]; then kill -INT "$PGPID" 2>/dev/null || true; wait "$PGPID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

source "$(dirname "$0")/common/pg.sh"

project() {
  mkdir -p "$1/.mekara/scripts/nl" "$1/.mekara/scripts/compiled"
  echo "Run 200 steps." > "$1/.mekara/scripts/nl/steps.md"
  cat > "$1/.mekara/scripts/compiled/steps.star" <<'EOF'
def execute(request):
    for i in range(200):
        auto(step, {"i": i}, context = "step")

def step(i):
    return i
EOF
  echo "Run 3 steps." > "$1/.mekara/scripts/nl/short.md"
  printf 'def execute(request):\n    auto("true", context = "a")\n    auto("echo b", context = "b")\n    auto("echo c", context = "c")\n' \
    > "$1/.mekara/scripts/compiled/short.star"
}
now() { date +%s.%N; }
per_step() { python3 -c "print(f'{($2 - $1) * 1000 / 200:.3f}')"; }

project "$TMP/files"
project "$TMP/pg"
(cd "$TMP/pg" && MEKARA_STORE_URL=$URL "$BIN" store migrate >/dev/null)

# Warm both (the binary's pages, the server's first connection), then measure.
(cd "$TMP/files" && "$BIN" run steps >/dev/null && rm -f .mekara/runs/*.jsonl)
(cd "$TMP/pg" && MEKARA_STORE_URL=$URL "$BIN" run steps >/dev/null)
t0=$(now); (cd "$TMP/files" && "$BIN" run steps >/dev/null); t1=$(now)
(cd "$TMP/pg" && MEKARA_STORE_URL=$URL "$BIN" run steps >/dev/null); t2=$(now)
files_ms=$(per_step "$t0" "$t1"); pg_ms=$(per_step "$t1" "$t2")
echo "append latency per step (200 function steps, whole run / 200):"
echo "  files       ${files_ms} ms"
echo "  postgresql  ${pg_ms} ms  (+$(python3 -c "print(f'{$pg_ms - $files_ms:.3f}')") ms per step)"

# N copies of a short run (3 shell steps), under new ids.
rm -f "$TMP/files/.mekara/runs/"*.jsonl
(cd "$TMP/files" && "$BIN" run short >/dev/null)
one=$(ls "$TMP/files/.mekara/runs/"*.jsonl | head -1)
id=$(basename "$one" .jsonl)
python3 - "$one" "$id" "$TMP/list/.mekara/runs" "$N" <<'EOF'
import os, sys
src, old, dst, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
os.makedirs(dst, exist_ok=True)
text = open(src).read()
for k in range(n):
    new = f"20260101-000000-{k:06d}"
    open(os.path.join(dst, new + ".jsonl"), "w").write(text.replace(old, new, 1))
EOF
project "$TMP/list"
t0=$(now); (cd "$TMP/list" && "$BIN" runs >/dev/null); t1=$(now)
if [ "$N" -le 10000 ]; then
  (cd "$TMP/list" && MEKARA_STORE_URL=$URL "$BIN" store import >/dev/null); t2=$(now)
  filled="store import of the $N runs took"
else
  # `store import` commits run by run (about 20 ms each): past 10,000 runs the database is
  # filled in SQL instead, with copies of the first run, imported, under the files' ids.
  mkdir -p "$TMP/first/.mekara/runs"; cp "$TMP/list/.mekara/runs/20260101-000000-000000.jsonl" "$TMP/first/.mekara/runs/"
  project "$TMP/first"; echo '[store]' > "$TMP/first/.mekara/config.toml"; echo 'project = "list"' >> "$TMP/first/.mekara/config.toml"
  (cd "$TMP/first" && MEKARA_STORE_URL=$URL "$BIN" store import >/dev/null)
  first=20260101-000000-000000
  "$PG/psql" -q "$URL" <<SQL
INSERT INTO mekara_runs (project, id, host, os_user)
  SELECT r.project, '20260101-000000-' || lpad(k::text, 6, '0'), r.host, r.os_user
  FROM mekara_runs r, generate_series(1, $N - 1) k WHERE r.id = '$first';
INSERT INTO mekara_events (project, run_id, line, body)
  SELECT e.project, '20260101-000000-' || lpad(k::text, 6, '0'), e.line,
         replace(e.body, '$first', '20260101-000000-' || lpad(k::text, 6, '0'))
  FROM mekara_events e, generate_series(1, $N - 1) k WHERE e.run_id = '$first';
SQL
  t2=$(now)
  filled="filling the database with the $N runs in SQL took"
fi
(cd "$TMP/list" && MEKARA_STORE_URL=$URL "$BIN" runs >/dev/null); t3=$(now)
ms() { python3 -c "print(f'{($2 - $1) * 1000:.0f}')"; }
echo "mekara runs listing $N runs (3 steps each):"
echo "  files       $(ms "$t0" "$t1") ms"
echo "  postgresql  $(ms "$t2" "$t3") ms  ($filled $(ms "$t1" "$t2") ms)"

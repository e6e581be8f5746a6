#!/usr/bin/env bash
# The run store side by side: files against PostgreSQL, in the same run of this script.
#
#   benches/store.sh BIN [N] [OTHER...]
#
# BIN is the mekara to measure (build it with `cargo build --release`); N is how many runs
# `mekara runs` lists (default 10000; `benches/store.sh BIN 100000` for the issue's figure:
# past 10,000 the database is filled in SQL rather than by `store import`; 0 leaves the
# listing out). OTHER are more binaries (an earlier build) whose append latency is measured
# in the same run, each in a database of its own. ROUNDS (environment, default 3) is how
# many times each run is timed; the median is printed, with the fastest .. slowest. It starts its
# own PostgreSQL 15 (the Debian package, benches/common/pg.sh) in a temporary folder, with
# fsync on as a real server has it, unless MEKARA_STORE_URL names one (whose database it
# fills; use an empty one).
#
# Prints:
# - append latency per step, per binary: a script of 200 function steps (no process to start,
#   so the step's cost is evaluation plus the journal append), and one of 200 shell steps
#   (`true`), run with each store; the time per step, the difference, which is the store's
#   own cost, and the ratio;
# - `mekara runs` listing N runs with each store (the runs are copies of one real run:
#   files written here, then `mekara store import`ed, which is timed too);
# - `status` over MCP (a whole `mekara mcp` session: initialize, one `status`, exit) in the
#   PostgreSQL project of the N runs against an empty one, per binary (BIN and OTHER), the
#   median of ROUNDS * 3 sessions: what an agent pays when no run is pending.
#
# The two stores are measured one after the other on the same machine and binary, so the
# figures compare; absolute numbers move with the machine's load.
set -euo pipefail
BIN=$(realpath "${1:?usage: benches/store.sh BIN [N] [OTHER...]}")
N=${2:-10000}
OTHERS=()
for other in "${@:3}"; do OTHERS+=("$(realpath "$other")"); done
ROUNDS=${ROUNDS:-3}
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
  echo "Run 200 shell steps." > "$1/.mekara/scripts/nl/shells.md"
  printf 'def execute(request):\n    for i in range(200):\n        auto("true", context = "shell")\n' \
    > "$1/.mekara/scripts/compiled/shells.star"
  echo "Run 3 steps." > "$1/.mekara/scripts/nl/short.md"
  printf 'def execute(request):\n    auto("true", context = "a")\n    auto("echo b", context = "b")\n    auto("echo c", context = "c")\n' \
    > "$1/.mekara/scripts/compiled/short.star"
}
now() { date +%s.%N; }
per_step() { python3 -c "print(f'{($2 - $1) * 1000 / 200:.3f}')"; }

# The median and the fastest .. slowest of numbers on stdin, one a line.
stats() { sort -g | awk '{a[NR] = $1} END {printf "%.3f ms  (%.3f .. %.3f)", a[int((NR + 1) / 2)], a[1], a[NR]}'; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# append BIN LABEL DATABASE_URL: the append latency of BIN's runs of 200 steps, per store.
append() {
  local bin=$1 label=$2 url=$3 dir="$TMP/append-$2"
  project "$dir/files"
  project "$dir/pg"
  (cd "$dir/pg" && MEKARA_STORE_URL=$url "$bin" store migrate >/dev/null)
  # Warm both (the binary's pages, the server's first connection), then measure.
  (cd "$dir/files" && "$bin" run steps >/dev/null)
  (cd "$dir/pg" && MEKARA_STORE_URL=$url "$bin" run steps >/dev/null)
  echo "append latency per step, $label ($bin): whole run / 200, median of $ROUNDS runs (fastest .. slowest)"
  local script kind
  for script in steps shells; do
    kind=$([ "$script" = steps ] && echo function || echo shell)
    local files=() pg=()
    for _ in $(seq "$ROUNDS"); do
      local t0 t1 t2
      t0=$(now); (cd "$dir/files" && "$bin" run "$script" >/dev/null); t1=$(now)
      (cd "$dir/pg" && MEKARA_STORE_URL=$url "$bin" run "$script" >/dev/null); t2=$(now)
      files+=("$(per_step "$t0" "$t1")"); pg+=("$(per_step "$t1" "$t2")")
    done
    local f p
    f=$(printf '%s\n' "${files[@]}" | median); p=$(printf '%s\n' "${pg[@]}" | median)
    echo "  $kind steps, files       $(printf '%s\n' "${files[@]}" | stats)"
    echo "  $kind steps, postgresql  $(printf '%s\n' "${pg[@]}" | stats)  (+$(python3 -c "print(f'{$p - $f:.3f} ms per step, {$p / $f:.2f}x')") the files)"
  done
}
append "$BIN" new "$URL"
for k in "${!OTHERS[@]}"; do
  # A database of its own: another build may have another schema.
  "$PG/psql" -q "$URL" -c "CREATE DATABASE mekara_bench_other_$k" >/dev/null
  append "${OTHERS[$k]}" "other-$k" "${URL%/*}/mekara_bench_other_$k"
done
[ "$N" -gt 0 ] || exit 0

# N copies of a short run (3 shell steps), under new ids.
project "$TMP/files"
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

# status_session BIN URL DIR: the ms of one `mekara mcp` session in DIR against the store at
# URL: initialize, one `status` call, stdin closed, exit.
status_session() {
  (cd "$3" && MEKARA_STORE_URL=$2 python3 - "$1" <<'EOF'
import json, subprocess, sys, time
started = time.perf_counter()
p = subprocess.Popen([sys.argv[1], "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def send(m): p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
p.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}})
reply = p.stdout.readline()
assert b'"isError":false' in reply, reply
p.stdin.close(); p.wait()
print(f"{(time.perf_counter() - started) * 1000:.3f}")
EOF
  )
}
project "$TMP/empty"
printf '[store]\nproject = "empty"\n' > "$TMP/empty/.mekara/config.toml"
echo "status over MCP (a whole session), PostgreSQL, the project of the $N runs against an empty one, median of $((ROUNDS * 3)) (fastest .. slowest):"
for k in -1 "${!OTHERS[@]}"; do
  bin=$BIN; label=new
  [ "$k" -ge 0 ] && { bin=${OTHERS[$k]}; label=other-$k; }
  full=(); empty=()
  for _ in $(seq $((ROUNDS * 3))); do
    full+=("$(status_session "$bin" "$URL" "$TMP/list")")
    empty+=("$(status_session "$bin" "$URL" "$TMP/empty")")
  done
  f=$(printf '%s\n' "${full[@]}" | median); e=$(printf '%s\n' "${empty[@]}" | median)
  echo "  $label ($bin): $N runs $(printf '%s\n' "${full[@]}" | stats), empty $(printf '%s\n' "${empty[@]}" | stats)  ($(python3 -c "print(f'{$f / $e:.2f}x')"))"
done

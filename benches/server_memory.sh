#!/usr/bin/env bash
# Memory of one server under heavy scripts at once (issue 31): starts `mekara mcp --http` in a
# project whose script builds a 400 MB string (about 800 MB with its copy into the
# interpreter's heap) before the heap limit stops it, sends it N `start`
# calls at once (stateless MCP `2026-07-28` requests, each its own run), and samples the
# resident memory of the server and all its children every 20 ms until every call answered.
# Prints the peak, for each binary given, side by side.
#
#   bash benches/server_memory.sh [N] MEKARA...
#
# N (default 10) scripts at once; MEKARA (default target/release/mekara) the binaries
# measured. `MEKARA_MAX_EVALUATIONS` (default 4) bounds the evaluations a server runs at once;
# set it to compare. Loopback only.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-10}
shift || true
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=("$repo/target/release/mekara")
work=$(mktemp -d)
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
project=$work/project
mkdir -p "$project/.mekara/scripts/nl" "$project/.mekara/scripts/compiled" "$work/home"
echo "Build something big." >"$project/.mekara/scripts/nl/heavy.md"
cat >"$project/.mekara/scripts/compiled/heavy.star" <<'EOF'
def execute(request):
    n = 400000000 + len(request)
    big = "x" * n
    llm("Never reached: %d" % len(big))
EOF

# The resident memory (KiB) of process $1 and every process below it.
tree_rss() {
  python3 - "$1" <<'PY'
import os, sys
root = int(sys.argv[1])
children = {}
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    ppid = int(stat.rsplit(")", 1)[1].split()[1])
    children.setdefault(ppid, []).append(int(pid))
total, todo = 0, [root]
while todo:
    pid = todo.pop()
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    except OSError:
        pass
    todo.extend(children.get(pid, []))
print(total)
PY
}

printf '%-40s %8s %14s %10s\n' "binary" "scripts" "peak MiB" "seconds"
for mekara in "${binaries[@]}"; do
  (cd "$project" && HOME=$work/home exec "$mekara" mcp --http 127.0.0.1:0 2>"$work/server.log") &
  server=$!
  port=
  for _ in $(seq 200); do
    port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\)/mcp.*#\1#p' "$work/server.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { cat "$work/server.log" >&2; exit 1; }
  started=$(date +%s.%N)
  calls=()
  for i in $(seq "$n"); do
    curl -s -o "$work/reply.$i" -X POST "http://127.0.0.1:$port/mcp" \
      -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
      -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: start' \
      -d "{\"jsonrpc\":\"2.0\",\"id\":$i,\"method\":\"tools/call\",\"params\":{\"name\":\"start\",\"arguments\":{\"name\":\"heavy\"},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{},\"io.modelcontextprotocol/clientInfo\":{\"name\":\"bench\",\"version\":\"0\"}}}}" &
    calls+=($!)
  done
  peak=0
  while :; do
    rss=$(tree_rss "$server")
    [ "$rss" -gt "$peak" ] && peak=$rss
    running=0
    for c in "${calls[@]}"; do kill -0 "$c" 2>/dev/null && running=1; done
    [ "$running" = 1 ] || break
    sleep 0.02
  done
  elapsed=$(echo "$(date +%s.%N) - $started" | bc -l)
  limited=$(cat "$work"/reply.* | grep -io "memory limit" | wc -l || true)
  printf '%-40s %8d %14.0f %10.1f   (%d of %d stopped by the memory limit)\n' \
    "$(basename "$(dirname "$mekara")")/$(basename "$mekara")" "$n" "$(echo "$peak / 1024" | bc -l)" "$elapsed" "$limited" "$n"
  [ -z "${SERVER_MEMORY_SHOW:-}" ] || cat "$work/reply.1" >&2
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
done

#!/usr/bin/env bash
# Descriptors of one server under abandoned stateless runs (issue 31): starts
# `mekara mcp --http` in a project whose script waits at its first llm step, sends it N
# stateless `start` calls (MCP `2026-07-28` requests, each its own run, none ever continued),
# one after another on one connection, and samples the server's open descriptors and child
# processes every 250 calls. Then checks that the server still answers: `tools/list`, a new
# `start`, and a `status` of the first run by its handle (taken up again from its journal).
# Prints one line per binary given, side by side.
#
#   bash benches/stateless_descriptors.sh [N] MEKARA...
#
# N (default 20000) abandoned starts; MEKARA (default target/release/mekara) the binaries
# measured. `MEKARA_MAX_HELD_RUNS` (default 128) bounds the runs a server holds; set it to
# compare. Loopback only. About 20 ms a start on a 2-core machine: 20,000 take minutes.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-20000}
shift || true
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=("$repo/target/release/mekara")
work=$(mktemp -d)
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

printf '%-34s %7s %9s %9s %10s %9s  %s\n' "binary" "starts" "peak fds" "end fds" "children" "seconds" "after"
for mekara in "${binaries[@]}"; do
  project=$work/project
  rm -rf "$project"
  mkdir -p "$project/.mekara/scripts/nl" "$project/.mekara/scripts/compiled" "$work/home"
  echo "Wait for the agent." >"$project/.mekara/scripts/nl/waits.md"
  printf 'def execute(request):\n    llm("Say anything.")\n' >"$project/.mekara/scripts/compiled/waits.star"
  (cd "$project" && HOME=$work/home exec "$mekara" mcp --http 127.0.0.1:0 2>"$work/server.log") &
  server=$!
  port=
  for _ in $(seq 200); do
    port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\)/mcp.*#\1#p' "$work/server.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { cat "$work/server.log" >&2; exit 1; }
  python3 - "$port" "$server" "$n" "$(basename "$(dirname "$mekara")")/$(basename "$mekara")" <<'PY'
import http.client, json, os, sys, time
port, server, n, name = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
meta = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
}
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

def call(i, method, params, name=None):
    params = dict(params, _meta=meta)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if name:
        headers["Mcp-Name"] = name
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    connection.request("POST", "/mcp", body, headers)
    response = connection.getresponse()
    text = response.read().decode()
    for line in text.splitlines():
        if line.startswith("data:"):
            text = line[5:]
    return response.status, text

def descriptors():
    return len(os.listdir(f"/proc/{server}/fd"))

def children():
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = open(f"/proc/{pid}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == server:
                count += 1
    return count

started = time.time()
peak_fds, peak_children, first, failed = descriptors(), children(), None, 0
for i in range(1, n + 1):
    status, text = call(i, "tools/call", {"name": "start", "arguments": {"name": "waits"}}, "start")
    if status != 200 or '"isError":true' in text:
        failed += 1
        if failed <= 3:
            print(f"start {i} failed: {status} {text[:300]}", file=sys.stderr)
    elif first is None:
        reply = json.loads(text)["result"]
        words = json.dumps(reply)
        first = next(w.strip('"\\.,`') for w in words.split() if "." in w and w.strip('"\\.,`')[:8].isdigit())
    if i % 250 == 0:
        peak_fds = max(peak_fds, descriptors())
        peak_children = max(peak_children, children())
elapsed = time.time() - started
after = []
status, text = call(n + 1, "tools/list", {})
after.append("tools/list " + ("ok" if status == 200 and '"tools"' in text else f"FAILED {status}"))
status, text = call(n + 2, "tools/call", {"name": "start", "arguments": {"name": "waits"}}, "start")
after.append("start " + ("ok" if status == 200 and '"isError":true' not in text else f"FAILED {text[:200]}"))
if first:
    status, text = call(n + 3, "tools/call", {"name": "status", "arguments": {"run_id": first}}, "status")
    after.append("status of the first " + ("ok" if status == 200 and '"isError":true' not in text else f"FAILED {text[:200]}"))
print(f"{name:<34} {n:>7} {peak_fds:>9} {descriptors():>9} {peak_children:>10} {elapsed:>9.1f}  "
      + ", ".join(after) + (f"; {failed} starts failed" if failed else ""))
PY
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
done

#!/usr/bin/env bash
# What a change costs the commands that run most often, two binaries side by side in the same
# run of this script (issue 30: `mekara ui` must cost nothing when unused).
#
#   benches/start_cost.sh BEFORE AFTER [ROUNDS]
#
# BEFORE and AFTER are two release builds of mekara (for example main's and a branch's).
# In a project of 100 scripts it times, interleaved round by round so a slow moment of the
# machine lands on both:
# - `mekara hook reroute-user-commands` for a typed compiled script, spawn to exit (what
#   Claude Code runs on every prompt);
# - `mekara mcp` from spawn to its answer to `initialize` (what every agent session starts
#   with), then its stdin closed.
# Prints the median and the 90th percentile of each (default 101 rounds), and each file's size.
set -euo pipefail
BEFORE=$(realpath "${1:?usage: benches/start_cost.sh BEFORE AFTER [ROUNDS]}")
AFTER=$(realpath "${2:?usage: benches/start_cost.sh BEFORE AFTER [ROUNDS]}")
ROUNDS=${3:-101}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/project/.mekara" "$TMP/home"
for i in $(seq 0 99); do
  name="group$((i % 10))/script-$i"
  mkdir -p "$TMP/project/.mekara/scripts/nl/$(dirname "$name")" "$TMP/project/.mekara/scripts/compiled/$(dirname "$name")"
  echo "Do it." > "$TMP/project/.mekara/scripts/nl/$name.md"
  if [ $((i % 2)) -eq 0 ]; then
    printf 'def execute(request):\n    auto("true")\n' > "$TMP/project/.mekara/scripts/compiled/$name.star"
  fi
done
python3 - "$BEFORE" "$AFTER" "$ROUNDS" "$TMP" <<'PY'
import json, os, statistics, subprocess, sys, time
before, after, rounds, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
root = os.path.join(tmp, "project")
env = {"HOME": os.path.join(tmp, "home"), "PATH": "/usr/bin:/bin"}
prompt = json.dumps({"prompt": "/group4:script-44 some arguments", "cwd": root}).encode()
init = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}}) + "\n").encode()

def hook(binary):
    start = time.perf_counter()
    out = subprocess.run([binary, "hook", "reroute-user-commands"], input=prompt, cwd=root,
                         env=env, capture_output=True)
    took = time.perf_counter() - start
    assert out.stdout, "the hook said nothing"
    return took * 1000

def mcp(binary):
    start = time.perf_counter()
    server = subprocess.Popen([binary, "mcp"], cwd=root, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    server.stdin.write(init)
    server.stdin.flush()
    line = server.stdout.readline()
    took = time.perf_counter() - start
    assert b'"result"' in line, line
    server.stdin.close()
    server.wait()
    return took * 1000

cases = [("hook, typed compiled script", hook), ("mcp, spawn to initialize reply", mcp)]
times = {(label, b): [] for label, _ in cases for b in (before, after)}
for label, run in cases:
    for b in (before, after):
        run(b)  # one unmeasured start each: page cache
for r in range(rounds):
    for label, run in cases:
        for b in ((before, after) if r % 2 == 0 else (after, before)):
            times[(label, b)].append(run(b))
print(f"start cost, median and p90 of {rounds} interleaved rounds")
for label, _ in cases:
    for name, b in (("before", before), ("after", after)):
        t = sorted(times[(label, b)])
        p90 = t[int(len(t) * 0.9)]
        print(f"  {label:32} {name:6} {statistics.median(t):7.2f} ms  p90 {p90:7.2f} ms")
for name, b in (("before", before), ("after", after)):
    print(f"  binary {name:6} {os.path.getsize(b):>12,} bytes  {b}")
PY

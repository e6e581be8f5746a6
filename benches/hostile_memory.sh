#!/usr/bin/env bash
# Peak memory of `mekara run` on hostile scripts (issue 14): one line per script with its
# exit code, wall time and peak resident memory (from `/usr/bin/time`), each stopped after
# LIMIT seconds (default 60) and, as a guard for the machine, at 8 GiB of address space.
#
#   bash benches/hostile_memory.sh [MEKARA] [LIMIT]
#
# MEKARA (default: target/release/mekara, else target/debug/mekara) is the binary measured.
# A script that ends with exit code 1 failed as a script should (a Starlark error, the
# fallback); 124 is the time limit; 2 is an internal error; 134 or 139 a crash. Peak memory
# includes the child process the script is evaluated in.
#
# Then hostile agent answers: the journal's size and peak memory of an unattended run whose
# agent answers past the cap.
#
# Then what evaluating in a child process costs: the mean wall time of a run of a one-step
# script, evaluated in a child (the default) and in mekara's own process
# (`MEKARA_EVALUATE_IN_PROCESS=1`), RUNS times each (default 20).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mekara=${1:-}
if [ -z "$mekara" ]; then
  mekara=$repo/target/release/mekara
  [ -x "$mekara" ] || mekara=$repo/target/debug/mekara
fi
# The runs below start in the project's folder.
mekara=$(cd "$(dirname "$mekara")" && pwd)/$(basename "$mekara")
limit=${2:-60}
runs=${RUNS:-20}
project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
mkdir -p "$project/.mekara/scripts/nl" "$project/.mekara/scripts/compiled" "$project/home"

# name|body of `execute` (\n for new lines, 4-space indents)
# `n` is computed when the script runs (starlark computes some constant expressions while it
# compiles the file).
scripts=(
  'repeat-string|x = "x" * 2147483647'
  'repeat-string-big|x = ("x" * 1000000) * 2147483647'
  'repeat-list|l = [1] * 2147483647'
  'list-of-range|n = len(request) + 2147483647\n    l = list(range(n))'
  'double-string-40|s = "x"\n    for i in range(40):\n        s = s + s'
  'double-list-40|l = [1]\n    for i in range(40):\n        l = l + l'
  'extend-list-40|l = [1]\n    for i in range(40):\n        l.extend(l)'
  'join|s = "x" * 1000000\n    t = "x".join([s] * 10000)'
  'replace|s = "x" * 1000000\n    t = s.replace("x", "y" * 10000)'
  'percent|s = "x" * 1000000\n    t = ("%s" * 10000) % tuple([s] * 10000)'
  'json-encode-big|s = "x" * 1000000\n    t = json.encode([s] * 10000)'
  'dict-growth|d = {}\n    for i in range(100000000):\n        d[i] = i'
  'int-too-big|x = "x" * 2**40'
  'big-but-allowed|s = "x" * 100000000\n    print(len(s))'
  # Not hostile: what the statement hook of the memory check costs a tight loop.
  'tight-loop|for i in range(10000000):\n        x = i'
  'deep-json-encode|l = []\n    for i in range(150):\n        l = [l]\n    json.encode(l)'
  'deep-function-value|auto(deep, {})'
  'big-prints|auto(loud, {})'
)
printf '%-22s %6s %9s %12s\n' script exit seconds "peak RSS"
for entry in "${scripts[@]}"; do
  name=${entry%%|*}
  body=${entry#*|}
  echo "Hostile: $name." >"$project/.mekara/scripts/nl/$name.md"
  printf 'def deep():\n    d = {}\n    for i in range(300):\n        d = {"a": d}\n    return d\n\ndef loud():\n    s = ("x" * 1024) * 1024\n    for i in range(64):\n        print(s)\n\ndef execute(request):\n    %b\n' \
    "$body" >"$project/.mekara/scripts/compiled/$name.star"
  out=$(mktemp)
  set +e
  (cd "$project" && ulimit -v $((8 * 1024 * 1024)) && HOME="$project/home" \
    /usr/bin/time -o "$out" -f '%e %M' timeout "$limit" "$mekara" run "$name" \
    </dev/null >/dev/null 2>&1)
  code=$?
  set -e
  # The last line: `time` writes "Command exited with non-zero status N" before it.
  read -r seconds kib < <(tail -n 1 "$out") || true
  rm -f "$out"
  printf '%-22s %6s %9s %9s MiB\n' "$name" "$code" "$seconds" "$((${kib:-0} / 1024))"
done

# Hostile answers (issue 31): a script of three llm steps run unattended by an agent that
# answers each with 12 MB of JSON, or with 1.5 GB of text; the journal's size and mekara's
# peak memory. Every answer past the cap (8 MiB) is stopped and refused, so the journal
# holds none of them.
echo "Three questions." >"$project/.mekara/scripts/nl/three.md"
printf 'def execute(request):\n    for i in range(3):\n        llm("Say something.", expects = ["text"])\n' \
  >"$project/.mekara/scripts/compiled/three.star"
answers=(
  'json-12MB|python3 -c "import json, sys; sys.stdin.read(); print(json.dumps({\"outputs\": {\"text\": \"r\" * 12000000}}))"'
  'text-1.5GB|head -c 1500000000 /dev/zero | tr "\\0" x'
)
printf '\n%-22s %6s %9s %12s %14s\n' answer exit seconds "peak RSS" "journal bytes"
for entry in "${answers[@]}"; do
  name=${entry%%|*}
  agent=${entry#*|}
  rm -rf "$project/.mekara/runs"
  out=$(mktemp)
  set +e
  (cd "$project" && ulimit -v $((8 * 1024 * 1024)) && HOME="$project/home" \
    /usr/bin/time -o "$out" -f '%e %M' timeout "$limit" "$mekara" run --agent-command "$agent" three \
    </dev/null >/dev/null 2>&1)
  code=$?
  set -e
  read -r seconds kib < <(tail -n 1 "$out") || true
  rm -f "$out"
  journal=$(cat "$project"/.mekara/runs/*.jsonl 2>/dev/null | wc -c)
  printf '%-22s %6s %9s %9s MiB %14s\n' "$name" "$code" "$seconds" "$((${kib:-0} / 1024))" "$journal"
done

echo "One step." >"$project/.mekara/scripts/nl/one.md"
printf 'def execute(request):\n    auto("true")\n' >"$project/.mekara/scripts/compiled/one.star"
printf '\n%-22s %14s\n' "evaluated" "ms per run"
for how in child process; do
  in_process=""
  [ "$how" = process ] && in_process=1
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do
    (cd "$project" && HOME="$project/home" MEKARA_EVALUATE_IN_PROCESS=$in_process \
      "$mekara" run one </dev/null >/dev/null 2>&1) || { echo "run one failed" >&2; exit 1; }
  done
  end=$(date +%s%N)
  printf '%-22s %14s\n' "in a $how" "$(( (end - start) / runs / 1000000 ))"
done

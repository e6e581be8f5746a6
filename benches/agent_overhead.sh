#!/usr/bin/env bash
# mekara's overhead per unattended llm step (issue 17): a script of N llm steps run with
# `mekara run --agent-command` and an agent that only prints a canned answer (`cat` of a file),
# against running that same agent command N times directly. The difference, per step, is what
# mekara adds around the agent: rendering the prompt, writing the request, starting the
# command through the shell in its own process group, reading and checking the answer, and
# journaling it.
#
#   bash benches/agent_overhead.sh [MEKARA] [STEPS] [ROUNDS] [OTHER...]
#
# MEKARA (default: target/release/mekara) is the binary measured; STEPS (default 50) llm steps
# per run; ROUNDS (default 5) runs, of which the median is printed. OTHER are more binaries
# (an earlier build), measured in the same rounds, one after the other, and printed each on
# its own lines, so the figures compare. Nothing leaves the machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mekara=${1:-$repo/target/release/mekara}
steps=${2:-50}
rounds=${3:-5}
binaries=("$mekara" "${@:4}")
for bin in "${binaries[@]}"; do
  [ -x "$bin" ] || { echo "no mekara binary at $bin: cargo build --release" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project/.mekara/scripts/nl" "$work/project/.mekara/scripts/compiled" "$work/home"
printf -- '---\ndescription: llm steps\n---\n1. Answer.\n' >"$work/project/.mekara/scripts/nl/many.md"
cat >"$work/project/.mekara/scripts/compiled/many.star" <<EOF
def execute(request):
    for i in range($steps):
        llm("Step %d: answer." % i, expects = {"answer": "anything"})
EOF
printf '{"outputs": {"answer": "42"}}\n' >"$work/answer.json"
agent="cat $work/answer.json"

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# unattended[K] is the list of run times of binaries[K], one per round, space-separated.
direct=() unattended=()
for _ in $(seq "$rounds"); do
  start=$(now)
  for _ in $(seq "$steps"); do bash -c "$agent" </dev/null >/dev/null; done
  direct+=("$(echo "$(now) - $start" | bc -l)")
  for k in "${!binaries[@]}"; do
    start=$(now)
    (cd "$work/project" && HOME=$work/home "${binaries[$k]}" run --agent-command "$agent" many >/dev/null 2>&1)
    unattended[k]="${unattended[k]:-} $(echo "$(now) - $start" | bc -l)"
  done
done
d=$(printf '%s\n' "${direct[@]}" | median)
printf 'agent command run directly: %.2f ms per step\n' "$(echo "$d * 1000 / $steps" | bc -l)"
for k in "${!binaries[@]}"; do
  u=$(printf '%s\n' ${unattended[k]} | median)
  # The spread: each round's overhead (its run against its direct runs), fastest .. slowest.
  spread=$(paste <(printf '%s\n' ${unattended[k]}) <(printf '%s\n' "${direct[@]}") |
    awk -v n="$steps" '{o = ($1 - $2) * 1000 / n; if (NR == 1 || o < lo) lo = o; if (NR == 1 || o > hi) hi = o}
      END {printf "%.2f .. %.2f", lo, hi}')
  printf 'through mekara run --agent-command (%s): %.2f ms per step\n' "${binaries[$k]}" "$(echo "$u * 1000 / $steps" | bc -l)"
  printf 'mekara overhead (%s): %.2f ms per llm step (median of %d runs of %d steps; rounds %s ms)\n' \
    "${binaries[$k]}" "$(echo "($u - $d) * 1000 / $steps" | bc -l)" "$rounds" "$steps" "$spread"
done

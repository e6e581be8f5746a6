#!/usr/bin/env bash
# The cost of a rewind of a 1000-step journal. A script of 1000 function steps, then an llm
# step, is run once (the run stops at the llm step: stdin is closed). Then, ROUNDS times each:
#
#   resume   `mekara run --resume ID`                      replays 1000 steps, stops at the llm step
#   from     `mekara run --resume ID --from bench[999]`     plans, supersedes step 999, replays 999,
#                                                           runs step 999 again, stops there
#   retry    `mekara run --resume ID --retry` after an edit of step 999 (planning evaluates the
#            frame over its steps to find the change), same work after that
#
# and prints the median wall time of each and its difference from `resume`: the rewind's own
# cost above the steps that run again (one function step here). Target: under 50 ms.
#
#   bash benches/rewind.sh [ROUNDS] [MEKARA]
#
# MEKARA defaults to the debug build of this checkout (built first); give a release binary
# for figures that match what users run.
set -euo pipefail
rounds=${1:-9}
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${2:-}" ]; then
  mekara=$2
else
  cargo build --locked -q --manifest-path "$repo/Cargo.toml"
  mekara=${CARGO_TARGET_DIR:-$repo/target}/debug/mekara
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/p/.mekara/scripts/nl" "$work/p/.mekara/scripts/compiled"
cd "$work/p"
export HOME=$work/home NO_COLOR=1
echo "1000 steps, then a question." >.mekara/scripts/nl/bench.md
write_script() {
  cat >.mekara/scripts/compiled/bench.star <<EOF
def step(i):
    return i * 2

def execute(request):
    for i in range(999):
        auto(step, {"i": i})
    auto(step, {"i": $1})
    llm("Say a word", expects = ["word"])
EOF
}
write_script 999
"$mekara" run bench </dev/null >/dev/null || true
id=$(ls .mekara/runs | sed -n 's/\.jsonl$//p' | head -n 1)

# Median wall time in ms of `mekara ARGS` (stdin closed), run $rounds times; `before` runs
# (unmeasured) before each round.
median() {
  local before=$1
  shift
  local times=()
  for _ in $(seq "$rounds"); do
    $before
    local start end
    start=$(date +%s%N)
    "$mekara" "$@" </dev/null >/dev/null 2>&1 || true
    end=$(date +%s%N)
    times+=($(((end - start) / 1000000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p"
}
nothing() { :; }
flip=0
# Each round edits step 999 to a value it did not have, so there is always a change to find.
edit() {
  flip=$((flip + 1))
  write_script $((1000 + flip))
}

resume=$(median nothing run --resume "$id")
from=$(median nothing run --resume "$id" --from 'bench[999]')
retry=$(median edit run --resume "$id" --retry)
steps=$(grep -c '"event":"step"' ".mekara/runs/$id.jsonl")
echo "journal: $steps step records ($(wc -c <".mekara/runs/$id.jsonl") bytes) after the rounds"
echo "resume (replay 1000 steps):         ${resume} ms"
echo "--from bench[999]:                  ${from} ms (+$((from - resume)) ms)"
echo "--retry after an edit of step 999:  ${retry} ms (+$((retry - resume)) ms)"

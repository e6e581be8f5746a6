#!/usr/bin/env bash
# The edit-test loop: how long `cargo test --no-run` (debug) takes to rebuild the tests after
# a one-line change in src/engine/. Prints one line per round with the wall time and the CPU
# time (user + system; the CPU time drifts less when the machine is busy).
#
#   bash benches/edit_loop.sh [ROUNDS] [TREE]
#
# TREE (default: this checkout) may be another checkout, e.g. an older commit made with
# `git worktree add --detach /tmp/old COMMIT`, to put two layouts side by side; give both the
# same CARGO_TARGET_DIR so the dependencies are built once. The edited file is restored.
set -euo pipefail
rounds=${1:-3}
tree=${2:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$tree"
file=src/engine/executor.rs
times=$(mktemp)
trap 'git checkout -q -- "$file"; rm -f "$times"' EXIT
# Unmeasured: the dependencies and the tree as it is.
cargo test --locked --no-run -q >/dev/null 2>&1 || cargo test --locked --no-run -q
for round in $(seq "$rounds"); do
  echo "// edit-loop round $round" >>"$file"
  start=$(date +%s.%N)
  /usr/bin/time -o "$times" -f "%U %S" cargo test --locked --no-run -q >/dev/null 2>&1
  read -r user sys <"$times"
  end=$(date +%s.%N)
  printf '%s round %d: wall %.1f s, cpu %.1f s\n' "$(basename "$tree")" "$round" \
    "$(echo "$end - $start" | bc)" "$(echo "$user + $sys" | bc)"
done

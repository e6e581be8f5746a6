#!/usr/bin/env bash
# The edit-test loop of a contributor: change one line of the library, then run one
# integration test, as `cargo test` rebuilds what the change touched (the library, the
# binary the test spawns, and the test binary; debug) and runs it. Prints one line per
# round: the wall time of the build and of the test, and the build's CPU time (user +
# system, which drifts less when the machine is busy), then the median.
#
#   bash benches/edit_loop.sh [ROUNDS] [TREE] [FILE] [TEST]
#
# ROUNDS  edits to time (default 3)
# TREE    the checkout (default this one); another, e.g. an older commit made with
#         `git worktree add --detach /tmp/old COMMIT`, puts two layouts side by side: give
#         both the same CARGO_TARGET_DIR so the dependencies are built once
# FILE    the library file edited (default src/engine/executor/mod.rs)
# TEST    the integration test run (default exit_codes::an_unknown_script_name_is_a_usage_error_everywhere)
#
# The edit adds a constant with a new value each round (a comment alone is seen through by
# rustc's incremental cache only partly); the file is restored at the end.
set -euo pipefail
rounds=${1:-3}
tree=${2:-$(cd "$(dirname "$0")/.." && pwd)}
file=${3:-src/engine/executor/mod.rs}
test=${4:-exit_codes::an_unknown_script_name_is_a_usage_error_everywhere}
cd "$tree"
times=$(mktemp)
backup=$(mktemp)
cp "$file" "$backup"
trap 'cp "$backup" "$file"; rm -f "$times" "$backup"' EXIT
flags=(--locked --features clients --test it)
# Unmeasured: the dependencies and the tree as it is.
cargo test "${flags[@]}" --no-run -q >/dev/null 2>&1 || cargo test "${flags[@]}" --no-run -q
totals=()
for round in $(seq "$rounds"); do
  cp "$backup" "$file"
  printf '\n#[allow(dead_code)]\nconst EDIT_LOOP_ROUND: &str = "%s";\n' "$round-$RANDOM" >>"$file"
  start=$(date +%s.%N)
  /usr/bin/time -o "$times" -f "%U %S" cargo test "${flags[@]}" --no-run -q >/dev/null 2>&1
  built=$(date +%s.%N)
  ran=$(cargo test "${flags[@]}" -- "$test" --exact 2>&1 | grep -c "^test .* ok$" || true)
  end=$(date +%s.%N)
  [ "$ran" = 1 ] || { echo "the test \`$test\` did not run and pass once" >&2; exit 1; }
  read -r user sys <"$times"
  total=$(echo "$end - $start" | bc)
  totals+=("$total")
  printf '%s round %d: %.1f s (build %.1f s wall, %.1f s cpu; test %.1f s)\n' \
    "$(basename "$tree")" "$round" "$total" "$(echo "$built - $start" | bc)" \
    "$(echo "$user + $sys" | bc)" "$(echo "$end - $built" | bc)"
done
median=$(printf '%s\n' "${totals[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
printf '%s: edit %s, run %s: median %.1f s over %d rounds\n' \
  "$(basename "$tree")" "$file" "$test" "$median" "$rounds"

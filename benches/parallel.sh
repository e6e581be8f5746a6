#!/usr/bin/env bash
# What a `parallel` group buys: the wall time of a script whose four steps each `sleep 1`,
# run as a group (`parallel([...], max = 4)`) and one after another. Expect about 1 s and
# 4 s; the difference from those is mekara's own cost (spawning, journaling, the rounds).
#
#   bash benches/parallel.sh [MEKARA] [ROUNDS]
#
# MEKARA defaults to the debug build of this checkout (built first). Each form runs ROUNDS
# times (default 3) and its median is printed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${1:-}" ]; then
  mekara=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
else
  cargo build --locked -q --manifest-path "$repo/Cargo.toml"
  mekara=${CARGO_TARGET_DIR:-$repo/target}/debug/mekara
fi
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/p/.mekara/scripts/nl" "$work/p/.mekara/scripts/compiled"
cd "$work/p"
export HOME=$work/home NO_COLOR=1
echo "Sleep four times." >.mekara/scripts/nl/group.md
echo "Sleep four times." >.mekara/scripts/nl/serial.md
cat >.mekara/scripts/compiled/group.star <<'STAR'
def execute(request):
    parallel([lambda: auto("sleep 1") for _ in range(4)], max = 4)
STAR
cat >.mekara/scripts/compiled/serial.star <<'STAR'
def execute(request):
    for _ in range(4):
        auto("sleep 1")
STAR
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for name in group serial; do
  for _ in $(seq "$rounds"); do
    start=$(date +%s%N)
    "$mekara" run "$name" >/dev/null </dev/null
    end=$(date +%s%N)
    echo $(((end - start) / 1000000))
  done | median | {
    read -r ms
    printf '%-7s four `sleep 1` steps: %5d ms (median of %d)\n' "$name" "$ms" "$rounds"
  }
done

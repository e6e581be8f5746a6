#!/usr/bin/env bash
# What a workflow of the library (issue 32) adds around the work it does: `mekara run
# flow/fix-ci` in a small Python repository whose tests pass (project detection: one probe
# shell step and one function step, then the check, all journaled), against running that
# check directly. The difference is mekara's part: starting, resolving the bundled script and
# its helper module, evaluating it, the probe, and the journal.
#
#   bash benches/library.sh [MEKARA] [ROUNDS]
#
# MEKARA (default: target/release/mekara) is the binary measured; ROUNDS (default 9) runs of
# each, of which the median is printed. Nothing leaves the machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mekara=${1:-$repo/target/release/mekara}
rounds=${2:-9}
[ -x "$mekara" ] || { echo "no mekara binary at $mekara: cargo build --release" >&2; exit 2; }
mekara=$(cd "$(dirname "$mekara")" && pwd)/$(basename "$mekara")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project/.mekara" "$work/home"
cd "$work/project"
export HOME="$work/home" NO_COLOR=1
printf '[user]\n\tname = Bench\n\temail = bench@example.com\n' >"$HOME/.gitconfig"
printf '[project]\nname = "stats"\nversion = "0.1.0"\n' >pyproject.toml
printf 'def mean(xs):\n    return sum(xs) / len(xs)\n' >stats.py
printf 'import unittest\nfrom stats import mean\n\nclass T(unittest.TestCase):\n    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n' >test_stats.py
printf '.mekara/\n__pycache__/\n' >.gitignore
git init -q && git add -A && git commit -qm init

median_ms() { # command...: the median wall time of ROUNDS runs, in milliseconds
  local times=()
  for _ in $(seq "$rounds"); do
    local start end
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s%N)
    times+=($(( (end - start) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p"
}

out=$("$mekara" run --agent-command false flow/fix-ci 2>&1) || { echo "flow/fix-ci did not complete: $out" >&2; exit 1; }
direct=$(median_ms python3 -m unittest discover)
workflow=$(median_ms "$mekara" run --agent-command false flow/fix-ci)
echo "check run directly (python3 -m unittest discover): ${direct} ms (median of $rounds)"
echo "mekara run flow/fix-ci, checks passing:            ${workflow} ms (median of $rounds)"
echo "what the workflow adds:                             $(( workflow - direct )) ms"

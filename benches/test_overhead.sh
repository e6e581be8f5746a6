#!/usr/bin/env bash
# What `mekara test` adds around the steps a case runs (issue 41): per case and per step.
#
#   bash benches/test_overhead.sh [MEKARA] [ROUNDS]
#
# A project with three scripts and one case each: `bench/one` (one shell step), `bench/twenty`
# (20 steps: 16 shell steps of `true` and 4 llm steps the case answers) and `bench/nothing`
# (a case whose fixture is a git repository, for what preparing one costs). Each case is run
# alone (`mekara test NAME -j 1`) ROUNDS times and the median wall time printed, beside
# running its shell steps directly; then ten one-step cases at once, as CI runs a library.
# Per step: (twenty − one) / 19; above its shell steps: twenty − the 16 `true`s run directly.
# The goal: a 20-step case under 100 ms above its shell steps.
#
# MEKARA (default: target/release/mekara) is the binary measured; ROUNDS (default 9). Nothing
# leaves the machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mekara=${1:-$repo/target/release/mekara}
rounds=${2:-9}
[ -x "$mekara" ] || { echo "no mekara binary at $mekara: cargo build --release" >&2; exit 2; }
mekara=$(cd "$(dirname "$mekara")" && pwd)/$(basename "$mekara")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project/.mekara/scripts/nl/bench" "$work/project/.mekara/scripts/compiled/bench" "$work/home"
cd "$work/project"
export HOME="$work/home" NO_COLOR=1

script() { # name, Starlark body of execute(request)
  printf 'A benchmark script.\n' >".mekara/scripts/nl/bench/$1.md"
  printf 'def execute(request):\n%s\n' "$2" >".mekara/scripts/compiled/bench/$1.star"
}
case_file() { # script, case, TOML
  mkdir -p ".mekara/tests/bench/$1"
  printf '%s\n' "$3" >".mekara/tests/bench/$1/$2.toml"
}

script one '    auto("true")'
case_file one basic '[expect]
end = "completed"'
body=''
for i in $(seq 1 16); do
  body+="    auto(\"true\")"$'\n'
  if [ $((i % 4)) = 0 ]; then
    body+="    llm(\"Step $i: say something\", expects = {\"said\": \"it\"})"$'\n'
  fi
done
script twenty "$body"
case_file twenty basic '[[agent]]
outputs = { said = "it" }
[[agent]]
outputs = { said = "it" }
[[agent]]
outputs = { said = "it" }
[[agent]]
outputs = { said = "it" }
[expect]
end = "completed"'
script nothing '    auto("true")'
case_file nothing git '[fixture]
git = true
files = { "README.md" = "hi\n" }'
mkdir -p .mekara/tests/bench/many
for i in $(seq 1 10); do
  printf '[expect]\nend = "completed"\n' >".mekara/tests/bench/many/c$i.toml"
done
script many '    auto("true")'

# The median of ROUNDS runs of a command, in milliseconds: wall time and CPU time (user and
# system, of the command and every process it waited for). On a busy machine the wall time
# is mostly waiting for a core; the CPU time is what the command itself costs.
median_ms() { # command...: "WALL CPU"
  local walls=() cpus=()
  for _ in $(seq "$rounds"); do
    local start end cpu
    start=$(date +%s%N)
    /usr/bin/time -o "$work/time" -f '%U %S' "$@" >/dev/null 2>&1
    cpu=$(tail -1 "$work/time")
    end=$(date +%s%N)
    walls+=($(( (end - start) / 1000000 )))
    cpus+=($(echo "$cpu" | awk '{printf "%d", ($1 + $2) * 1000}'))
  done
  local mid=$(( (rounds + 1) / 2 ))
  echo "$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "${mid}p") $(printf '%s\n' "${cpus[@]}" | sort -n | sed -n "${mid}p")"
}
trues() { for _ in $(seq 1 "$1"); do sh -c true; done; }
export -f trues
wall() { echo "${1% *}"; }
cpu() { echo "${1#* }"; }

for name in one twenty nothing many; do
  "$mekara" test -j 1 "bench/$name" >/dev/null 2>&1 || { "$mekara" test -j 1 "bench/$name"; exit 1; }
done
one=$(median_ms "$mekara" test -j 1 bench/one/basic)
twenty=$(median_ms "$mekara" test -j 1 bench/twenty/basic)
git_case=$(median_ms "$mekara" test -j 1 bench/nothing/git)
many=$(median_ms "$mekara" test bench/many)
direct1=$(median_ms bash -c 'trues 1')
direct16=$(median_ms bash -c 'trues 16')
cores=$(nproc)
line() { # what, measured "WALL CPU", shell steps' "WALL CPU"
  printf '%-38s %5s ms wall, %5s ms CPU' "$1" "$(wall "$2")" "$(cpu "$2")"
  [ -n "${3:-}" ] && printf ' (its shell steps run directly: %s ms wall, %s ms CPU)' "$(wall "$3")" "$(cpu "$3")"
  echo
}
line "a one-step case:" "$one" "$direct1"
line "a 20-step case (16 shell, 4 llm):" "$twenty" "$direct16"
echo "  above its shell steps:               $(( $(wall "$twenty") - $(wall "$direct16") )) ms wall, $(( $(cpu "$twenty") - $(cpu "$direct16") )) ms CPU (goal: under 100 ms)"
echo "  per step:                            $(( ($(wall "$twenty") - $(wall "$one")) * 1000 / 19 )) µs wall, $(( ($(cpu "$twenty") - $(cpu "$one")) * 1000 / 19 )) µs CPU"
line "a one-step case in a git fixture:" "$git_case"
line "ten one-step cases, $cores at once:" "$many"
echo "(median of $rounds; $mekara; load average $(cut -d' ' -f1 /proc/loadavg))"

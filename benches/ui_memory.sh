#!/usr/bin/env bash
# The viewer's size and memory on a big run (issue 40): a run whose STEPS shell steps each
# print about 54 MB (`seq 1 7000000`; a step keeps 8 MB of it, head and tail, so the journal
# is about STEPS × 8 MB), served by `mekara ui`; its run page and `/api/runs/ID` loaded
# twice each, and one step's whole output once. Prints, per binary: the page's and the
# API answer's sizes, the server's peak resident memory (VmHWM of /proc/PID/status) and what
# it still holds a second after (VmRSS).
#
#   bash benches/ui_memory.sh [MEKARA] [STEPS] [OTHER...]
#
# MEKARA (default: target/release/mekara) makes the run and is measured; STEPS (default 7);
# OTHER are more binaries (an earlier build) measured on the same run. Nothing leaves the
# machine: the viewer listens on 127.0.0.1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mekara=${1:-$repo/target/release/mekara}
steps=${2:-7}
binaries=("$mekara" "${@:3}")
for bin in "${binaries[@]}"; do
  [ -x "$bin" ] || { echo "no mekara binary at $bin: cargo build --release" >&2; exit 2; }
done
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/project/.mekara/scripts/nl" "$work/project/.mekara/scripts/compiled" "$work/home"
printf -- '---\ndescription: loud steps\n---\n1. Print a lot.\n' >"$work/project/.mekara/scripts/nl/loud.md"
cat >"$work/project/.mekara/scripts/compiled/loud.star" <<EOS
def execute(request):
    for i in range($steps):
        auto("seq 1 7000000")
EOS
cd "$work/project"
export HOME=$work/home
"$mekara" run loud >/dev/null 2>&1
journal=$(ls .mekara/runs/*.jsonl | head -1)
id=$(basename "$journal" .jsonl)
printf 'run %s: %s steps, journal %s bytes\n' "$id" "$steps" "$(stat -c %s "$journal")"

kib() { awk -v k="$1" '/^'"$1"':/ {print $2}' "/proc/$2/status"; }
for bin in "${binaries[@]}"; do
  "$bin" ui --poll 1s >"$work/address" 2>/dev/null &
  server=$!
  for _ in $(seq 100); do [ -s "$work/address" ] && break; sleep 0.1; done
  url=$(head -1 "$work/address")
  base=${url%%/?token=*}
  token=${url##*token=}
  page=0 api=0
  for _ in 1 2; do
    page=$(curl -s -o /dev/null -w '%{size_download}' "$base/runs/$id?token=$token")
    api=$(curl -s -o /dev/null -w '%{size_download}' -H "X-Mekara-Token: $token" "$base/api/runs/$id")
  done
  whole=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "$base/runs/$id/output/2?token=$token")
  sleep 1
  printf '%s\n  page %s bytes, api %s bytes, one whole output (status, bytes): %s\n  peak RSS %s MB, RSS after %s MB\n' \
    "$bin" "$page" "$api" "$whole" "$(( $(kib VmHWM "$server") / 1024 ))" "$(( $(kib VmRSS "$server") / 1024 ))"
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
  : >"$work/address"
done

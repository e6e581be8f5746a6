#!/usr/bin/env bash
# From nothing to a first completed `/NAME` run for a user of mekara's Claude Code plugin, in
# the real Claude Code against the scripted stand-in model (so the model's own time is zero):
# `claude plugin marketplace add` of this checkout, `claude plugin install mekara@mekara`, and
# `claude -p "/hello world"` run to its end through the plugin. Runs the end-to-end test that
# does exactly that ROUNDS times (release build) and prints each round's figures and the
# medians. Installing the mekara program itself is measured by `packaging/build` and its test.
#
# Usage: bash benches/plugin_first_run.sh [ROUNDS]   (needs `bash tests/claude/install.sh`)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
test=claude_code::plugin::a_plugin_user_types_a_compiled_script_and_it_runs_to_its_end_without_a_prompt
cargo test --locked --release --features clients --test it --no-run 2>/dev/null
figures=$(mktemp)
for _ in $(seq "$rounds"); do
  cargo test --locked --release --features clients --test it -- --exact "$test" --nocapture 2>&1 \
    | grep '^timing:' | tr '\n' ' ' | tee -a "$figures"
  echo | tee -a "$figures"
done
python3 - "$figures" <<'PY'
import re, statistics, sys
rows = [dict((k.strip(), float(v)) for k, v in re.findall(r'([a-z /]+?) ([0-9.]+) s', line.replace('timing:', ',')))
        for line in open(sys.argv[1]) if line.strip()]
for key in rows[0]:
    print(f"median {key}: {statistics.median(r[key] for r in rows):.2f} s")
print(f"median total: {statistics.median(sum(r.values()) for r in rows):.2f} s over {len(rows)} rounds")
PY
rm -f "$figures"

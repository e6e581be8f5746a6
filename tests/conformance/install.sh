#!/usr/bin/env bash
# Installs the MCP conformance suite that tests/conformance.rs runs against `mekara mcp --http`.
#
# The pinned package.json (and package-lock.json, when present) beside this script are copied
# to target/test-clients/conformance/, then installed there with `npm ci` (or `npm install`
# without a lock file). Idempotent: when the installed copy matches the committed files and the
# suite is in node_modules, nothing is fetched. Needs node (20 or later) and npm.
#
# Usage: bash tests/conformance/install.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dest="$repo/target/test-clients/conformance"
files=(package.json)
[[ -f "$here/package-lock.json" ]] && files+=(package-lock.json)

up_to_date() {
  [[ -f "$dest/node_modules/@modelcontextprotocol/conformance/package.json" ]] || return 1
  local f
  for f in "${files[@]}"; do
    cmp -s "$here/$f" "$dest/$f" || return 1
  done
}

if up_to_date; then
  echo "conformance suite: up to date in $dest"
  exit 0
fi

mkdir -p "$dest"
rm -f "$dest/package-lock.json"
for f in "${files[@]}"; do
  cp "$here/$f" "$dest/$f"
done
cd "$dest"
# --loglevel=error hides the EBADENGINE notice for a dependency of the suite's `tier-check`
# command, which the tests never run.
if [[ -f package-lock.json ]]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
# npm rewrites the lock file's formatting on install; keep the committed bytes so the
# up-to-date check above holds next time.
for f in "${files[@]}"; do
  cp "$here/$f" "$dest/$f"
done
echo "conformance suite: installed $(node -p 'require("./node_modules/@modelcontextprotocol/conformance/package.json").version') in $dest"

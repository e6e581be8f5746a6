#!/usr/bin/env bash
# Installs the reference server that benches/mcp.rs measures beside `mekara mcp`: the official
# Node example server, @modelcontextprotocol/server-everything, at the version pinned by
# package.json and package-lock.json beside this script, into target/test-clients/bench/.
# Idempotent. Needs node and npm. The bench runs without it, and then prints mekara's
# figures only.
#
# Usage: bash benches/mcp-peers/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/bench" \
  "@modelcontextprotocol/server-everything"

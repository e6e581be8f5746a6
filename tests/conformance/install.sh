#!/usr/bin/env bash
# Installs the MCP conformance suite that tests/conformance.rs runs against `mekara mcp --http`,
# at the version pinned by package.json and package-lock.json beside this script, into
# target/test-clients/conformance/. Idempotent. Needs node (20 or later) and npm.
#
# Usage: bash tests/conformance/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/conformance" \
  "@modelcontextprotocol/conformance"

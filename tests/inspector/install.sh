#!/usr/bin/env bash
# Installs the MCP Inspector (@modelcontextprotocol/inspector, the version pinned by the
# package.json and package-lock.json beside this script) into target/test-clients/inspector/,
# for the tests that drive mekara with its one-shot `--cli`. Idempotent. Needs node and npm.
#
# Usage: bash tests/inspector/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/inspector" \
  "@modelcontextprotocol/inspector"

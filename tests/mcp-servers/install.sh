#!/usr/bin/env bash
# Installs the real MCP servers that mekara's MCP client is tested and benchmarked against
# (@modelcontextprotocol/server-everything and server-filesystem, versions pinned by the
# package.json and package-lock.json beside this script) into target/test-clients/mcp-servers/.
# Idempotent. Needs node and npm.
#
# Usage: bash tests/mcp-servers/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/mcp-servers" \
  "@modelcontextprotocol/server-filesystem"

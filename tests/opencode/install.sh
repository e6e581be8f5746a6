#!/usr/bin/env bash
# Installs OpenCode, which tests/it/opencode drives end to end against a scripted stand-in
# model, at the version pinned by package.json and package-lock.json beside this script, into
# target/test-clients/opencode/. The package is a launcher plus one native binary for the
# platform (an optional dependency). Idempotent. Needs node and npm.
#
# Usage: bash tests/opencode/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/opencode" \
  "opencode-ai"

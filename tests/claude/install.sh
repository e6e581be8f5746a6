#!/usr/bin/env bash
# Installs Claude Code, which tests/claude_code.rs runs end to end against a scripted stand-in
# model, at the version pinned by package.json and package-lock.json beside this script, into
# target/test-clients/claude-code/. The npm package ships a native binary per platform (an
# optional dependency), so Node 20 is enough to install it although the package asks for 22.
# Idempotent. Needs node and npm.
#
# Usage: bash tests/claude/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/claude-code" \
  "@anthropic-ai/claude-code"

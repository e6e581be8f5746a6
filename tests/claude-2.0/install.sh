#!/usr/bin/env bash
# Installs Claude Code 2.0.72 (pinned by package.json and package-lock.json beside this
# script) into target/test-clients/claude-code-2.0/: the last version that offered commands
# to the model through a `SlashCommand` tool rather than `Skill`. Idempotent. Needs node and npm.
#
# Usage: bash tests/claude-2.0/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/claude-code-2.0" \
  "@anthropic-ai/claude-code"

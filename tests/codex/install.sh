#!/usr/bin/env bash
# Installs the Codex CLI, which tests/it/codex runs end to end against a scripted stand-in
# model, at the version pinned by package.json and package-lock.json beside this script, into
# target/test-clients/codex/. The npm package is a small launcher; the Rust binary comes as an
# optional dependency per platform, so any Node from 16 on installs it.
# Idempotent. Needs node and npm.
#
# Usage: bash tests/codex/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/codex" \
  "@openai/codex"

#!/usr/bin/env bash
# Installs Gemini CLI, which tests/it/gemini drives end to end against a scripted stand-in
# model, at the version pinned by package.json and package-lock.json beside this script, into
# target/test-clients/gemini/. The package is one bundled script (plus optional native
# helpers for the terminal and the keychain that the tests do not need); Node 20 runs it.
# Idempotent. Needs node and npm.
#
# Usage: bash tests/gemini/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/gemini" \
  "@google/gemini-cli"

#!/usr/bin/env bash
# Installs GitHub Copilot CLI, which tests/it/copilot drives end to end offline
# (`COPILOT_OFFLINE`, a provider of its own at a scripted stand-in model, no GitHub account),
# at the version pinned by package.json and package-lock.json beside this script, into
# target/test-clients/copilot/. The package is a launcher plus one native executable for the
# platform (an optional dependency), which unpacks itself on its first run: into cache/ beside
# node_modules/ here, once (the tests point `COPILOT_CACHE_HOME` there, so their throwaway homes
# do not each get a copy of it). Idempotent. Needs node and npm.
#
# Usage: bash tests/copilot/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dest="$repo/target/test-clients/copilot"
bash "$repo/tests/support/npm-install.sh" "$here" "$dest" "@github/copilot"
COPILOT_CACHE_HOME="$dest/cache" "$dest/node_modules/.bin/copilot" --version --no-auto-update \
  >/dev/null

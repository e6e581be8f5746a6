#!/usr/bin/env bash
# Installs c8 (versions pinned by the package.json and package-lock.json beside this script)
# into target/test-clients/c8/, for test-gaps' JavaScript coverage fixture. Idempotent. Needs
# node and npm.
#
# Usage: bash tests/c8/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/c8" c8

#!/usr/bin/env bash
# Installs maturin, which packaging/build uses to make mekara's wheel, into an ignored
# virtualenv at target/test-clients/packaging (tests/it/packaging.rs builds the packages with
# it). Idempotent: does nothing when the installed requirements match.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exec bash "$root/tests/support/venv-install.sh" "$root/tests/packaging/requirements.txt" \
    "$root/target/test-clients/packaging"

#!/usr/bin/env bash
# Installs the Python MCP client used by tests/python_client.rs into an ignored virtualenv at
# target/test-clients/py. Idempotent: does nothing when the installed requirements match.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exec bash "$root/tests/support/venv-install.sh" "$root/tests/python/requirements.txt" \
    "$root/target/test-clients/py"

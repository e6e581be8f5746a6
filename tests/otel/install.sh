#!/usr/bin/env bash
# Installs the OTLP receiver used by tests/it/otel.rs (tests/otel/receiver.py and the official
# `opentelemetry-proto` package) into an ignored virtualenv at target/test-clients/otel.
# Idempotent: does nothing when the installed requirements match.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exec bash "$root/tests/support/venv-install.sh" "$root/tests/otel/requirements.txt" \
    "$root/target/test-clients/otel"

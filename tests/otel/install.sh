#!/usr/bin/env bash
# Installs the OTLP receiver used by tests/it/otel.rs (tests/otel/receiver.py and the official
# `opentelemetry-proto` package) into an ignored virtualenv at target/test-clients/otel.
# Idempotent: does nothing when the installed requirements match.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/target/test-clients/otel"
requirements="$root/tests/otel/requirements.txt"
stamp="$venv/.requirements.txt"

if [[ -x "$venv/bin/python" ]] && cmp -s "$requirements" "$stamp"; then
    exit 0
fi

python="${PYTHON:-}"
if [[ -z "$python" ]]; then
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null; then
            python="$candidate"
            break
        fi
    done
fi
if [[ -z "$python" ]]; then
    echo "install.sh: no python3 found (set PYTHON)" >&2
    exit 1
fi

mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"

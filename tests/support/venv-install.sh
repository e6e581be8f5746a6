#!/usr/bin/env bash
# Installs a pinned Python package set into an ignored virtualenv, for tests.
#
# Usage: bash tests/support/venv-install.sh REQUIREMENTS VENV_DIR
#
# REQUIREMENTS is a committed requirements.txt; it is installed with pip into a virtualenv at
# VENV_DIR. Idempotent: does nothing when VENV_DIR was made from the same requirements.
# Uses python3.11 when there is one, else python3 (or $PYTHON).
set -euo pipefail
requirements="$1"
venv="$2"
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
    echo "venv-install.sh: no python3 found (set PYTHON)" >&2
    exit 1
fi

mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"

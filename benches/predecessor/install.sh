#!/usr/bin/env bash
# Installs mekara's Python predecessor, PyPI `mekara==0.1.2`, into a virtualenv at
# target/bench-peers/predecessor/, for the benches that measure it beside this program
# (benches/lengths.rs). It asks for Python >= 3.12 but runs on 3.11, so it is installed with
# `--ignore-requires-python`, and with the MCP SDK held below 2.0 (its server is built on
# `mcp.server.fastmcp`, which the SDK's 2.0 renamed: unpinned, it no longer starts). Idempotent; prints the path of its `mekara` command. Needs
# python3 (>= 3.11) with venv and pip, and the package index (or a wheel in pip's find-links).
#
# Usage: bash benches/predecessor/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
version=0.1.2
venv="$repo/target/bench-peers/predecessor"
python=${PYTHON:-python3}
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mekara') != '$version' or m.version('mcp') >= '2')" 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --ignore-requires-python "mekara==$version" "mcp[cli]>=1.1,<2" >&2
fi
# Its MCP server must load (the bench then runs llm steps through it).
"$venv/bin/python" -c "import mekara.mcp.server" >&2
echo "$venv/bin/mekara"

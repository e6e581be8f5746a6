#!/usr/bin/env bash
# Installs Qwen Code, which tests/it/qwen drives end to end against a scripted stand-in model,
# at the version pinned by package.json and package-lock.json beside this script, into
# target/test-clients/qwen/. Its package asks for Node 22, but the code paths the tests use
# (one-shot prompts, `qwen mcp approve`, stdio MCP servers, an OpenAI-compatible provider)
# run on Node 20, so npm's engine notice is not an error here. Idempotent. Needs node and npm.
#
# Usage: bash tests/qwen/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
exec bash "$repo/tests/support/npm-install.sh" "$here" "$repo/target/test-clients/qwen" \
  "@qwen-code/qwen-code"

#!/usr/bin/env bash
# Type-checks mekara, its tests and benches for macOS (x86_64-apple-darwin) with clippy, on
# this Linux machine. Nothing is linked, so the C code of dependencies (ring) is "compiled" by
# the stand-ins beside this script, which write empty objects. Needs the target's standard
# library (`rustup target add x86_64-apple-darwin`); without it, says so and stops.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/macos
if ! rustup target add x86_64-apple-darwin >/dev/null 2>&1; then
  echo "macOS check skipped: rustup cannot install the x86_64-apple-darwin standard library here"
  exit 0
fi
CC_x86_64_apple_darwin="$PWD/$here/cc" AR_x86_64_apple_darwin="$PWD/$here/ar" \
  cargo clippy --locked --target x86_64-apple-darwin --all-targets --features clients -- -D warnings

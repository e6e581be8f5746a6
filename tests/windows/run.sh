#!/usr/bin/env bash
# The Windows checks, run from Linux: builds mekara for x86_64-pc-windows-gnu, runs its unit
# tests under Wine (the Job Object group kill, the lock, the paths; `tests/windows/wine-run`
# is cargo's runner), then the smoke suite (smoke.py) against the Windows mekara.exe.
#
#   bash tests/windows/run.sh            # both
#   bash tests/windows/run.sh smoke      # the smoke suite only
#
# Needs: `rustup target add x86_64-pc-windows-gnu`, Debian's `gcc-mingw-w64-x86-64` and
# `wine` (`apt-get install gcc-mingw-w64-x86-64 wine wine64`), and the Python MCP SDK in
# target/test-clients/py (`bash tests/python/install.sh`). The Wine prefix is target/wine.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/windows
target=x86_64-pc-windows-gnu
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$PWD/$here/wine-run"
what="${1:-all}"
if [ "$what" = all ] || [ "$what" = unit ]; then
  cargo test --locked --target "$target" --lib
fi
if [ "$what" = all ] || [ "$what" = smoke ]; then
  cargo build --locked --target "$target" --bin mekara
  exe="target/$target/debug/mekara.exe"
  bash_exe="target/$target/standin-bash.exe"
  x86_64-w64-mingw32-gcc -O2 -o "$bash_exe" "$here/standin_bash.c"
  # wine-run puts the ProcessPrng stand-in beside the program it runs.
  "$here/wine-run" "$exe" --version >/dev/null
  target/test-clients/py/bin/python "$here/smoke.py" "$PWD/$here/wine-run" "$PWD/$exe" "$PWD/$bash_exe"
fi

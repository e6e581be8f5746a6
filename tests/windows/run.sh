#!/usr/bin/env bash
# The Windows checks, run from Linux: builds mekara for x86_64-pc-windows-gnu, runs its unit
# tests under Wine (the Job Object group kill, the lock, the paths; `tests/windows/wine-run`
# is cargo's runner), then the smoke suite (smoke.py) against the Windows mekara.exe, then
# the packages made from that mekara.exe (packages.sh: the wheel, the npm packages installed
# for win32-x64 and their mekara.exe run).
#
#   bash tests/windows/run.sh            # all three
#   bash tests/windows/run.sh smoke      # the smoke suite only (also: unit, packages)
#
# Needs: `rustup target add x86_64-pc-windows-gnu`, Debian's `gcc-mingw-w64-x86-64` and
# `wine` (`apt-get install gcc-mingw-w64-x86-64 wine wine64`), the Python MCP SDK in
# target/test-clients/py (`bash tests/python/install.sh`), and for the packages maturin
# (`bash tests/packaging/install.sh`), Node and npm. The Wine prefix is target/wine.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/windows
target=x86_64-pc-windows-gnu
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$PWD/$here/wine-run"
# No debug info in these builds (a panic still names its file and line): the cold build of
# the dependencies for Windows is the biggest part of this script's time, and a quarter
# shorter without it.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
what="${1:-all}"
if [ "$what" = all ] || [ "$what" = unit ]; then
  cargo test --locked --target "$target" --lib
fi
exe="target/$target/debug/mekara.exe"
if [ "$what" = all ] || [ "$what" = smoke ] || [ "$what" = packages ]; then
  cargo build --locked --target "$target" --bin mekara
fi
if [ "$what" = all ] || [ "$what" = smoke ]; then
  bash_exe="target/$target/standin-bash.exe"
  x86_64-w64-mingw32-gcc -O2 -o "$bash_exe" "$here/standin_bash.c"
  # wine-run puts the ProcessPrng stand-in beside the program it runs.
  "$here/wine-run" "$exe" --version >/dev/null
  smoke=(target/test-clients/py/bin/python "$here/smoke.py" "$PWD/$here/wine-run" "$PWD/$exe" "$PWD/$bash_exe")
  # Wine 8 now and then fails to start a program on a busy machine (its `cmd` "can't
  # recognize" a mekara.exe that is there: 2 of 7 runs of the suite while other builds ran):
  # the suite runs once more after a failure, which is printed; a second failure fails.
  if ! "${smoke[@]}"; then
    echo "the Windows smoke suite failed (above); running it once more, since Wine fails to start a program now and then on a busy machine" >&2
    "${smoke[@]}"
  fi
fi
if [ "$what" = all ] || [ "$what" = packages ]; then
  timeout 600 bash "$here/packages.sh" "$exe"
fi

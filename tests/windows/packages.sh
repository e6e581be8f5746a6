#!/usr/bin/env bash
# The Windows packages, checked from Linux (run.sh runs it): packaging/build for
# x86_64-pc-windows-gnu from an already built mekara.exe, the contents and metadata of the
# wheel (`win_amd64`, `mekara.exe` in its scripts) and of the npm packages (`os: ["win32"]`,
# `cpu: ["x64"]`, `bin/mekara.exe`), then both npm tarballs installed as npm installs them
# on Windows (`--os=win32 --cpu=x64 --force`, offline) into an empty folder, the npm launcher's
# choice of binary there (Node told it runs on win32), and that binary run under Wine.
#
#   bash tests/windows/packages.sh EXE
#
# EXE is the debug build run.sh made (`--profile dev`: maturin finds it up to date). What it
# cannot check here: Node for Windows running the launcher, and pip installing the wheel on
# Windows.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=tests/windows
exe="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

bash packaging/build --target x86_64-pc-windows-gnu --binary "$exe" --profile dev "$work/dist" >/dev/null
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
dist="$work/dist"

wheel="$(cd "$dist" && ls mekara_cli-*.whl)"
case "$wheel" in *-win_amd64.whl) ;; *) fail "the wheel is $wheel, not tagged win_amd64" ;; esac
unzip -p "$dist/$wheel" "mekara_cli-$version.dist-info/WHEEL" | grep -qx 'Tag: py3-none-win_amd64' \
  || fail "the wheel's WHEEL does not say Tag: py3-none-win_amd64"
unzip -p "$dist/$wheel" "mekara_cli-$version.data/scripts/mekara.exe" | cmp -s - "$exe" \
  || fail "the wheel's scripts hold no mekara.exe, or another one"
echo "ok: the wheel $wheel holds mekara.exe as its script"

platform="$dist/mekara-dev-mekara-win32-x64-$version.tgz"
[ -f "$platform" ] || fail "no npm package $platform: $(ls "$dist")"
tar -tzf "$platform" | sort | tr '\n' ' ' | grep -qx 'package/LICENSE package/bin/mekara.exe package/package.json ' \
  || fail "the npm package holds $(tar -tzf "$platform" | tr '\n' ' ')"
tar -xzOf "$platform" package/package.json | node -e '
  const m = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const want = { name: "@mekara-dev/mekara-win32-x64", os: ["win32"], cpu: ["x64"], files: ["bin/mekara.exe"] };
  for (const [key, value] of Object.entries(want)) {
    if (JSON.stringify(m[key]) !== JSON.stringify(value)) {
      console.error(`FAILED: the npm package says ${key}: ${JSON.stringify(m[key])}, not ${JSON.stringify(value)}`);
      process.exit(1);
    }
  }
  if ("libc" in m) { console.error("FAILED: the win32 package names a libc"); process.exit(1); }'
echo "ok: the npm package $(basename "$platform") is os win32, cpu x64, and holds bin/mekara.exe"

# npm as on Windows: the main package and this platform's, from the tarballs, nothing from
# the network (the other platforms' optional packages are left out, as npm does on Windows).
# `--os` and `--cpu` choose among optional packages; a tarball named on the command line is
# still checked against this machine, which `--force` lets through.
mkdir "$work/app"
(cd "$work/app" && npm init -y >/dev/null &&
  npm install --os=win32 --cpu=x64 --force --offline --no-audit --no-fund --loglevel=error \
    "$platform" "$dist/mekara-$version.tgz" >/dev/null) \
  || fail "npm install --os=win32 --cpu=x64 of the tarballs failed"
installed="$work/app/node_modules/@mekara-dev/mekara-win32-x64/bin/mekara.exe"
cmp -s "$installed" "$exe" || fail "npm installed no $installed"
# The main package's launcher, told it runs on win32: the binary it would start.
as_win32="$PWD/$here/as-win32.js"
chosen="$(cd "$work/app" && node -r "$as_win32" node_modules/mekara/bin/mekara.js --version)"
[ "$chosen" = "$installed --version" ] || fail "the npm launcher on win32 starts \`$chosen\`, not \`$installed --version\`"
said="$("$here/wine-run" "$installed" --version)"
case "$said" in "mekara $version"*) ;; *) fail "the installed mekara.exe said \`$said\`" ;; esac
echo "ok: npm installed both tarballs for win32-x64; its launcher picks bin/mekara.exe, which runs under Wine: $said"

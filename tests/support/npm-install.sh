#!/usr/bin/env bash
# Installs a pinned npm package set into an ignored folder, for tests and benches.
#
# Usage: bash tests/support/npm-install.sh SOURCE_DIR DEST_DIR PACKAGE
#
# SOURCE_DIR holds the committed package.json (and package-lock.json, when present); they are
# copied to DEST_DIR and installed there with `npm ci` (or `npm install` without a lock file).
# Idempotent: when DEST_DIR's copies match the committed files and PACKAGE is in
# node_modules, nothing is fetched. Needs node and npm.
set -euo pipefail

here="$1"
dest="$2"
package="$3"
files=(package.json)
[[ -f "$here/package-lock.json" ]] && files+=(package-lock.json)

up_to_date() {
  [[ -f "$dest/node_modules/$package/package.json" ]] || return 1
  local f
  for f in "${files[@]}"; do
    cmp -s "$here/$f" "$dest/$f" || return 1
  done
}

if up_to_date; then
  echo "$package: up to date in $dest"
  exit 0
fi

mkdir -p "$dest"
rm -f "$dest/package-lock.json"
for f in "${files[@]}"; do
  cp "$here/$f" "$dest/$f"
done
cd "$dest"
# --loglevel=error hides EBADENGINE notices of dependencies that ask for a newer Node than
# the code paths we use need.
if [[ -f package-lock.json ]]; then
  # `npm ci` refuses a lock that leaves out optional platform packages the registry does not
  # have (Qwen Code's clipboard for darwin and win32 at its pinned version), which
  # `npm install` accepts while keeping to the lock; the lock must come out unchanged.
  if ! npm ci --no-audit --no-fund --loglevel=silent; then
    echo "$package: npm ci refused the lock; installing with npm install, kept to the lock"
    npm install --no-audit --no-fund --loglevel=error
    npm ls "$package" >/dev/null
    cmp -s "$here/package-lock.json" package-lock.json ||
      { echo "$package: npm install changed the lock; update $here/package-lock.json" >&2; exit 1; }
  fi
else
  npm install --no-audit --no-fund --loglevel=error
fi
# npm may rewrite the lock file's formatting; keep the committed bytes so the up-to-date
# check above holds next time.
for f in "${files[@]}"; do
  cp "$here/$f" "$dest/$f"
done
echo "$package: installed $(node -p "require('./node_modules/$package/package.json').version") in $dest"

#!/usr/bin/env bash
# Fails on snapshot files that no test checks any more (a test renamed, moved or removed
# leaves its `.snap` behind, pinning nothing). Give it the list insta wrote during a test run
# with INSTA_SNAPSHOT_REFERENCES_FILE set: every snapshot an assertion read or wrote, one path
# a line. `.ci/run` does this for its full test run; by hand:
#   INSTA_SNAPSHOT_REFERENCES_FILE=$PWD/target/snapshot-references cargo test --features clients
#   bash tests/orphaned-snapshots.sh target/snapshot-references
# Only a run of every test says which snapshot is orphaned; a filtered run lists the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
refs="${1:?usage: tests/orphaned-snapshots.sh REFERENCES_FILE (see the header)}"
if [ ! -s "$refs" ]; then
  echo "error: \`$refs\` lists no snapshot; run the tests with INSTA_SNAPSHOT_REFERENCES_FILE=$refs first" >&2
  exit 2
fi
orphans="$(comm -23 <(find tests -name '*.snap' | sort) <(sed "s|^$PWD/||" "$refs" | sort -u))"
if [ -n "$orphans" ]; then
  printf 'error: snapshot files that no test checks any more; delete them, or bring back the test that checked one:\n%s\n' "$orphans" >&2
  exit 1
fi
echo "every snapshot file is checked by a test ($(sort -u "$refs" | wc -l) files)"

#!/usr/bin/env bash
# How the integration tests check what users see: snapshot calls (`mekara_snapshot!` and
# insta's `assert_*snapshot!`) against positive substring asserts (`assert!(… .contains(…))`,
# the negated `assert!(!….contains(…))` left out: a snapshot cannot say "never"; so is a
# check that is not on text: a number in a range, `(200..300).contains(&status)`, or a
# list holding a value, `lanes.contains(&&value)`). Per file, then the totals.
# Usage: bash tests/count-asserts.sh [FILES...] (default: tests/it/**/*.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  set -- $(find tests/it -name '*.rs' | sort)
fi
perl -0777 -ne '
  # A snapshot call; the macro definition (`::insta::assert_snapshot!($...`) is not one.
  my $snap = () = /\b(?:mekara_snapshot|assert_(?:json_|debug_|yaml_)?snapshot)!\s*\((?!\s*\$)/g;
  # assert!( not followed by `!` nor by a range, up to the end of its statement, holding
  # `.contains(` not followed by `&&`.
  my $sub = () = /\bassert!\(\s*(?!!)(?!\(\s*[\w.]+\s*\.\.=?\s*[\w.]+\s*\)\s*\.contains)[^;]*?\.contains\((?!&&)/g;
  if ($snap || $sub) { printf "%5d %5d  %s\n", $snap, $sub, $ARGV; }
  $s += $snap; $c += $sub;
  END { printf "%5d %5d  total (snapshot calls, substring asserts)\n", $s, $c; }
' "$@"

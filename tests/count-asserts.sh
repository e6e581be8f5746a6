#!/usr/bin/env bash
# How the integration tests check what users see: snapshot calls (`mekara_snapshot!` and
# insta's `assert_*snapshot!`) against positive substring asserts (`assert!(… .contains(…))`,
# the negated `assert!(!….contains(…))` left out: a snapshot cannot say "never"). Per file,
# then the totals. Usage: bash tests/count-asserts.sh [FILES...] (default: tests/it/**/*.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  set -- $(find tests/it -name '*.rs' | sort)
fi
perl -0777 -ne '
  # A snapshot call; the macro definition (`::insta::assert_snapshot!($...`) is not one.
  my $snap = () = /\b(?:mekara_snapshot|assert_(?:json_|debug_|yaml_)?snapshot)!\s*\((?!\s*\$)/g;
  # assert!( not followed by `!`, up to the end of its statement, holding `.contains(`.
  my $sub = () = /\bassert!\(\s*(?!!)[^;]*?\.contains\(/g;
  if ($snap || $sub) { printf "%5d %5d  %s\n", $snap, $sub, $ARGV; }
  $s += $snap; $c += $sub;
  END { printf "%5d %5d  total (snapshot calls, substring asserts)\n", $s, $c; }
' "$@"

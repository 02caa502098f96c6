#!/usr/bin/env bash
# Lines of each GC scheme's logic outside its folder (docs/architecture.md, "Adding a GC scheme").
#
# Counts, per scheme, the non-test lines of crates/gleaner/src that name the scheme or its own
# vocabulary, outside the scheme's folder (gc/<scheme>/, or gc/<scheme>.rs before the move), the
# registry (gc/mod.rs, gc/policy.rs) and the options (options/). Test code is skipped: files named
# tests.rs or *_tests.rs, and everything after a file's first `#[cfg(test)]`. Code lines and
# comment lines are counted apart.
#
# Usage: scripts/scheme-lines.sh [source root, default crates/gleaner/src]
set -euo pipefail
root=${1:-crates/gleaner/src}
declare -A vocab=(
  [scavenger]='scavenger|drop.?cache'
  [terarkdb]='terarkdb'
  [titan]='titan'
  [blobdb]='blobdb|blob.?db'
  [novkv]='novkv|drop.?keys?|drop.?sets?|drop.?blocks?|drop.?files?|drop.?block.?ref'
)
printf '%-10s %6s %9s %s\n' scheme code comments files
for scheme in scavenger terarkdb titan blobdb novkv; do
  find "$root" -name '*.rs' \
    ! -path "$root/gc/$scheme/*" ! -path "$root/gc/$scheme.rs" \
    ! -path "$root/gc/mod.rs" ! -path "$root/gc/policy.rs" ! -path "$root/options/*" \
    ! -name tests.rs ! -name '*_tests.rs' -print0 |
    xargs -0 awk -v re="${vocab[$scheme]}" -v scheme="$scheme" '
      FNR == 1 { intest = 0 }
      /^[[:space:]]*#\[cfg\(test\)\]/ { intest = 1 }
      intest { next }
      tolower($0) ~ re {
        if ($0 ~ /^[[:space:]]*\/\//) comments++; else { code++; files[FILENAME] = 1 }
      }
      END {
        n = 0; for (f in files) n++
        printf "%-10s %6d %9d %d\n", scheme, code, comments, n
      }'
done

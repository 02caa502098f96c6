#!/usr/bin/env bash
# Lines of each GC scheme outside its folder (docs/architecture.md, "Adding a GC scheme").
#
# Two tables of non-test lines of crates/gleaner/src, outside the scheme's folder (gc/<scheme>/,
# or gc/<scheme>.rs before the move), the registry (gc/mod.rs, gc/registry.rs, and gc/policy.rs
# where it was before) and the options (options/), code and comment lines apart:
#   1. lines that name the scheme (or, for Scavenger, its DropCache);
#   2. lines that name a mechanism a scheme brought and the engine now offers every policy as a
#      role or facility: drop keys (NovKV's), handle updates on read (NovKV's aliases), the
#      write-back commit (Titan's), relocation in compaction (BlobDB's).
# Test code is skipped: files named tests.rs or *_tests.rs, and everything after a file's first
# `#[cfg(test)]`.
#
# Usage: scripts/scheme-lines.sh [source root, default crates/gleaner/src]
set -euo pipefail
root=${1:-crates/gleaner/src}

# count LABEL FOLDER REGEX
count() {
  local label=$1 folder=$2 re=$3
  find "$root" -name '*.rs' \
    ! -path "$root/gc/$folder/*" ! -path "$root/gc/$folder.rs" \
    ! -path "$root/gc/mod.rs" ! -path "$root/gc/registry.rs" ! -path "$root/gc/policy.rs" \
    ! -path "$root/options/*" \
    ! -name tests.rs ! -name '*_tests.rs' -print0 |
    xargs -0 awk -v re="$re" -v label="$label" '
      FNR == 1 { intest = 0 }
      /^[[:space:]]*#\[cfg\(test\)\]/ { intest = 1 }
      intest { next }
      tolower($0) ~ re {
        if ($0 ~ /^[[:space:]]*\/\//) comments++; else { code++; files[FILENAME] = 1 }
      }
      END {
        n = 0; for (f in files) n++
        printf "%-34s %6d %9d %6d\n", label, code, comments, n
      }'
}

printf '%-34s %6s %9s %6s\n' 'names the scheme' code comments files
count scavenger scavenger 'scavenger|drop.?cache'
count terarkdb scavenger 'terarkdb'
count titan titan 'titan'
count blobdb blobdb 'blobdb|blob.?db'
count novkv novkv 'novkv'
echo
printf '%-34s %6s %9s %6s\n' 'names a mechanism' code comments files
count 'drop keys (novkv)' novkv 'drop.?keys?|drop.?sets?|drop.?blocks?|drop.?files?'
count 'handle updates on read (novkv)' novkv 'alias|handle.?updat|updates_handles'
count 'write-back commit (titan)' titan 'write.?back|written.?back|retired|retire[sd]?\b'
count 'relocation in compaction (blobdb)' blobdb 'relocat'

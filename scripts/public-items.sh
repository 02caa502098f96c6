#!/usr/bin/env bash
# Public items of the `gleaner` crate as its documentation shows them (docs/architecture.md,
# "A public API a user can read"): item pages (structs, enums, functions, traits, type aliases,
# constants, statics, macros) and module pages that `cargo doc` writes for the crate, redirect
# pages left out. Pass `--features internals` to count what that feature adds.
#
# Usage: scripts/public-items.sh [cargo doc options]
set -euo pipefail
target=${CARGO_TARGET_DIR:-target}
rm -rf "$target/doc/gleaner"
cargo doc -p gleaner --no-deps -j2 "$@" >/dev/null 2>&1
pages() {
  find "$target/doc/gleaner" -name '*.html' | grep -E "$1" | { xargs grep -L 'Redirecting to' || true; } | wc -l
}
items=$(pages '/(struct|enum|fn|trait|type|constant|static|macro|union)\.[^/]+\.html$')
modules=$(pages '/index\.html$')
echo "items $items modules $modules"

#!/usr/bin/env bash
# The tests: the Rust workspace, then the Python bindings' pytest suite. What the README's
# set-up names and .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace -j2
bash scripts/python-tests.sh

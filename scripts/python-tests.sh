#!/usr/bin/env bash
# The Python bindings' pytest suite (crates/gleaner-py, docs/python.md): a virtualenv under
# target/, the bindings built into it with `maturin develop`, then pytest. Needs python3 with
# venv and pip; .ci/run installs them on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/target/py-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" "pytest>=7"
VIRTUAL_ENV="$venv" "$venv/bin/maturin" develop -q --manifest-path crates/gleaner-py/Cargo.toml
"$venv/bin/python" -m pytest -q crates/gleaner-py/tests "$@"

"""Shared fixtures: a fresh directory per test, and small-database options that make flushes,
compactions and GC happen within a test's few thousand writes."""

import pytest

# Small memtables and tables: a few hundred KiB of writes reach every part of the engine.
SMALL = dict(
    memtable_size="64KiB",
    key_table_size="32KiB",
    value_table_size="128KiB",
    min_separated_value_size=64,
)

POLICIES = ["scavenger", "terarkdb", "titan", "blobdb", "novkv", "dumpkv", "diffkv"]


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")

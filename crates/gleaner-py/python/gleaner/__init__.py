"""Gleaner: an embeddable, crash-safe key-value store for large values, with key-value
separation and selectable garbage-collection schemes (docs/python.md).

    import gleaner

    with gleaner.Db("/tmp/db", gc_policy="titan", memtable_size="16MiB") as db:
        db[b"key"] = b"value"
        print(db[b"key"], db.stats()["gc"]["jobs"])

Keys and values are `bytes`; a `str` is accepted and encoded UTF-8. Errors are the classes of
`gleaner.errors`, all subclasses of `gleaner.Error`.
"""

from ._gleaner import (  # noqa: F401  (re-exported)
    Db,
    Iterator,
    Snapshot,
    WriteBatch,
    __version__,
    check,
    option_names,
)
from .errors import (  # noqa: F401  (re-exported)
    ClosedError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    IoError,
    LockedError,
    OpenedReadOnlyError,
    ReadOnlyError,
    SpaceBudgetExceededError,
)

__all__ = [
    "Db",
    "Iterator",
    "Snapshot",
    "WriteBatch",
    "check",
    "option_names",
    "Error",
    "ClosedError",
    "CorruptionError",
    "InvalidArgumentError",
    "IoError",
    "LockedError",
    "OpenedReadOnlyError",
    "ReadOnlyError",
    "SpaceBudgetExceededError",
]

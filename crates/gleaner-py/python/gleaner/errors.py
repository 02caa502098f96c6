"""The exceptions Gleaner raises: one class per kind of the engine's error, all under `Error`.

Each carries the engine's message (``str(e)``). A kind a later engine version adds is raised as
`Error` itself, so ``except gleaner.Error`` catches everything the engine reports.
"""

__all__ = [
    "Error",
    "CorruptionError",
    "IoError",
    "InvalidArgumentError",
    "LockedError",
    "SpaceBudgetExceededError",
    "OpenedReadOnlyError",
    "ReadOnlyError",
    "ClosedError",
]


class Error(Exception):
    """Base of every error the engine reports."""


class CorruptionError(Error):
    """A checksum failed or an on-disk structure does not decode: the message names the file
    and the offset."""


class IoError(Error, OSError):
    """The operating system failed an I/O call. Also an `OSError`, with ``errno`` set when the
    system gave one."""


class InvalidArgumentError(Error, ValueError):
    """Bad input: an unknown option, a value out of range, a key too long, a released
    snapshot. Also a `ValueError`. Nothing was written."""


class LockedError(Error):
    """Another process or handle has the database open for writing."""


class SpaceBudgetExceededError(Error):
    """The database is over its disk budget (``space_budget_high`` / ``max_disk_bytes``) and GC
    found nothing to reclaim."""


class OpenedReadOnlyError(Error):
    """A write, flush or compaction on a database opened with ``read_only=True``."""


class ReadOnlyError(Error):
    """The database refuses writes after an earlier failure (a failed WAL sync, manifest
    write or flush); reopen it to recover."""


class ClosedError(Error):
    """The database was closed: the call, or the iterator or snapshot of it, is refused."""

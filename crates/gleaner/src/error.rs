//! The one public error type of Gleaner.

use std::fmt;
use std::io;
use std::sync::Arc;

/// Result alias used across Gleaner.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure Gleaner reports.
///
/// The enum is non-exhaustive: later versions may add variants, so match with a wildcard arm.
/// `Error` is `Clone` because a background failure is recorded once and then returned to every
/// later writer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What Gleaner was doing, including the file name where there is one.
        context: String,
        /// The underlying error.
        #[source]
        source: Arc<io::Error>,
    },
    /// Stored data failed a checksum or a structural check. Gleaner never returns a value from
    /// a structure that failed verification.
    #[error("corruption in {file} at offset {offset}: {detail}")]
    Corruption {
        /// The file (name within the database directory) that holds the bad data.
        file: String,
        /// Byte offset within that file where the bad data starts.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// The caller passed something Gleaner does not accept; the message names the limit or
    /// option. Nothing was written.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Another handle (in this or another process) holds the database's LOCK file.
    #[error("database at {path} is locked by another process or handle")]
    Locked {
        /// The database directory.
        path: String,
    },
    /// Writes were stopped because bytes on disk reached the space budget (options
    /// `space_budget_high` or `max_disk_bytes`), and GC found nothing to reclaim for
    /// `space_stop_timeout_ms`. Nothing was written. Reads, deletes (which can free space) and
    /// `close` keep working; writes succeed again once usage falls below the limit.
    #[error(
        "space budget exceeded: {disk_bytes} bytes on disk, limit {limit_bytes} bytes \
         (options `space_budget_high` / `max_disk_bytes`); GC found nothing to reclaim for {stopped_ms} ms"
    )]
    SpaceBudgetExceeded {
        /// Bytes on disk when the write was refused.
        disk_bytes: u64,
        /// The limit writes stop at.
        limit_bytes: u64,
        /// How long writes had been stopped with nothing reclaimable.
        stopped_ms: u64,
    },
    /// The handle was opened with [`Db::open_read_only`](crate::Db::open_read_only), which
    /// serves reads only: `operation` (a write, flush, compaction or GC run) was refused and
    /// nothing was written. Open the database with [`Db::open`](crate::Db::open) to change it.
    #[error(
        "database at {path} was opened read-only (Db::open_read_only): {operation} refused; \
         open it read-write to change it"
    )]
    OpenedReadOnly {
        /// The database directory.
        path: String,
        /// What was refused: `write`, `flush`, `compact_range`, `run_gc`, `sync_wal`, or a
        /// policy's file write or task.
        operation: &'static str,
    },
    /// The database was closed; no further operations are accepted on this handle.
    #[error("database is closed")]
    Closed,
    /// An earlier unrecoverable failure (for example a failed fsync, after which the state of
    /// the file on disk is unknown) put the database into read-only mode. Reads still work;
    /// writes are refused until the database is reopened.
    #[error("database refuses writes after an earlier failure (reopen to recover): {0}")]
    ReadOnly(Arc<Error>),
}

impl Error {
    /// Builds an [`Error::Io`] from an `io::Error` and a description of the operation.
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    /// Builds an [`Error::Corruption`].
    pub(crate) fn corruption(
        file: impl Into<String>,
        offset: u64,
        detail: impl fmt::Display,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            detail: detail.to_string(),
        }
    }

    /// Builds an [`Error::InvalidArgument`].
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// True for [`Error::Corruption`] (also when wrapped in [`Error::ReadOnly`]).
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::ReadOnly(inner) => inner.is_corruption(),
            _ => false,
        }
    }

    /// The OS error kind when this is an I/O error.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Error::Io { source, .. } => Some(source.kind()),
            Error::ReadOnly(inner) => inner.io_kind(),
            _ => None,
        }
    }
}

//! Gleaner: an embeddable, crash-safe, ordered key-value store for workloads with large values.
//!
//! Gleaner is an LSM-tree (the *index tree*) of immutable sorted *key tables*, fed by a
//! write-ahead log and a concurrent memtable, compacted in the background by leveled compaction.
//! See `DESIGN.md` and `docs/format.md` in the repository for the architecture and the on-disk
//! formats.

pub mod batch;
pub mod cache;
pub mod checksum;
pub mod coding;
pub mod compaction;
mod db;
pub mod error;
pub mod filename;
/// Entry points of the fuzz targets (`fuzz/`) and of the seed-corpus tests: each feeds arbitrary
/// bytes to one on-disk decoder. Not API; exported only so the fuzz crate can reach them.
#[doc(hidden)]
pub mod fuzzing;
pub mod gc;
pub mod io;
pub mod iter;
pub mod key;
pub mod logging;
pub mod lookup;
pub mod memtable;
pub mod merge;
pub mod options;
pub mod stats;
pub mod table;
pub mod throttle;
pub mod tools;
pub mod value;
pub mod version;
pub mod wal;

pub use batch::WriteBatch;
pub use db::{
    Db, DbIterator, GarbageRecount, GcRunStats, RangeIter, ReadOptions, Snapshot, WriteOptions,
};
pub use error::{Error, Result};
pub use options::{CompactionStyle, Compression, GcPolicyKind, Options, Switch, WalRecoveryMode};
pub use stats::DbStats;

/// The README's examples, compiled and run as doctests so they stay true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

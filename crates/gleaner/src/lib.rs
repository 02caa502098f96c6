//! Gleaner: an embeddable, crash-safe, ordered key-value store for workloads with large values.
//!
//! Gleaner is an LSM-tree (the *index tree*) of immutable sorted *key tables*, fed by a
//! write-ahead log and a concurrent memtable, compacted in the background; values at least
//! `min_separated_value_size` long live apart in *value tables*, whose space a GC policy
//! reclaims. See `docs/architecture.md` and `docs/format.md` in the repository for the
//! architecture and the on-disk formats.
//!
//! # The API
//!
//! - [`Db`]: open ([`Db::open`], [`Db::open_read_only`]), write ([`Db::put`], [`Db::delete`],
//!   [`Db::write`] with a [`WriteBatch`] and [`WriteOptions`]), read ([`Db::get`], iterators
//!   and ranges with [`ReadOptions`], at a [`Snapshot`] if asked), maintain (flush, compaction,
//!   GC, checks) and observe ([`Db::stats`], a [`DbStats`]); close.
//! - [`Options`] ([`options`]): every setting, with its default and limits, and the OPTIONS
//!   file the database keeps.
//! - [`Error`] and [`Result`]: what fails, and how.
//! - [`stats`]: the figures [`Db::stats`] returns.
//! - [`tools`]: `gleaner check` and `gleaner dump` as functions.
//! - [`io`]: the file system Gleaner reads and writes through ([`io::PosixFs`], or a
//!   fault-injecting in-memory one, [`io::FaultFs`], for tests of crash behaviour).
//! - [`gc`]: the roles a GC policy is made of, to run a scheme of one's own
//!   ([`Options::with_custom_policy`]). **Unstable**: it changes as the schemes that use it
//!   arrive.
//! - [`logging`]: a logger for the `log` crate's records.
//!
//! The engine's other modules (formats, tables, versions, compaction, ...) are not API. The
//! `internals` feature makes them public, hidden from these docs and without any stability
//! promise, for the command-line stress tool, the integration tests and the fuzzers.

// Without `internals`, what only the tests and tools reach of the engine's modules is unused
// here; the builds that enable it (the workspace's tests, clippy) still see dead code.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

/// Declares modules that are crate-private, or, with the `internals` feature, public but hidden
/// from the docs (not API: no stability promise).
macro_rules! internal_modules {
    ($($(#[$meta:meta])* $name:ident;)*) => {$(
        $(#[$meta])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        $(#[$meta])*
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

mod db;
pub mod error;
pub mod expiry;
pub mod gc;
pub mod io;
pub mod logging;
pub mod options;
pub mod stats;
pub mod tools;

internal_modules! {
    batch;
    cache;
    checksum;
    coding;
    compaction;
    filename;
    /// Entry points of the fuzz targets (`fuzz/`) and of the seed-corpus tests: each feeds
    /// arbitrary bytes to one on-disk decoder.
    fuzzing;
    iter;
    key;
    lookup;
    memtable;
    merge;
    /// Hotness statistics of key prefixes (the partitioned index tree is being built on them).
    partition;
    range_del;
    table;
    throttle;
    value;
    version;
    wal;
}

pub use batch::WriteBatch;
/// The shared, reference-counted byte buffer [`Entry::value`] is read into (the `bytes` crate's,
/// re-exported so that callers need not depend on the same version).
pub use bytes::Bytes;
pub use db::{
    Db, DbIterator, Entry, GarbageRecount, GcRunStats, RangeIter, ReadOptions, Snapshot,
    WriteOptions,
};
pub use error::{Error, Result};
pub use gc::GcJobStats;
pub use options::{
    CompactionStyle, Compression, GcPolicyKind, Options, Partitioning, SeparateAt, Switch,
    WalRecoveryMode,
};
pub use stats::DbStats;

/// The README's examples, compiled and run as doctests so they stay true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

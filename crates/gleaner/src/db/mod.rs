//! The database: open and recovery, the group-commit write path, reads and iterators, and the
//! background flush and compaction workers.

mod background;
mod conditional;
#[cfg(test)]
mod conditional_tests;
mod counters;
mod expired_tables;
#[cfg(test)]
mod expiry_tests;
mod gc;
mod gc_backoff;
mod handle_updates;
mod inline;
mod iter;
pub(crate) mod migrate;
mod open;
#[cfg(test)]
mod partition_tests;
mod prefetch;
#[cfg(test)]
mod range_del_tests;
mod read;
mod request;
mod retired;
mod sealed_logs;
mod segments;
mod snapshot;
mod space;
mod super_version;
mod value_fetch;
mod verify;
mod write;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::cache::{BlockCache, CachePriority, RowCache, TableCache, ValueCache, ValueTableCache};
use crate::compaction::router::class_name;
use crate::compaction::{LateDrop, PickerConfig, RunningCompaction};
use crate::error::{Error, Result};
use crate::gc::PolicySet;
use crate::io::{FileLock, FileSystem, IoStats};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::version::{FileKind, ObsoleteFileSink, Version, VersionSet};
use crate::wal::LogWriter;

pub use counters::Counters;
pub use gc::GcRunStats;
pub use iter::{DbIterator, RangeIter};
pub use read::Entry;
pub use request::{ReadOptions, WriteOptions};
pub use snapshot::{Snapshot, SnapshotList};
pub use super_version::SuperVersion;
pub use verify::GarbageRecount;

use write::Writer;

/// The WAL being written. Only the group-commit leader touches it.
struct Wal {
    writer: LogWriter,
    /// The file number of the log `writer` appends to (the active memtable's WAL number).
    number: u64,
    /// The active memtable's value segments (`separate_at=write`; empty otherwise).
    segments: segments::MemSegments,
}

/// Mutable engine state guarded by one mutex. Readers never take it (they load the
/// [`SuperVersion`]); writers take it briefly to check for room; background jobs take it to
/// claim work and to install results.
struct DbState {
    mem: Arc<MemTable>,
    /// Immutable memtables, oldest first.
    imm: VecDeque<Arc<MemTable>>,
    /// Memtables at the front of `imm` claimed by flush jobs.
    flush_claimed: usize,
    version: Arc<Version>,
    compact_pointers: Vec<Option<Vec<u8>>>,
    running: Vec<RunningCompaction>,
    /// Id the next compaction gets; ids grow in start order.
    next_compaction_id: u64,
    /// Value tables GC jobs are collecting.
    gc_claimed: BTreeSet<u64>,
    /// Drops into claimed tables committed by compactions while the table was claimed, for the
    /// GC job holding it (see `compaction::garbage`).
    late_drops: BTreeMap<u64, Vec<LateDrop>>,
    /// Value tables a GC job found damaged; not chosen again until the database is reopened.
    gc_failed: BTreeSet<u64>,
    /// Live value tables whose last GC jobs failed otherwise, and when background workers may
    /// pick them again (see `DbInner::claim_victims`).
    gc_backoff: BTreeMap<u64, gc_backoff::GcBackoff>,
    /// Handle updates on read: the value tables aliases in each unflushed memtable name (by WAL
    /// number). No GC job collects them until that memtable is flushed: until then no key
    /// table references them for the alias, so the inheritance records that would lead from a
    /// collected table to its records could be pruned under the alias (`db/handle_updates.rs`).
    alias_pins: BTreeMap<u64, BTreeSet<u64>>,
    /// Consecutive compactions that failed before their manifest edit, and when the next may
    /// start (see `DbInner::note_compaction_error`).
    compaction_failures: u32,
    compaction_retry_at: Option<std::time::Instant>,
    bg_error: Option<Error>,
    shutting_down: bool,
    /// A move of key ranges between partitions under way (`db/migrate.rs`): no compaction
    /// touching the ranges starts, and while it writes no flush starts.
    move_gate: Option<migrate::MoveGate>,
    /// Manual compactions under way: no move starts until they end, so each pass of one sees
    /// the routing the others saw (`DbInner::compact_levels`).
    move_holds: usize,
    /// The active memtable (by WAL number) found holding the only versions that keep a retired
    /// table from release, and since when (`DbInner::seal_for_retired`).
    retired_hold: Option<(u64, std::time::Instant)>,
    /// The key tables with stale handles worth a rewrite in the version last asked about
    /// (`compaction::stale_handles`): the scan reads every table's dependences, so it runs
    /// once per version, not at every claim. `Weak`, so it neither keeps that version's
    /// files nor lets another version take its address.
    stale_scan: Option<(std::sync::Weak<Version>, Vec<u64>)>,
    /// The value segments of the immutable memtables, by WAL number, for their flushes to
    /// seal (`db/segments.rs`).
    sealing: BTreeMap<u64, Arc<Mutex<segments::MemSegments>>>,
}

impl DbState {
    /// `Err` once the database is read-only (after a background failure) or closing.
    fn check_usable(&self) -> Result<()> {
        if let Some(e) = &self.bg_error {
            return Err(Error::ReadOnly(Arc::new(e.clone())));
        }
        if self.shutting_down {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

/// A file waiting to be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ObsoleteFile {
    /// A key or value table whose last reference was dropped.
    Table(FileKind, u64),
    /// A WAL whose memtable was flushed and installed.
    Wal(u64),
}

/// Queue of files to delete: tables whose last reference was dropped and WALs of flushed
/// memtables. Never deleted by the thread that queues them (it may hold a lock, or be the flush
/// thread that writers wait on: deleting a flushed memtable's WAL cost the flush about 1.4 ms on
/// the benchmark VM, as much as a quarter of a small flush). With background threads the purge
/// thread deletes them; with inline work, the next job's turn; foreground calls (`run_gc`,
/// `compact_range`, a writer stopped for space, `close`) purge before they return.
#[derive(Debug, Default)]
struct ObsoleteTables {
    queue: Mutex<Vec<ObsoleteFile>>,
    /// Wakes the purge thread when the queue gets a file, and at shutdown.
    ready: Condvar,
}

impl ObsoleteTables {
    fn push(&self, file: ObsoleteFile) {
        self.queue.lock().push(file);
        self.ready.notify_one();
    }
}

impl ObsoleteFileSink for ObsoleteTables {
    fn file_unreferenced(&self, kind: FileKind, number: u64) {
        self.push(ObsoleteFile::Table(kind, number));
    }
}

/// Everything shared by the handle, the background workers and iterators' owners.
struct DbInner {
    dir: PathBuf,
    opts: Options,
    fs: Arc<dyn FileSystem>,
    io: Arc<IoStats>,
    block_cache: Option<Arc<BlockCache>>,
    /// Separated values of point reads (option `value_cache_share`).
    value_cache: Option<Arc<ValueCache>>,
    /// The newest values of recently read keys (option `row_cache_size`).
    row_cache: Option<RowCache>,
    tables: Arc<TableCache>,
    values: Arc<ValueTableCache>,
    /// Reader threads for scans' value prefetching, started by the first scan that prefetches.
    read_pool: std::sync::OnceLock<Arc<prefetch::ReadPool>>,
    /// Threads for GC jobs' reads in flight (`gc_io_depth`), started by the first job that
    /// reads more than one at a time, stopped at close.
    gc_io: crate::gc::LazyGcIoPool,
    /// The tree's shape options the compaction strategy plans against.
    picker: PickerConfig,
    /// The compaction strategies, one per partition of the index tree (option
    /// `compaction_style`'s alone when it is not partitioned): what to compact next.
    strategy: crate::compaction::trees::TreeStrategies,
    /// The hotness detector of a partitioned tree (`None` unpartitioned): what decides the
    /// routing.
    detector: Option<Arc<crate::partition::detector::HotnessDetector>>,
    /// The GC policy's roles.
    policy: PolicySet,
    /// The policy's own files (`stats()` counts the damaged ones it read).
    policy_files: crate::gc::PolicyFiles,
    /// The policy's background tasks, stopped and waited for at close.
    policy_tasks: crate::gc::PolicyTasks,
    next_file_number: Arc<AtomicU64>,
    /// Where and how values are written as they arrive (option `separate_at=write`, on a
    /// read-write open); `None` separates them at flush.
    segment_sink: Option<segments::SegmentSink>,
    /// Highest sequence number whose write is fully applied to the memtable.
    visible_seq: AtomicU64,
    super_version: ArcSwap<SuperVersion>,
    snapshots: Arc<SnapshotList>,
    /// The database's time, from the options' clock: what expiry is judged by.
    time: crate::expiry::DbTime,
    writers: Mutex<VecDeque<Arc<Writer>>>,
    writers_cv: Condvar,
    wal: Mutex<Option<Wal>>,
    /// The highest WAL number whose directory entry is known durable. A memtable switch
    /// creates the next log without syncing the directory; a sync of that log, or a flush
    /// whose edit names it as the oldest log needed, syncs it first.
    wal_dir_durable: AtomicU64,
    /// Logs of sealed memtables not synced yet: synced before the active one is. Lock order:
    /// `wal` and `state` before this; nothing is locked under it but a sealed memtable's value
    /// segments.
    sealed_logs: Mutex<sealed_logs::SealedLogs>,
    /// The manifest lock: held across a version edit's manifest write. Lock order: `versions`
    /// before `state`; `wal` before `state`.
    versions: Mutex<VersionSet>,
    state: Mutex<DbState>,
    /// Wakes background workers (new work, shutdown).
    bg_cv: Condvar,
    /// Wakes waiters for background progress (stalled writers, `flush`, `compact_range`).
    progress_cv: Condvar,
    shutting_down: AtomicBool,
    /// Calls running on callers' threads that may write files or the manifest (see
    /// [`DbInner::begin_foreground`]); `close` waits until none is left.
    foreground: AtomicUsize,
    obsolete: Arc<ObsoleteTables>,
    counters: Counters,
    /// The most recent GC failure, for `stats()`.
    last_gc_error: Mutex<Option<String>>,
    /// The most recent compaction failure, for `stats()`.
    last_compaction_error: Mutex<Option<String>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Taken by whoever runs inline background work (option `inline_background_work`), so
    /// callers take turns. Lock order: `wal` (and leading the write queue) before this; nothing
    /// done under it writes through the write path (see `db/inline.rs`).
    inline_turn: Mutex<()>,
    lock: Mutex<Option<Box<dyn FileLock>>>,
    /// Space-aware throttling, when on and a budget is set.
    space: Option<space::SpaceControl>,
    /// GC pacing while reads dominate (`None` when `gc_read_yield_rate` is 0 or work is
    /// inline).
    gc_pacer: Option<gc::GcPacer>,
    /// Bytes of every file in the directory (what `stats().space.disk_bytes` and the space
    /// throttle report).
    disk: Arc<crate::io::DiskUsage>,
    /// Opened with [`Db::open_read_only`]: no WAL, no background work, and every operation
    /// that would write is refused (see [`DbInner::check_writable`]).
    read_only: bool,
    /// Handle updates on read waiting to be written (policies that update handles on read, on
    /// a read-write handle).
    handle_updates: Option<handle_updates::HandleUpdates>,
}

/// An open database. `Db` is `Send + Sync`: share it across threads behind an `Arc`. Dropping
/// it closes it (see [`Db::close`]).
pub struct Db {
    inner: Arc<DbInner>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

impl Db {
    /// Opens (or, with `create_if_missing`, creates) the database in directory `path`.
    ///
    /// Recovery replays the write-ahead logs: every write acknowledged with `sync` is there, and
    /// the recovered state is the state after some prefix of the acknowledged writes.
    ///
    /// Errors: [`Error::InvalidArgument`] for invalid options (naming the option), a path that
    /// is a file, a missing database without `create_if_missing`, an existing one with
    /// `error_if_exists`; [`Error::Locked`] when another handle has it open;
    /// [`Error::Corruption`] for damaged metadata or logs; [`Error::Io`].
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        open::open(path.as_ref(), opts).map(|inner| Db { inner })
    }

    /// Opens the existing database in directory `path` for reading only (like RocksDB's
    /// `OpenForReadOnly`). Recovery is the same as [`Db::open`]'s, including the merge of the
    /// saved OPTIONS file, but nothing on disk changes: the WALs are replayed into memtables
    /// kept in memory (a WAL larger than `memtable_size` becomes several immutable memtables,
    /// so memory is bounded by the WALs' size on disk), and no table, WAL, manifest or OPTIONS
    /// file is written, no file is created, renamed or deleted (not even files a read-write
    /// open would remove as orphans), and no background work starts (no worker thread, and no
    /// inline work under `inline_background_work`). Reads, snapshots, iterators,
    /// [`Db::range`], [`Db::stats`] and [`Db::recount_garbage`] see exactly the recovered
    /// state, including writes the WALs hold that were never flushed. [`Db::write`],
    /// [`Db::put`], [`Db::delete`], [`Db::flush`], [`Db::compact_range`], [`Db::run_gc`] and
    /// [`Db::sync_wal`] fail with [`Error::OpenedReadOnly`]; [`Db::close`] writes, syncs and
    /// deletes nothing and releases the lock.
    ///
    /// Locking: a read-only handle holds a *shared* lock on the LOCK file, so any number of
    /// read-only handles (in this process or others) coexist, a [`Db::open`] fails with
    /// [`Error::Locked`] while one exists, and this open fails with [`Error::Locked`] while a
    /// read-write handle exists (its flushes, compactions and GC delete files a reader may
    /// still need). The LOCK file is opened for reading and never created: when it is absent
    /// (a copy of the files without it, say), the open goes on without a lock, and then
    /// nothing keeps a later read-write open from changing the directory underneath; reads of
    /// a file it deleted then fail with an I/O error (file numbers are never reused, so they
    /// never return another file's data).
    ///
    /// `create_if_missing` is ignored (nothing is ever created); `error_if_exists` fails the
    /// open as it does for [`Db::open`].
    ///
    /// Errors: [`Error::InvalidArgument`] for invalid options (naming the option), a path that
    /// is a file, a missing directory or one without a database (no `CURRENT` file), or
    /// `error_if_exists`; [`Error::Locked`] while a read-write handle has the database open;
    /// [`Error::Corruption`] for damaged metadata or logs (a torn WAL tail is not damage: it
    /// is skipped, and left as it is on disk); [`Error::Io`].
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        open::open_read_only(path.as_ref(), opts).map(|inner| Db { inner })
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The effective options (after merging the saved OPTIONS file).
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Sets `key` to `value` (not synced; see [`WriteOptions::sync`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(batch, &WriteOptions::default())
    }

    /// Sets `key` to `value` until `expiry_ms` (milliseconds since the Unix epoch, by the
    /// database's clock, [`Options::with_clock`]), not synced: from then on reads find the key
    /// absent, and compaction drops the version (module [`crate::expiry`]). An expiry already
    /// past writes a version that reads as a deletion.
    ///
    /// Errors: [`Error::InvalidArgument`] when `expiry_ms` is later than
    /// [`MAX_EXPIRY_MS`](crate::expiry::MAX_EXPIRY_MS), and those of [`Db::put`]; nothing is
    /// written.
    pub fn put_with_expiry(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry_ms: u64,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_with_expiry(key, value, expiry_ms);
        self.write(batch, &WriteOptions::default())
    }

    /// Sets `key` to `value` for `ttl_ms` milliseconds from now (the database's clock): a
    /// [`Db::put_with_expiry`] at now + `ttl_ms`. A TTL of 0 writes a version that reads as a
    /// deletion.
    ///
    /// Errors: [`Error::InvalidArgument`] when now + `ttl_ms` is later than
    /// [`MAX_EXPIRY_MS`](crate::expiry::MAX_EXPIRY_MS), and those of [`Db::put`].
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl_ms: u64,
    ) -> Result<()> {
        let expiry = crate::expiry::expiry_after(self.inner.time.now(), ttl_ms)?;
        self.put_with_expiry(key, value, expiry)
    }

    /// The database's time, in milliseconds since the Unix epoch: its clock's
    /// ([`Options::with_clock`]), never earlier than a time it showed before or that the
    /// database recorded acting on expired data. What expiry is judged by; add a TTL to it
    /// ([`expiry::expiry_after`](crate::expiry::expiry_after)) for a batch's expiries.
    pub fn time_ms(&self) -> u64 {
        self.inner.time.now()
    }

    /// Whether a write made now might wait: L0 at `l0_slowdown_trigger`, the immutable
    /// memtables at `max_immutable_memtables` (a full memtable could not be switched), or a
    /// space budget set (space-aware throttling may delay or stop writes). A hint, read without
    /// taking a lock, that may change at once: a server can run writes that will not wait on a
    /// thread that must not block, and hand the others to one that may.
    pub fn write_pressure(&self) -> bool {
        if self.inner.space.is_some() {
            return true;
        }
        let sv = self.inner.super_version.load();
        sv.version.l0_backlog() >= self.inner.opts.l0_slowdown_trigger() as usize
            || sv.imm.len() >= self.inner.opts.max_immutable_memtables() as usize
    }

    /// Removes `key` (not synced).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch, &WriteOptions::default())
    }

    /// Removes every key in `[start, end)` (bytewise order; `end` excluded), not synced: one
    /// range tombstone, whatever the number of keys, which reads and iterators honour at once
    /// and compactions apply to the data below it (see [`WriteBatch::delete_range`]; snapshots
    /// taken before it still see the keys). The separated values it deletes become garbage,
    /// counted exactly when a compaction drops their handles (docs/gc.md).
    ///
    /// Errors: [`Error::InvalidArgument`] when `start` does not sort before `end` or a key is
    /// longer than [`MAX_KEY_SIZE`](crate::options::MAX_KEY_SIZE) (nothing is written); the
    /// write errors of [`Db::write`].
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
        self.write(batch, &WriteOptions::default())
    }

    /// Applies `batch` atomically. Concurrent writes are grouped into one WAL write (group
    /// commit).
    ///
    /// Errors: [`Error::InvalidArgument`] when a key is longer than
    /// [`MAX_KEY_SIZE`](crate::options::MAX_KEY_SIZE), a value longer than `max_value_size`, or
    /// the batch larger than `max_batch_size` (nothing is written);
    /// [`Error::ReadOnly`] after an earlier unrecoverable failure; [`Error::OpenedReadOnly`] on
    /// a handle from [`Db::open_read_only`]; [`Error::Closed`];
    /// [`Error::Io`] when the WAL write fails (the database then becomes read-only);
    /// [`Error::SpaceBudgetExceeded`] when space-aware throttling stopped writes at the space
    /// budget and GC found nothing to reclaim for `space_stop_timeout_ms` (nothing is written).
    /// With a budget, a write may also be delayed (usage between the low and high limits) or
    /// wait (at the high limit) before it is applied; a batch of deletions only is never held.
    pub fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("write")?;
        self.inner.validate_batch(&batch)?;
        if batch.is_empty() {
            return Ok(());
        }
        // Held until the write is logged: until then its bytes count as on disk.
        let _admitted = self.inner.admit_write(&batch)?;
        self.inner.write_impl(Some(batch), opts.sync)
    }

    /// Applies `batch` atomically if none of `keys` changed since the snapshot `since` was
    /// taken, and returns `Ok(true)`; otherwise writes nothing and returns `Ok(false)`. An empty
    /// batch writes nothing either way: the call then only tells whether the keys are
    /// unchanged. What a Redis `WATCH` … `EXEC` does: read at a snapshot, then write only if
    /// what was read still holds, retrying otherwise (optimistic concurrency).
    ///
    /// The check and the write are one step of the write queue's leader, so no other write can
    /// land between them; the batch is a group commit of its own (not grouped with concurrent
    /// writes) and synced as `opts` says. A key *changed* when, since the snapshot:
    ///
    /// - a put (of any value, the same bytes included) or a delete of it was written;
    /// - a range delete ([`Db::delete_range`]) covering it was written while it was present at
    ///   the snapshot (a value not expired at [`Snapshot::time_ms`]); one over a key absent or
    ///   already expired then is no change by itself, but a put or delete between the snapshot
    ///   and it is;
    /// - or, with nothing written, it was present at the snapshot and has expired by now (the
    ///   database's time, [`Db::time_ms`]). A key expired already at the snapshot and still
    ///   absent did not change.
    ///
    /// The engine's own rewrites of a key's value handle (GC write-backs, handle updates on
    /// read) are not changes. The check reads each key's index entries (never a separated
    /// value): one lookup per unchanged key, two for a key written since, plus one per range
    /// delete over a key absent at the snapshot (looked below, up to 64 deep; deeper counts as
    /// changed). A blind spot: a key absent at the snapshot, then put and range-deleted, looks
    /// unchanged if a compaction dropped the put under the range delete in between; its state
    /// is then the snapshot's (absent) again.
    ///
    /// The batch is validated first, goes through the same space throttling as [`Db::write`]
    /// (an empty batch does not), and counts toward `stats().operations.conditional_writes`
    /// (`conditional_write_conflicts` when a key changed).
    ///
    /// Errors: those of [`Db::write`]; [`Error::InvalidArgument`] also when `since` is a
    /// snapshot of another database or a key is longer than
    /// [`MAX_KEY_SIZE`](crate::options::MAX_KEY_SIZE). Nothing is written on an error.
    pub fn write_if_unchanged<K: AsRef<[u8]>>(
        &self,
        batch: WriteBatch,
        opts: &WriteOptions,
        since: &Snapshot,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<bool> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("write_if_unchanged")?;
        self.inner.validate_batch(&batch)?;
        if !since.is_of(&self.inner.snapshots) {
            return Err(Error::invalid(
                "write_if_unchanged: the snapshot was taken of another database",
            ));
        }
        let keys = keys
            .into_iter()
            .map(|k| {
                let k = k.as_ref();
                if k.len() > crate::options::MAX_KEY_SIZE {
                    return Err(Error::invalid(format!(
                        "write_if_unchanged: key of {} bytes exceeds the key size limit of {} \
                         bytes",
                        k.len(),
                        crate::options::MAX_KEY_SIZE
                    )));
                }
                Ok(k.to_vec())
            })
            .collect::<Result<Vec<_>>>()?;
        let _admitted = if batch.is_empty() {
            None
        } else {
            self.inner.admit_write(&batch)?
        };
        let condition = conditional::Unchanged {
            seq: since.sequence(),
            time_ms: since.time_ms(),
            keys,
        };
        self.inner.write_if_unchanged(batch, opts.sync, condition)
    }

    /// The value of `key` in the latest state, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(key, &ReadOptions::default())
    }

    /// The value of `key` as of `opts.snapshot` (or the latest state).
    pub fn get_with(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>> {
        self.inner.check_open()?;
        self.inner.get(key.as_ref(), opts)
    }

    /// The value of `key` and when it expires (`expiry_ms`, milliseconds since the Unix epoch
    /// by the database's clock; `None`: never), as of `opts.snapshot` or the latest state:
    /// what [`Db::get_with`] reads, with the version's expiry. `None` when the key is absent,
    /// deleted or expired at the read's time (the snapshot's, or now).
    ///
    /// Errors: [`Error::InvalidArgument`] for a key longer than
    /// [`MAX_KEY_SIZE`](crate::options::MAX_KEY_SIZE); [`Error::Closed`]; [`Error::Io`] and
    /// [`Error::Corruption`] from the files read.
    pub fn get_entry(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Entry>> {
        self.inner.check_open()?;
        self.inner.get_entry(key.as_ref(), opts)
    }

    /// Whether `key` is present as of `opts.snapshot` (or the latest state) and when it
    /// expires, without reading its value: `None` when it is absent (as for [`Db::get_with`]:
    /// deleted, or expired at the read's time), `Some(None)` when it is present and does not
    /// expire, `Some(Some(ms))` when it expires at `ms` (milliseconds since the Unix epoch, by
    /// the database's clock). Reads the key's index entry only: a separated value's expiry is
    /// in its handle, an inline value's beside it, so no value table is read however large
    /// the value.
    ///
    /// Errors: those of [`Db::get_entry`].
    pub fn get_expiry(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Option<u64>>> {
        self.inner.check_open()?;
        self.inner.get_expiry(key.as_ref(), opts)
    }

    /// Takes a snapshot of the current state; reads with it see exactly the writes acknowledged
    /// before this call.
    pub fn snapshot(&self) -> Snapshot {
        self.inner
            .snapshots
            .acquire(&self.inner.visible_seq, &self.inner.time)
    }

    /// A cursor over the database as of `opts.snapshot` (or now), within `opts`'s bounds. It
    /// sees one consistent state however long it lives, and keeps the files it reads alive.
    pub fn iter(&self, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        self.inner.check_open()?;
        self.inner.new_iterator(opts)
    }

    /// Key-value pairs in `range`, in key order (or reverse with `.rev()`), as of
    /// `opts.snapshot` or now. The range narrows `opts`' bounds.
    pub fn range<'k>(
        &self,
        range: impl std::ops::RangeBounds<&'k [u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        self.inner.check_open()?;
        RangeIter::new(&self.inner, range, opts)
    }

    /// Writes the memtable (and any waiting immutable ones) to L0 key tables and waits until
    /// they are installed. Fails with [`Error::OpenedReadOnly`] on a read-only handle.
    pub fn flush(&self) -> Result<()> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("flush")?;
        self.inner.flush_and_wait()
    }

    /// Compacts every level's key tables overlapping `[begin, end]` (user keys, inclusive;
    /// `None` unbounded) down the tree, so overwritten versions and tombstones no snapshot
    /// needs are dropped. Flushes the memtable first.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a compaction fails: before its manifest edit nothing changed and the
    /// database stays writable (the eighth such failure in a row makes it read-only, as a
    /// failed manifest write does at once); the errors of [`Db::flush`], including
    /// [`Error::OpenedReadOnly`] on a read-only handle.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("compact_range")?;
        self.inner.compact_range(begin, end)
    }

    /// Moves the keys of a partitioned index tree so that exactly those under `hot_prefixes`
    /// are in the hot partition, on the caller's thread (tests and tools; not API: the hotness
    /// detection decides this in use).
    ///
    /// Errors: [`Error::InvalidArgument`] when the tree is not partitioned; those of
    /// [`Db::compact_range`].
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn move_hot_prefixes(&self, hot_prefixes: &[&[u8]]) -> Result<migrate::MoveStats> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("move_hot_prefixes")?;
        self.inner
            .move_to_routing(crate::version::routing::Routing::of_prefixes(
                hot_prefixes.iter().copied(),
            ))
    }

    /// Runs one tick of the hotness detector on the caller's thread, moving keys when the hot
    /// prefixes it finds route them otherwise (tests drive the clock so; in use a background
    /// thread ticks every `dpkv_decay_interval`, and with inline background work only this
    /// does, so a run replays).
    ///
    /// Errors: those of [`Db::compact_range`].
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn hotness_tick(&self) -> Result<migrate::MoveStats> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("hotness_tick")?;
        self.inner.hotness_tick()
    }

    /// Runs garbage collection on the caller's thread until the policy finds no value table
    /// worth collecting (background GC threads keep running too). Fails with
    /// [`Error::OpenedReadOnly`] on a read-only handle.
    pub fn run_gc(&self) -> Result<GcRunStats> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("run_gc")?;
        self.inner.run_gc_to_quiescence()
    }

    /// Makes every write acknowledged so far durable: syncs the WAL (earlier WALs were synced
    /// when their memtables were sealed), as a write with [`WriteOptions::sync`] would, but
    /// without writing anything. A server that acknowledges a pipeline of unsynced writes calls
    /// it once before replying, instead of syncing every write.
    ///
    /// Errors: [`Error::ReadOnly`] after an earlier unrecoverable failure (the WAL is not synced
    /// again: after a failed sync the file's state is unknown, and a later sync that succeeds
    /// proves nothing); [`Error::Io`] when the sync fails (the database then refuses writes
    /// until it is reopened); [`Error::OpenedReadOnly`] on a handle from
    /// [`Db::open_read_only`]; [`Error::Closed`].
    pub fn sync_wal(&self) -> Result<()> {
        let _call = self.inner.begin_foreground()?;
        self.inner.check_writable("sync_wal")?;
        self.inner.state.lock().check_usable()?;
        self.inner.sync_wal()
    }

    /// Recounts value-table garbage from scratch — every handle in every key table, placed in
    /// its value table — and compares it with the incrementally maintained counts. A debugging
    /// and verification aid (it reads every key table); an empty `mismatches` means they agree.
    pub fn recount_garbage(&self) -> Result<GarbageRecount> {
        self.inner.check_open()?;
        self.inner.recount_garbage()
    }

    /// A snapshot of the engine's figures (serializable; see [`crate::stats::DbStats`]).
    pub fn stats(&self) -> crate::stats::DbStats {
        self.inner.stats()
    }

    /// Stops background work (waiting for running jobs), makes every acknowledged write
    /// durable (syncs the WAL), deletes unreferenced files and releases the lock. Later calls
    /// on this handle fail with [`Error::Closed`]; iterators and snapshots keep working on the
    /// state they hold. Closing twice is harmless.
    ///
    /// Calls running on other threads at the time (`write`, `flush`, `compact_range`,
    /// `run_gc`) are waited for too: a job that has not yet written its manifest edit abandons
    /// its outputs and its call fails with [`Error::Closed`]; one whose edit is being written
    /// finishes it. Either way no file of the database is written or deleted by this handle
    /// once `close` returns, so the database can be reopened at once. The wait lasts until each
    /// job reaches its next cancellation check (between the entries a compaction or GC job
    /// copies, and before its edit).
    pub fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Errors at drop cannot be reported; call `close` to see them.
        let _ = self.inner.close();
    }
}

/// A call running on a caller's thread that may write files or the manifest; `close` waits
/// until every one has ended (see [`DbInner::begin_foreground`]).
struct ForegroundCall<'a> {
    inner: &'a DbInner,
}

impl Drop for ForegroundCall<'_> {
    fn drop(&mut self) {
        if self.inner.foreground.fetch_sub(1, Ordering::SeqCst) == 1
            && self.inner.shutting_down.load(Ordering::SeqCst)
        {
            // `close` waits under the state lock: notify under it, so the wake-up is not lost.
            let _st = self.inner.state.lock();
            self.inner.progress_cv.notify_all();
        }
    }
}

/// How long an idle background worker sleeps before re-checking for work on its own (a backstop;
/// workers are normally woken by the condition variable).
const IDLE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Longest single wait of `close` for calls on other threads before it looks again (a
/// backstop: the last call to end wakes it).
const FOREGROUND_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

impl DbInner {
    fn check_open(&self) -> Result<()> {
        if self.shutting_down.load(Ordering::SeqCst) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Registers a call that runs on the caller's thread and may write files or the manifest:
    /// a write (which may run inline work or, stopped at the space budget, a compaction),
    /// `flush`, `compact_range` or `run_gc`. Fails with [`Error::Closed`] once `close` has
    /// begun; otherwise `close` waits until the returned guard is dropped, so no job of a
    /// closed handle commits into the manifest or deletes a file after the lock is released.
    fn begin_foreground(&self) -> Result<ForegroundCall<'_>> {
        // Counted before the flag is read, and `close` sets the flag before it reads the count
        // (both sequentially consistent): either the call sees the flag, or `close` sees the
        // call.
        self.foreground.fetch_add(1, Ordering::SeqCst);
        let call = ForegroundCall { inner: self };
        self.check_open()?;
        Ok(call)
    }

    /// Waits until every call registered by [`DbInner::begin_foreground`] has ended. Each sees
    /// the shutdown at its next check and gives up before its manifest edit (or finishes an
    /// edit already being written), so the wait is as long as the longest stretch between two
    /// checks of a job. Leaving earlier is not an option: the job could still write the
    /// manifest or delete files after the lock is released and another handle has opened the
    /// database.
    fn wait_for_foreground_calls(&self) {
        let mut st = self.state.lock();
        while self.foreground.load(Ordering::SeqCst) > 0 {
            self.progress_cv.wait_for(&mut st, FOREGROUND_WAIT);
        }
    }

    /// `Err(OpenedReadOnly)` naming `operation` on a handle from [`Db::open_read_only`].
    fn check_writable(&self, operation: &'static str) -> Result<()> {
        if self.read_only {
            Err(Error::OpenedReadOnly {
                path: self.dir.display().to_string(),
                operation,
            })
        } else {
            Ok(())
        }
    }

    /// Records the first unrecoverable failure; from now on writes fail with
    /// [`Error::ReadOnly`].
    fn set_bg_error(&self, e: Error) {
        let mut st = self.state.lock();
        if st.bg_error.is_none() {
            log::error!(
                "{}: the database refuses writes until it is reopened: {e}",
                self.dir.display()
            );
            st.bg_error = Some(e);
        }
        drop(st);
        self.bg_cv.notify_all();
        self.progress_cv.notify_all();
    }

    /// Publishes a new super version built from `st`. Called with the state lock held, so
    /// installs are ordered.
    fn install_super_version(&self, st: &DbState) {
        self.super_version.store(Arc::new(SuperVersion {
            mem: Arc::clone(&st.mem),
            imm: st.imm.iter().rev().cloned().collect(),
            version: Arc::clone(&st.version),
        }));
    }

    fn close(&self) -> Result<()> {
        if self.shutting_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        {
            let mut st = self.state.lock();
            st.shutting_down = true;
        }
        self.bg_cv.notify_all();
        self.progress_cv.notify_all();
        {
            // Under the queue's lock, so the purge thread cannot miss it between its check of
            // the flag and its wait.
            let _queue = self.obsolete.queue.lock();
            self.obsolete.ready.notify_all();
        }
        let threads: Vec<_> = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            // A worker that panicked has nothing left to clean up.
            let _ = t.join();
        }
        // Manual compactions, GC runs, flushes and writes on other threads (which may be
        // running inline work or surfacing hidden garbage) end too before the lock is released.
        self.wait_for_foreground_calls();
        // The policy's tasks end before the WAL and the lock go: they may write its files.
        self.policy_tasks.stop_and_join();
        // No job is left to use GC's read threads: they end now.
        self.gc_io.shutdown();
        // The hotness statistics whole, so the next open starts from them exactly (advisory: a
        // failure is logged, never the close's).
        if let Some(d) = &self.detector {
            d.checkpoint();
        }
        // Wait out an in-flight group commit (its leader holds the WAL), then sync and retire
        // the WAL so every acknowledged write is durable.
        let mut result = Ok(());
        if let Some(mut wal) = self.wal.lock().take() {
            let healthy = self.state.lock().bg_error.is_none();
            if healthy {
                // Sync (the sealed memtables' logs first, and the values its handles name),
                // then record in the log that everything before is durable: damage found there
                // later is then corruption, not a torn tail.
                result = self
                    .sync_logs(&mut wal)
                    .and_then(|_| crate::wal::write_sync_marker(&mut wal.writer))
                    .and_then(|_| wal.writer.sync());
            }
        }
        if let Some(sink) = &self.segment_sink {
            sink.discard_spares();
        }
        self.purge_obsolete_files();
        self.lock.lock().take();
        result
    }
}

impl DbInner {
    /// `stats().partitions`: all zero for an unpartitioned tree.
    fn partition_stats(&self, version: &Version) -> crate::stats::PartitionStats {
        use crate::version::routing::{COLD, HOT};
        if !version.is_partitioned() {
            return crate::stats::PartitionStats::default();
        }
        let tables = |p: usize| {
            version.partition_levels(p).fold((0, 0), |(n, b), l| {
                (n + version.table_count(l), b + version.level_bytes(l))
            })
        };
        let ((cold_tables, cold_bytes), (hot_tables, hot_bytes)) = (tables(COLD), tables(HOT));
        let (c, g) = (&self.counters, Counters::get);
        let mut stats = crate::stats::PartitionStats {
            partitioned: true,
            hot_ranges: version.routing().ranges().len(),
            cold_tables,
            cold_bytes,
            hot_tables,
            hot_bytes,
            moves: g(&c.partition_moves),
            entries_moved_to_hot: g(&c.entries_moved_to_hot),
            entries_moved_to_cold: g(&c.entries_moved_to_cold),
            move_bytes: g(&c.partition_move_bytes),
            move_micros: g(&c.partition_move_micros),
            move_wait_micros: g(&c.partition_move_wait_micros),
            hot_gets: g(&c.hot_gets),
            cold_gets: g(&c.cold_gets),
            ..Default::default()
        };
        if let Some(d) = &self.detector {
            d.report(&mut stats);
        }
        stats
    }

    fn stats(&self) -> crate::stats::DbStats {
        use crate::stats::*;
        let c = &self.counters;
        let g = Counters::get;
        let backoff;
        let (
            version,
            mem_bytes,
            mem_entries,
            mem_range_tombstones,
            imm,
            imm_bytes,
            running,
            bg_error,
            claimed,
            late_drops,
            usage,
        ) = {
            let st = self.state.lock();
            backoff = gc_backoff::GcBackoffSummary::of(
                &st.gc_backoff,
                |n| st.version.values().live(n).is_some(),
                std::time::Instant::now(),
            );
            (
                Arc::clone(&st.version),
                st.mem.approximate_bytes(),
                st.mem.len() + st.imm.iter().map(|m| m.len()).sum::<u64>(),
                std::iter::once(&st.mem)
                    .chain(&st.imm)
                    .map(|m| m.range_tombstone_count())
                    .sum::<u64>(),
                st.imm.len(),
                st.imm.iter().map(|m| m.approximate_bytes()).sum(),
                st.running.len(),
                st.bg_error.as_ref().map(|e| e.to_string()),
                st.gc_claimed.len(),
                st.late_drops.values().map(Vec::len).sum(),
                // The same figures the space throttle sees.
                self.space_usage(&st),
            )
        };
        let range_tombstones = mem_range_tombstones
            + version
                .all_files()
                .map(|(_, f)| f.range_deletions)
                .sum::<u64>();
        let vs = version.values();
        let per_table: Vec<ValueTableStats> = vs
            .tables()
            .map(|v| {
                let g = vs.garbage(v.number);
                ValueTableStats {
                    number: v.number,
                    file_bytes: v.file_size,
                    records: v.records,
                    record_bytes: v.record_bytes,
                    garbage_records: g.records,
                    garbage_bytes: g.bytes,
                    class: v.class,
                    drop_keys: vs.drop_blocks(v.number).iter().map(|b| b.block.keys).sum(),
                }
            })
            .collect();
        let values = ValueStats {
            tables: per_table.len(),
            file_bytes: per_table.iter().map(|t| t.file_bytes).sum(),
            record_bytes: per_table.iter().map(|t| t.record_bytes).sum(),
            garbage_bytes: per_table.iter().map(|t| t.garbage_bytes).sum(),
            records: per_table.iter().map(|t| t.records).sum(),
            garbage_records: per_table.iter().map(|t| t.garbage_records).sum(),
            inheritance_records: vs.inheritance().len(),
            handles_rewritten: g(&c.handles_rewritten),
            tables_freed_without_gc: g(&c.value_tables_freed),
            unresolved_drops: g(&c.unresolved_drops),
            drops_reclaimed_early: g(&c.drops_reclaimed_early),
            drops_into_retired: g(&c.drops_into_retired),
            retired_tables: vs.retired().len(),
            retired_bytes: vs.retired().values().map(|r| r.file.file_size).sum(),
            tables_released: g(&c.value_tables_released),
            memtables_sealed_for_release: g(&c.memtables_sealed_for_release),
            tables_expired: g(&c.value_tables_expired),
            drop_keys_written: g(&c.drop_keys_written),
            drop_key_bytes_written: g(&c.drop_key_bytes_written),
            drop_files: vs.drop_files().len(),
            per_table,
        };
        let scores = self.strategy.scores(&version, &self.picker);
        let levels: Vec<LevelStats> = (0..version.num_levels())
            .map(|l| LevelStats {
                level: l,
                files: version.table_count(l),
                runs: version.runs(l).len(),
                bytes: version.level_bytes(l),
                entries: version.level_files(l).map(|f| f.num_entries).sum(),
                score: scores.get(l).copied().unwrap_or(0.0),
            })
            .collect();
        let key_bytes: u64 = levels.iter().map(|l| l.bytes).sum();
        let space = SpaceStats {
            disk_bytes: usage.disk_bytes,
            live_data_estimate: usage.live_bytes,
            space_amplification: if usage.live_bytes == 0 {
                1.0
            } else {
                usage.disk_bytes as f64 / usage.live_bytes as f64
            },
        };
        let gc = GcStats {
            policy: self.policy.name.to_string(),
            policy_files_damaged: self.policy_files.damaged_count(),
            policy_stats: self.policy.hooks.stats(),
            jobs: g(&c.gc_jobs),
            errors: g(&c.gc_errors),
            last_error: self.last_gc_error.lock().clone(),
            victims: g(&c.gc_victims),
            records_read: g(&c.gc_records_read),
            records_dropped: g(&c.gc_records_dropped),
            records_expired: g(&c.gc_records_expired),
            records_written: g(&c.gc_records_written),
            lazy_read: self.policy.read_mode == crate::gc::GcReadMode::Lazy,
            index_decoupled: self.opts.index_decoupled_enabled(),
            value_bytes_read: self.io.get(crate::io::IoClass::GcRead).read_bytes,
            index_bytes_read: self.io.get(crate::io::IoClass::GcIndexRead).read_bytes,
            twin_restarts: g(&c.gc_twin_restarts),
            bytes_written_by_class: c
                .gc_bytes_by_class
                .iter()
                .enumerate()
                .filter(|(_, n)| g(n) > 0)
                .map(|(class, n)| (class_name(self.policy.router.as_ref(), class as u32), g(n)))
                .collect(),
            lookup_bytes_read: self.io.get(crate::io::IoClass::GcLookup).read_bytes,
            bytes_written: g(&c.gc_bytes_written),
            read_micros: g(&c.gc_read_micros),
            lookup_micros: g(&c.gc_lookup_micros),
            write_micros: g(&c.gc_write_micros),
            paced_micros: g(&c.gc_paced_micros),
            job_micros: g(&c.gc_job_micros),
            compaction_wait_micros: g(&c.gc_compaction_wait_micros),
            claimed,
            io_threads: self.gc_io.threads(),
            backoff_tables: backoff.failing,
            backoff_waiting: backoff.waiting,
            backoff_next_retry_ms: backoff
                .next_retry
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            backoff_failures: backoff.most_failures,
            late_drops,
            relocated_values: g(&c.relocated_values),
            relocations_kept_for_aliases: g(&c.relocations_kept_for_aliases),
            relocations_kept_for_gc: g(&c.relocations_kept_for_gc),
            aliases_dropped: g(&c.aliases_dropped),
            relocated_bytes: g(&c.relocated_bytes),
            forced_compactions: g(&c.forced_compactions),
            written_back: g(&c.gc_written_back),
            write_back_conflicts: g(&c.gc_write_back_conflicts),
        };
        DbStats {
            throttle: self.space.as_ref().map(space::SpaceControl::stats),
            total_table_bytes: key_bytes,
            values,
            gc,
            space,
            levels,
            memtable_bytes: mem_bytes,
            immutable_memtables: imm,
            immutable_memtable_bytes: imm_bytes,
            memtable_entries: mem_entries,
            range_tombstones,
            last_sequence: self.visible_seq.load(Ordering::Acquire),
            snapshots: self.snapshots.count(),
            io: crate::io::IoClass::ALL
                .iter()
                .map(|&cl| (cl.name().to_string(), self.io.get(cl)))
                .collect(),
            operations: OperationStats {
                batches: g(&c.batches),
                write_groups: g(&c.write_groups),
                wal_syncs: g(&c.wal_syncs),
                user_bytes_written: g(&c.user_bytes_written),
                gets: g(&c.gets),
                iterators: g(&c.iterators),
                gets_separated: g(&c.gets_separated),
                gets_via_inheritance: g(&c.gets_via_inheritance),
                expired_skipped: g(&c.expired_skipped),
                handle_updates_written: g(&c.handle_updates_written),
                handle_updates_skipped: g(&c.handle_updates_skipped),
                handle_updates_dropped: g(&c.handle_updates_dropped),
                scan_values_prefetched: self.read_pool.get().map_or(0, |p| p.served()),
                writes_queued: self.writers.lock().len(),
                conditional_writes: g(&c.conditional_writes),
                conditional_write_conflicts: g(&c.conditional_write_conflicts),
            },
            compaction: CompactionStats {
                flushes: g(&c.flushes),
                flush_bytes: g(&c.flush_bytes),
                flush_micros: g(&c.flush_micros),
                compactions: g(&c.compactions),
                manual_compactions: g(&c.manual_compactions),
                trivial_moves: g(&c.trivial_moves),
                stale_handle_compactions: g(&c.stale_handle_compactions),
                bytes_read: g(&c.compaction_bytes_read),
                bytes_written: g(&c.compaction_bytes_written),
                micros: g(&c.compaction_micros),
                dropped_shadowed: g(&c.dropped_shadowed),
                dropped_range_deleted: g(&c.dropped_range_deleted),
                dropped_expired: g(&c.dropped_expired),
                tables_dropped_whole: g(&c.tables_dropped_whole),
                dropped_tombstones: g(&c.dropped_tombstones),
                tables_deleted: g(&c.tables_deleted),
                running,
                style: (0..self.strategy.partitions())
                    .map(|p| self.strategy.of(p).style().name())
                    .collect::<Vec<_>>()
                    .join("+"),
                errors: g(&c.compaction_errors),
                last_error: self.last_compaction_error.lock().clone(),
            },
            stalls: StallStats {
                slowdown_count: g(&c.slowdown_count),
                slowdown_micros: g(&c.slowdown_micros),
                stop_count: g(&c.stop_count),
                stop_micros: g(&c.stop_micros),
                stop_l0_micros: g(&c.stop_l0_micros),
                space_delays: g(&c.space_delays),
                space_wait_micros: g(&c.space_wait_micros),
                space_compactions: g(&c.space_compactions),
            },
            cache: CacheStats {
                capacity_bytes: self.block_cache.as_ref().map_or(0, |b| b.capacity_bytes()),
                usage_bytes: self.block_cache.as_ref().map_or(0, |b| b.usage_bytes()),
                hits: self.block_cache.as_ref().map_or(0, |b| b.hits()),
                misses: self.block_cache.as_ref().map_or(0, |b| b.misses()),
                high_priority_hits: self
                    .block_cache
                    .as_ref()
                    .map_or(0, |b| b.pool_hits(CachePriority::High)),
                high_priority_misses: self
                    .block_cache
                    .as_ref()
                    .map_or(0, |b| b.pool_misses(CachePriority::High)),
                high_priority_usage_bytes: self
                    .block_cache
                    .as_ref()
                    .map_or(0, |b| b.pool_usage_bytes(CachePriority::High)),
                high_priority_capacity_bytes: self
                    .block_cache
                    .as_ref()
                    .map_or(0, |b| b.high_priority_capacity_bytes()),
                open_tables: self.tables.len(),
                open_value_tables: self.values.len(),
                table_opens: self.tables.opens() + self.values.opens(),
                table_metadata_reads: self.tables.metadata_reads() + self.values.metadata_reads(),
                retained_metadata_bytes: self.tables.retained_bytes()
                    + self.values.retained_bytes(),
                table_opens_after_emfile: self.tables.opens_after_emfile()
                    + self.values.opens_after_emfile(),
                value_capacity_bytes: self.value_cache.as_ref().map_or(0, |v| v.capacity_bytes()),
                value_usage_bytes: self.value_cache.as_ref().map_or(0, |v| v.usage_bytes()),
                value_hits: self.value_cache.as_ref().map_or(0, |v| v.hits()),
                value_misses: self.value_cache.as_ref().map_or(0, |v| v.misses()),
                value_skipped_inserts: self.value_cache.as_ref().map_or(0, |v| v.skipped_inserts()),
                value_place_hits: self.value_cache.as_ref().map_or(0, |v| v.place_hits()),
                row_capacity_bytes: self.row_cache.as_ref().map_or(0, |r| r.capacity_bytes()),
                row_usage_bytes: self.row_cache.as_ref().map_or(0, |r| r.usage_bytes()),
                row_hits: self.row_cache.as_ref().map_or(0, |r| r.hits()),
                row_misses: self.row_cache.as_ref().map_or(0, |r| r.misses()),
                row_raced_fills: self.row_cache.as_ref().map_or(0, |r| r.raced_fills()),
            },
            recovery: RecoveryStats {
                wal_records: g(&c.recovered_records),
                wal_dropped_bytes: g(&c.recovered_dropped_bytes),
                torn_writes: g(&c.recovered_torn_writes),
                lost_log_records: g(&c.recovered_lost_log_records),
                segments_sealed: g(&c.recovered_segments),
            },
            partitions: self.partition_stats(&version),
            background_error: bg_error,
        }
    }
}

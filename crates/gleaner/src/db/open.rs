//! Opening a database, LevelDB-style in two parts. [`recover`] is what every open does and
//! writes nothing: directory and lock checks, the options merge, manifest recovery, and the
//! check that every needed file is present; [`replay_wals`] then reads the write-ahead logs
//! into memtables and hands each full one to its caller. The read-write tail ([`open`]) flushes
//! the replayed memtables to L0 tables, starts a fresh WAL, installs both in one manifest edit,
//! rewrites OPTIONS, removes files nothing references and starts the background work. The
//! read-only tail ([`open_read_only`]) keeps the replayed memtables in memory and does none of
//! that.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use super::background::table_options;
use super::segments::FoundSegments;
use super::{Counters, DbInner, DbState, ObsoleteTables, SnapshotList, SuperVersion, Wal};
use crate::cache::{BlockCache, RowCache, TableCache, ValueCache, ValueTableCache};
use crate::compaction::{DropCounter, GarbageListener, PickerConfig, TeeListener, flush_split};
use crate::error::{Error, Result};
use crate::filename::{
    CURRENT, FileType, LOCK, OPTIONS, manifest_file_name, parse_file_name, table_file_name,
    value_table_file_name, wal_file_name,
};
use crate::io::{
    CountedReader, CountedWriter, DiskUsage, FileLock, FileSystem, IoClass, IoStats, PathKind,
    ReadFileOptions, TrackedFs, WriteFileOptions, write_file_atomically,
};
use crate::memtable::MemTable;
use crate::options::{
    GcPolicyKind, OptionValue, Options, WalRecoveryMode, parse_options_file, render_options_file,
};
use crate::version::{RecoveredCounters, Version, VersionEdit, VersionSet, VersionSetConfig};
use crate::wal::{
    Cut, CutKind, LogChain, LogWriter, check_cut_unsynced, decode_wal_record, wal_reader,
};

/// Which open is recovering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// [`open`]: may create the database, takes the exclusive lock.
    ReadWrite,
    /// [`open_read_only`]: the database must exist; takes the shared lock, never creates it.
    ReadOnly,
}

/// What [`recover`] found. Nothing has been written yet, whatever the mode.
struct Recovery {
    dir: PathBuf,
    /// The caller's options merged with the saved OPTIONS file, validated.
    opts: Options,
    /// The GC policy `opts` select (replay separates values as its router says).
    policy: PolicyRuntime,
    fs: Arc<dyn FileSystem>,
    /// Bytes of every file in the directory, counted by `fs`.
    disk: Arc<DiskUsage>,
    io: Arc<IoStats>,
    /// The LOCK guard: exclusive (read-write), shared (read-only), or none (read-only open of
    /// a directory without a LOCK file).
    lock: Option<Box<dyn FileLock>>,
    block_cache: Option<Arc<BlockCache>>,
    value_cache: Option<Arc<ValueCache>>,
    tables: Arc<TableCache>,
    values: Arc<ValueTableCache>,
    obsolete: Arc<ObsoleteTables>,
    next_file_number: Arc<AtomicU64>,
    versions: VersionSet,
    /// The manifest's last sequence number (0 for a new database).
    last_seq: u64,
    /// WALs to replay (numbered at or above the manifest's log number), oldest first.
    wals: Vec<u64>,
    counters: Counters,
}

/// The read-write open: recovery, then the replayed memtables flushed to L0, a fresh WAL, one
/// manifest edit, OPTIONS, orphan removal, and the background work.
pub(super) fn open(path: &Path, opts: Options) -> Result<Arc<DbInner>> {
    let mut rec = recover(path, opts, Mode::ReadWrite)?;
    let (fs, dir, io, opts) = (&rec.fs, &rec.dir, &rec.io, &rec.opts);
    let next_file_number = &rec.next_file_number;
    let table_opts = table_options(opts);
    let mut edit = VersionEdit::default();
    // Replayed memtables go straight to L0 tables (no snapshot exists yet, so shadowed versions
    // are dropped).
    // Tables written from the logs are deleted again unless the edit installing them lands.
    let mut recovered_files = crate::compaction::PendingFiles::new(Arc::clone(fs), dir.clone());
    // A replayed handle a GC wrote back (write-back commits) that a later replayed write shadows is
    // dropped by the flush: its record becomes garbage, counted as any flush counts it.
    let mut garbage = GarbageListener::new(
        Arc::clone(rec.versions.current()),
        Arc::clone(&rec.values),
        BTreeSet::new(),
    );
    // Replayed keys go to the partitions the recovered routing names.
    let routing = {
        let v = rec.versions.current();
        v.is_partitioned().then(|| Arc::new(v.routing().clone()))
    };
    let mut flush_recovered =
        |mem: Arc<MemTable>, found: &FoundSegments, edit: &mut VersionEdit| -> Result<()> {
            // A handle into a segment the flush drops is garbage of the segment, which the edit
            // installs.
            garbage.add_sealing(found.numbers());
            let out = || crate::compaction::OutputConfig {
                fs: Arc::clone(fs),
                dir: dir.clone(),
                stats: Arc::clone(io),
                table: table_opts,
                direct: opts.use_direct_io_for_background_writes(),
                class: IoClass::Flush,
                next_file_number: Arc::clone(next_file_number),
                target_file_size: u64::MAX,
                max_grandparent_overlap: u64::MAX,
                input_readahead: 0,
            };
            let largest_seq = mem.largest_seq();
            let values = || crate::compaction::ValueOutputConfig {
                fs: Arc::clone(fs),
                dir: dir.clone(),
                stats: Arc::clone(io),
                class: IoClass::Flush,
                next_file_number: Arc::clone(next_file_number),
                target_size: opts.value_table_size(),
                index_compression: opts.compression(),
                direct: opts.use_direct_io_for_background_writes(),
                policy: Arc::from(rec.policy.set.name.as_str()),
                expiry_group_ms: opts.expiry_group_ms(),
                now: largest_seq,
                warm_cache: None,
            };
            // The policy's router places replayed values (it knows them as such: no hotness is
            // known yet, and a router keeps them in the default class).
            let separation = || {
                Some(crate::compaction::Separation {
                    values: values(),
                    router: Arc::clone(&rec.policy.set.router),
                    origin: crate::gc::RouteOrigin::Recovery,
                })
            };
            let (done, _) = flush_split(
                &[mem],
                // Nothing expires here: the database's time starts once it is open.
                crate::expiry::ReaderTimes::at(0),
                out,
                separation,
                &mut TeeListener(&mut DropCounter::default(), &mut garbage),
                // Replayed aliases stay: the first compaction under a policy that writes none
                // drops them, and until then relocation leaves the records they name in place.
                false,
                routing.clone(),
            )?;
            edit.new_tables.extend(done.key_tables);
            edit.new_value_tables.extend(done.value_tables);
            recovered_files.absorb(done.pending);
            Ok(())
        };
    // Each memtable is flushed as soon as it is full, so replay holds one memtable at a time.
    let Replayed {
        mem,
        last_seq,
        replayed_seq,
        segments,
    } = replay_wals(&rec, &mut |mem, found| {
        flush_recovered(mem, found, &mut edit)
    })?;
    if !mem.is_empty() {
        flush_recovered(mem, &segments, &mut edit)?;
    }
    // The segments the replayed writes name, cut back to them and sealed.
    let (sealed, unclaimed) = segments.seal_all(
        fs.as_ref(),
        dir,
        io,
        (&*rec.policy.set.router, &rec.policy.set.name),
        opts.compression(),
        replayed_seq,
    )?;
    Counters::add(&rec.counters.recovered_segments, sealed.len() as u64);
    edit.new_value_tables.extend(sealed);
    edit.value_garbage.extend(unclaimed);
    // Nothing is deleted while recovery settles: no table can be gone for expiry.
    garbage.settle(rec.versions.current(), &BTreeSet::new(), &mut edit, 0)?;

    // A fresh WAL, then one manifest edit that installs the replayed tables and retires the
    // replayed logs (VersionSet writes a new manifest and points CURRENT at it).
    let wal_number = next_file_number.fetch_add(1, Ordering::SeqCst);
    let wal_file = fs.new_writable(
        &dir.join(wal_file_name(wal_number)),
        WriteFileOptions {
            direct: false,
            buffer_size: 64 << 10,
        },
    )?;
    let wal_writer = LogWriter::new(Box::new(CountedWriter::new(
        wal_file,
        IoClass::Wal,
        Arc::clone(io),
    )));
    fs.sync_dir(dir)?;
    edit.log_number = Some(wal_number);
    edit.last_sequence = Some(last_seq);
    rec.versions.log_and_apply(edit)?;
    recovered_files.keep();
    let version = settle_write_backs(&mut rec.versions)?;
    write_file_atomically(
        fs.as_ref(),
        dir,
        OPTIONS,
        render_options_file(opts).as_bytes(),
        io,
        IoClass::Manifest,
    )?;

    let live_manifest = rec.versions.manifest_number();
    remove_unreferenced_files(fs.as_ref(), dir, &version, wal_number, live_manifest)?;

    let live = Live {
        mem: Arc::new(MemTable::new(wal_number, opts.memtable_size())),
        imm: VecDeque::new(),
        version,
        last_seq,
        wal: Some(Wal {
            writer: wal_writer,
            number: wal_number,
            segments: Default::default(),
        }),
    };
    let detector = hotness_detector(&rec, false)?;
    let inner = assemble(rec, live, false, detector)?;
    inner.spawn_workers()?;
    // Compaction may be due right away (e.g. many L0 tables from replay).
    inner.bg_cv.notify_all();
    inner.run_inline_work();
    Ok(inner)
}

/// The read-only open: recovery and WAL replay into memtables kept in memory; nothing is
/// written, created, renamed or deleted, and no background work (thread or inline) starts.
pub(super) fn open_read_only(path: &Path, opts: Options) -> Result<Arc<DbInner>> {
    let rec = recover(path, opts, Mode::ReadOnly)?;
    // Full memtables stay as immutable ones: memory is bounded by the WALs' size on disk.
    let mut imm = VecDeque::new();
    let Replayed {
        mem,
        last_seq,
        segments,
        ..
    } = replay_wals(&rec, &mut |mem, _| {
        imm.push_back(mem);
        Ok(())
    })?;
    // Value segments a crash left open are read where they are, never sealed here.
    for view in segments.views(&rec.values)? {
        mem.hold_segment(view);
    }
    let live = Live {
        mem,
        imm,
        version: Arc::clone(rec.versions.current()),
        last_seq,
        wal: None,
    };
    let detector = hotness_detector(&rec, true)?;
    assemble(rec, live, true, detector)
}

/// The hotness detector of a partitioned tree (`None` otherwise): `partition/detector.rs`.
///
/// Errors: a read-write open cannot write the detector's files.
fn hotness_detector(
    rec: &Recovery,
    read_only: bool,
) -> Result<Option<Arc<crate::partition::detector::HotnessDetector>>> {
    if !rec.opts.partitioning().is_partitioned() {
        return Ok(None);
    }
    crate::partition::detector::HotnessDetector::open(
        &rec.opts, &rec.fs, &rec.dir, &rec.io, read_only,
    )
    .map(|d| Some(Arc::new(d)))
}

/// Directory and lock checks, the options merge, manifest recovery and the check that every
/// needed file is present. A read-only recovery writes nothing; a read-write one may create
/// the directory (with `create_if_missing`) and the LOCK file, and probes direct writes with a
/// temporary file (with `use_direct_io_for_background_writes`).
fn recover(path: &Path, mut opts: Options, mode: Mode) -> Result<Recovery> {
    let fs = Arc::clone(opts.file_system());
    // A database that does not exist yet is made from the caller's options alone: refuse bad
    // ones before the directory or the LOCK file is created. (An existing one's are checked
    // once merged with its OPTIONS, below.)
    // The policy is built here too: a custom policy's factory may refuse the options. Its
    // files exist from the moment the open holds the directory (a new database has none).
    let io = Arc::new(IoStats::default());
    let mut policy = None;
    if mode == Mode::ReadWrite && fs.path_kind(&path.join(CURRENT))?.is_none() {
        opts.validate()?;
        crate::gc::check_options(&opts)?;
        crate::compaction::style::check_options(&opts)?;
        let empty = Version::new(opts.num_levels() as usize);
        policy = Some(build_policy(&opts, path, &empty, None, &io, false)?);
    }
    match fs.path_kind(path)? {
        Some(PathKind::File) => {
            return Err(Error::invalid(format!(
                "{} is a file; a database is a directory",
                path.display()
            )));
        }
        None if mode == Mode::ReadOnly => {
            return Err(Error::invalid(format!(
                "no database at {}: no such directory (a read-only open never creates one)",
                path.display()
            )));
        }
        None if !opts.create_if_missing() => {
            return Err(Error::invalid(format!(
                "no database at {} and option `create_if_missing` is false",
                path.display()
            )));
        }
        None => fs.create_dir_all(path)?,
        Some(PathKind::Dir) => {}
    }
    let dir = path.to_path_buf();
    let lock = match mode {
        Mode::ReadWrite => Some(fs.lock(&dir.join(LOCK))?),
        // Shared: readers coexist, a writer is excluded (it could delete files under them).
        // A directory without a LOCK file is opened unlocked rather than given one.
        Mode::ReadOnly => fs.lock_shared(&dir.join(LOCK))?,
    };
    // From here every file operation goes through the byte count the space throttle reads.
    let (tracked, disk) = TrackedFs::new(fs, &dir)?;
    let fs: Arc<dyn FileSystem> = Arc::new(tracked);
    let exists = fs.path_kind(&dir.join(CURRENT))?.is_some();
    if exists && opts.error_if_exists() {
        return Err(Error::invalid(format!(
            "a database exists at {} and option `error_if_exists` is true",
            path.display()
        )));
    }
    if !exists && mode == Mode::ReadOnly {
        return Err(Error::invalid(format!(
            "no database at {} (no CURRENT file); a read-only open never creates one",
            path.display()
        )));
    }
    if !exists && !opts.create_if_missing() {
        return Err(Error::invalid(format!(
            "no database at {} (no CURRENT file) and option `create_if_missing` is false",
            path.display()
        )));
    }
    if exists && fs.path_kind(&dir.join(OPTIONS))?.is_some() {
        let bytes = fs.read_all(&dir.join(OPTIONS))?;
        io.record_read(IoClass::Manifest, bytes.len() as u64);
        apply_saved_options(
            &mut opts,
            parse_options_file(OPTIONS, &bytes)?,
            mode == Mode::ReadOnly,
        )?;
    }
    opts.validate()?;
    crate::gc::check_options(&opts)?;
    crate::compaction::style::check_options(&opts)?;
    match mode {
        Mode::ReadWrite => probe_direct_io(fs.as_ref(), &dir, &opts, LOCK, true)?,
        // No background write ever happens, and LOCK may be absent: probe reads on CURRENT.
        Mode::ReadOnly => probe_direct_io(fs.as_ref(), &dir, &opts, CURRENT, false)?,
    }

    // One memory budget: the value cache's share comes out of the block cache's.
    let value_cache_bytes = (opts.block_cache_size() as f64 * opts.value_cache_share())
        .min(opts.block_cache_size() as f64) as u64;
    let block_cache_bytes = opts.block_cache_size() - value_cache_bytes;
    let block_cache =
        (block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(block_cache_bytes as usize)));
    let value_cache = (value_cache_bytes > 0).then(|| Arc::new(ValueCache::new(value_cache_bytes)));
    let tables = Arc::new(TableCache::new(
        Arc::clone(&fs),
        dir.clone(),
        Arc::clone(&io),
        block_cache.clone(),
        opts.max_open_files() as usize,
        opts.use_direct_io_for_reads(),
    ));
    let values = Arc::new(ValueTableCache::new(
        Arc::clone(&fs),
        dir.clone(),
        Arc::clone(&io),
        block_cache.clone(),
        opts.max_open_files() as usize,
        opts.use_direct_io_for_reads(),
    ));
    let obsolete = Arc::new(ObsoleteTables::default());
    let next_file_number = Arc::new(AtomicU64::new(2));
    let num_levels = opts.num_levels() as usize;
    let cfg = VersionSetConfig {
        fs: Arc::clone(&fs),
        dir: dir.clone(),
        stats: Arc::clone(&io),
        sink: obsolete.clone(),
        next_file_number: Arc::clone(&next_file_number),
        max_manifest_size: opts.max_manifest_size(),
        num_levels,
        partitioned: opts.partitioning().is_partitioned(),
    };
    let (versions, recovered) = if exists {
        let (vs, counters) = VersionSet::recover(cfg)?;
        (vs, Some(counters))
    } else {
        (VersionSet::new_empty(cfg), None)
    };
    let log_number = recovered.map_or(0, |c| c.log_number);
    let last_seq = recovered.map_or(0, |c| c.last_sequence);
    // Bring the file-number counter past every file in the directory, so no number is reused
    // even for files the manifest does not know (orphans from an interrupted job).
    let names = fs.list_dir(&dir)?;
    let mut wals = Vec::new();
    for name in &names {
        match parse_file_name(name) {
            Some(FileType::Wal(n)) => {
                next_file_number.fetch_max(n + 1, Ordering::SeqCst);
                if n >= log_number {
                    wals.push(n);
                }
            }
            Some(
                FileType::KeyTable(n)
                | FileType::ValueTable(n)
                | FileType::DropFile(n)
                | FileType::Manifest(n),
            ) => {
                next_file_number.fetch_max(n + 1, Ordering::SeqCst);
            }
            _ => {}
        }
    }
    wals.sort_unstable();
    if let Some(counters) = recovered {
        check_recovered_files(&names, versions.current(), &counters)?;
    }
    if mode == Mode::ReadWrite {
        check_policy_meta(versions.current(), &opts)?;
    }
    // Built once per open: for a new database above, from the same options; for an existing
    // one from its recovered version, with its files readable.
    let policy = match policy {
        Some(p) => {
            p.files.attach(Arc::clone(&fs));
            p
        }
        None => build_policy(
            &opts,
            &dir,
            versions.current(),
            Some(Arc::clone(&fs)),
            &io,
            mode == Mode::ReadOnly,
        )?,
    };
    Ok(Recovery {
        dir,
        policy,
        opts,
        fs,
        disk,
        io,
        lock,
        block_cache,
        value_cache,
        tables,
        values,
        obsolete,
        next_file_number,
        versions,
        last_seq,
        wals,
        counters: Counters::default(),
    })
}

/// What [`replay_wals`] recovered.
struct Replayed {
    /// The last memtable (possibly empty).
    mem: Arc<MemTable>,
    /// The highest sequence number recovered.
    last_seq: u64,
    /// The highest sequence number of a replayed write (0 with none): what the value
    /// segments are cut back to (the manifest's may be higher, and cover torn writes).
    replayed_seq: u64,
    /// The value segments replayed writes name (`separate_at=write`), claimed.
    segments: FoundSegments,
}

/// Replays `rec`'s WALs, oldest first, into memtables. Each memtable that reaches
/// `memtable_size` goes to `full`, with the value segments found so far, and a new one starts.
/// A write whose value, appended to a value segment as it arrived, is not there whole was torn
/// by a crash: it and everything logged after it are dropped (counted in
/// `recovery.torn_writes`), as a torn log tail is. So is everything after a log that lost its
/// unsynced tail (`recovery.lost_log_records`): each log continues its predecessor's sequence
/// numbers exactly, and a log that does not, or a log with no write followed by one with
/// writes, shows that writes between them were lost (a memtable switch does not sync the log it
/// closes: `db/sealed_logs.rs`). Reads only.
fn replay_wals(
    rec: &Recovery,
    full: &mut dyn FnMut(Arc<MemTable>, &FoundSegments) -> Result<()>,
) -> Result<Replayed> {
    let (fs, dir, io, opts, counters) = (&rec.fs, &rec.dir, &rec.io, &rec.opts, &rec.counters);
    let mut last_seq = rec.last_seq;
    let mut mem = Arc::new(MemTable::new(0, opts.memtable_size()));
    let mut segments = FoundSegments::default();
    // Where the replay was cut: nothing logged after it is replayed.
    let mut cut: Option<Cut> = None;
    let mode = opts.wal_recovery_mode();
    let mut replayed_seq = 0;
    let mut chain = LogChain::default();
    for &number in &rec.wals {
        let name = wal_file_name(number);
        let file = fs.open_readable(&dir.join(&name), ReadFileOptions::default())?;
        let mut reader = wal_reader(
            CountedReader::new(file, Arc::clone(io)),
            name.clone(),
            IoClass::Wal,
            opts.wal_recovery_mode(),
        )?;
        chain.start_log(number);
        while let Some((offset, record)) = reader.read_record()? {
            let point = crate::wal::wal_sync_point(&record);
            let Some(batch) = decode_wal_record(record, &name, offset)? else {
                if let Some(at) = &cut {
                    check_cut_unsynced(at, number, point, mode)?;
                }
                continue;
            };
            if cut.is_none()
                && mode == WalRecoveryMode::TolerateCorruptedTail
                && let Some(lost) = chain.lost_before(number, offset, batch.sequence())?
            {
                log::warn!(
                    "{}: {} lost writes before sequence {} to a power loss (its unsynced \
                     tail); the writes logged after them are dropped",
                    dir.display(),
                    wal_file_name(lost.log),
                    batch.sequence()
                );
                cut = Some(lost);
            }
            if let Some(at) = &cut {
                check_cut_unsynced(at, number, point, mode)?;
                match at.kind {
                    CutKind::TornValue => Counters::add(&counters.recovered_torn_writes, 1),
                    CutKind::LostLog => Counters::add(&counters.recovered_lost_log_records, 1),
                }
                continue;
            }
            let whole = segments.claim_batch(
                fs.as_ref(),
                dir,
                io,
                rec.versions.current(),
                &batch,
                (&name, offset),
            )?;
            if !whole {
                Counters::add(&counters.recovered_torn_writes, 1);
                // Skipping damage skips this write alone; otherwise it ends the replay.
                if mode == WalRecoveryMode::TolerateCorruptedTail {
                    cut = Some(Cut {
                        log: number,
                        offset,
                        kind: CutKind::TornValue,
                    });
                }
                continue;
            }
            // As the write path: a memtable without room for the record's range tombstones
            // is switched first.
            if !mem.is_empty() && !mem.has_room_for(batch.range_tombstones()) {
                full(mem, &segments)?;
                mem = Arc::new(MemTable::new(0, opts.memtable_size()));
            }
            let mut seq = batch.sequence();
            for op in batch.iter() {
                let op = op.map_err(|d| Error::corruption(&name, offset, d))?;
                mem.apply(seq, &op);
                seq += 1;
            }
            chain.replayed(seq);
            last_seq = last_seq.max(seq - 1);
            replayed_seq = replayed_seq.max(seq - 1);
            Counters::add(&counters.recovered_records, 1);
            if mem.is_full(opts.memtable_size()) {
                full(mem, &segments)?;
                mem = Arc::new(MemTable::new(0, opts.memtable_size()));
            }
        }
        for region in reader.dropped() {
            Counters::add(&counters.recovered_dropped_bytes, region.len);
        }
    }
    if Counters::get(&counters.recovered_torn_writes) > 0 {
        log::warn!(
            "{}: {} logged writes after a torn write to a value segment were dropped",
            dir.display(),
            Counters::get(&counters.recovered_torn_writes)
        );
    }
    Ok(Replayed {
        mem,
        last_seq,
        replayed_seq,
        segments,
    })
}

/// The in-memory state an open ends with.
struct Live {
    /// The active memtable.
    mem: Arc<MemTable>,
    /// Immutable memtables, oldest first.
    imm: VecDeque<Arc<MemTable>>,
    version: Arc<Version>,
    last_seq: u64,
    /// The WAL writes go to (`None` for a read-only open).
    wal: Option<Wal>,
}

/// Builds the database handle's shared state. No I/O.
fn assemble(
    rec: Recovery,
    live: Live,
    read_only: bool,
    detector: Option<Arc<crate::partition::detector::HotnessDetector>>,
) -> Result<Arc<DbInner>> {
    let Recovery {
        dir,
        opts,
        fs,
        disk,
        io,
        lock,
        block_cache,
        value_cache,
        tables,
        values,
        obsolete,
        next_file_number,
        versions,
        counters,
        policy,
        ..
    } = rec;
    let num_levels = opts.num_levels() as usize;
    let picker = PickerConfig {
        num_levels,
        l0_compaction_trigger: opts.l0_compaction_trigger() as usize,
        level_base_size: opts.level_base_size(),
        level_multiplier: u64::from(opts.level_multiplier()),
        target_file_size: opts.key_table_size(),
    };
    let compact_pointers = (0..live.version.num_levels())
        .map(|l| versions.compact_pointer(l).map(<[u8]>::to_vec))
        .collect();
    let state = DbState {
        mem: Arc::clone(&live.mem),
        imm: live.imm.clone(),
        flush_claimed: 0,
        version: Arc::clone(&live.version),
        compact_pointers,
        running: Vec::new(),
        next_compaction_id: 0,
        gc_claimed: BTreeSet::new(),
        late_drops: BTreeMap::new(),
        gc_failed: BTreeSet::new(),
        gc_backoff: BTreeMap::new(),
        alias_pins: BTreeMap::new(),
        compaction_failures: 0,
        compaction_retry_at: None,
        bg_error: None,
        shutting_down: false,
        move_gate: None,
        move_holds: 0,
        retired_hold: None,
        stale_scan: None,
        sealing: BTreeMap::new(),
    };
    let PolicyRuntime {
        set: policy,
        files: policy_files,
        tasks: policy_tasks,
    } = policy;
    let strategy = if opts.partitioning().is_partitioned() {
        crate::compaction::trees::TreeStrategies::partitioned(&opts)
    } else {
        crate::compaction::trees::TreeStrategies::unpartitioned(&opts)
    };
    let policy_updates_handles = policy.updates_handles_on_read;
    let space = opts
        .space_budget()
        .map(super::space::SpaceControl::new)
        .transpose()?;
    // Inline work runs on callers' threads, which must not sleep for the reads' sake.
    let gc_pacer = if opts.inline_background_work() {
        None
    } else {
        super::gc::GcPacer::new(opts.gc_read_yield_rate())
    };
    let gc_io = crate::gc::LazyGcIoPool::new(gc_io_threads(&opts, space.is_some()));
    // Never earlier than a time an edit acted on (what expired then stays expired).
    let time = crate::expiry::DbTime::new(Arc::clone(opts.clock()), versions.time_floor());
    let segment_sink = (opts.separate_at() == crate::options::SeparateAt::Write && !read_only)
        .then(|| super::segments::SegmentSink {
            fs: Arc::clone(&fs),
            dir: dir.clone(),
            io: Arc::clone(&io),
            next_file_number: Arc::clone(&next_file_number),
            values: Arc::clone(&values),
            router: Arc::clone(&policy.router),
            policy: Arc::from(policy.name.as_str()),
            expiry_group_ms: opts.expiry_group_ms(),
            compression: opts.compression(),
            spare: Default::default(),
            warm_cache: value_cache
                .clone()
                .filter(|_| opts.prepopulate_value_cache()),
        });
    let row_cache = (opts.row_cache_size() > 0).then(|| RowCache::new(opts.row_cache_size()));
    Ok(Arc::new(DbInner {
        segment_sink,
        dir,
        opts,
        fs,
        io,
        block_cache,
        value_cache,
        row_cache,
        tables,
        values,
        read_pool: std::sync::OnceLock::new(),
        gc_io,
        picker,
        strategy,
        detector,
        policy,
        policy_files,
        // Handed over last: until the database exists, a failure stops the tasks.
        policy_tasks: policy_tasks.hand_over(),
        next_file_number,
        visible_seq: AtomicU64::new(live.last_seq),
        super_version: ArcSwap::from_pointee(SuperVersion {
            mem: live.mem,
            // Newest first, as `install_super_version` orders them.
            imm: live.imm.into_iter().rev().collect(),
            version: live.version,
        }),
        snapshots: Arc::new(SnapshotList::default()),
        time,
        writers: Mutex::new(VecDeque::new()),
        writers_cv: Condvar::new(),
        // The fresh log's entry was synced before the recovery's edit named it.
        wal_dir_durable: AtomicU64::new(live.wal.as_ref().map_or(0, |w| w.number)),
        wal: Mutex::new(live.wal),
        sealed_logs: Mutex::default(),
        versions: Mutex::new(versions),
        state: Mutex::new(state),
        bg_cv: Condvar::new(),
        progress_cv: Condvar::new(),
        shutting_down: AtomicBool::new(false),
        foreground: AtomicUsize::new(0),
        obsolete,
        counters,
        last_gc_error: Mutex::new(None),
        last_compaction_error: Mutex::new(None),
        threads: Mutex::new(Vec::new()),
        inline_turn: Mutex::new(()),
        lock: Mutex::new(lock),
        space,
        gc_pacer,
        handle_updates: (policy_updates_handles && !read_only)
            .then(super::handle_updates::HandleUpdates::default),
        disk,
        read_only,
    }))
}

/// Threads of the pool GC jobs' reads in flight run on (`DbInner::gc_io`): each job uses up to
/// `gc_io_depth` − 1 beside its own thread, and as many jobs run at once as there are GC
/// workers (one for `run_gc` without any), so this is what they need together, at most
/// [`crate::gc::MAX_GC_IO_THREADS`]. None under inline work, which runs no engine threads.
fn gc_io_threads(opts: &Options, space_throttled: bool) -> usize {
    if opts.inline_background_work() {
        return 0;
    }
    let workers = if space_throttled {
        opts.gc_threads().max(opts.gc_threads_max())
    } else {
        opts.gc_threads()
    };
    (opts.gc_io_depth().saturating_sub(1) as usize).saturating_mul(workers.max(1) as usize)
}

/// Checks that every file the recovered state needs is present: each live key table, and the
/// oldest WAL still needed (the one numbered `log_number`, which exists from the moment an edit
/// names it until a later edit moves past it).
///
/// This is also what makes a torn last manifest record safe to ignore: if the lost edit had
/// been installed and acted upon (a flush's WAL deleted, a compaction's inputs deleted), a needed
/// file is missing and the open fails with corruption instead of silently losing data.
fn check_recovered_files(
    names: &[String],
    version: &Version,
    counters: &RecoveredCounters,
) -> Result<()> {
    let present: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let manifest = manifest_file_name(counters.manifest_number);
    let missing = |file: String| {
        let detail = match counters.torn_tail_offset {
            Some(at) => format!(
                "{file} is missing, and the manifest's last edit (at offset {at}) is damaged: \
                 the damaged edit had been installed, so its changes cannot be recovered"
            ),
            None => format!("{file}, which the manifest lists as live, is missing"),
        };
        Error::corruption(&manifest, counters.torn_tail_offset.unwrap_or(0), detail)
    };
    for (_, f) in version.all_files() {
        let name = table_file_name(f.number);
        if !present.contains(name.as_str()) {
            return Err(missing(name));
        }
    }
    let values = version.values();
    for v in values
        .tables()
        .chain(values.retired().values().map(|r| &r.file))
    {
        let name = value_table_file_name(v.number);
        if !present.contains(name.as_str()) {
            return Err(missing(name));
        }
    }
    for n in values.drop_files().keys() {
        let name = crate::filename::drop_file_name(*n);
        if !present.contains(name.as_str()) {
            return Err(missing(name));
        }
    }
    let wal = wal_file_name(counters.log_number);
    if !present.contains(wal.as_str()) {
        return Err(missing(wal));
    }
    Ok(())
}

/// A policy built for one open: its roles, and the files and tasks it was given.
pub(super) struct PolicyRuntime {
    pub(super) set: crate::gc::PolicySet,
    pub(super) files: crate::gc::PolicyFiles,
    tasks: TaskGuard,
}

/// The policy's tasks until the database takes them over ([`TaskGuard::hand_over`]): dropped
/// before, it stops them, so an open that fails after the policy was built leaves no thread
/// behind.
struct TaskGuard(Option<crate::gc::PolicyTasks>);

impl TaskGuard {
    /// The tasks, now the database's to stop at close.
    fn hand_over(mut self) -> crate::gc::PolicyTasks {
        self.0.take().expect("handed over once")
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.stop_and_join();
        }
    }
}

/// Builds the policy `opts` select for the database at `dir` in `version`; its files go
/// through `fs` (none yet for a new database: attached once the open holds the directory).
fn build_policy(
    opts: &Options,
    dir: &Path,
    version: &Version,
    fs: Option<Arc<dyn FileSystem>>,
    io: &Arc<IoStats>,
    read_only: bool,
) -> Result<PolicyRuntime> {
    let name = crate::gc::policy_name(opts);
    let files = crate::gc::PolicyFiles::new(&name, dir, fs, Arc::clone(io), read_only);
    let tasks = crate::gc::PolicyTasks::new(dir, read_only);
    let ctx = crate::gc::PolicyContext {
        opts,
        dir,
        version,
        read_only,
        files: files.clone(),
        tasks: tasks.clone(),
    };
    match crate::gc::policy_set(&ctx) {
        Ok(set) => Ok(PolicyRuntime {
            set,
            files,
            tasks: TaskGuard(Some(tasks)),
        }),
        Err(e) => {
            // Whatever the factory started before it failed ends with the open.
            tasks.stop_and_join();
            Err(e)
        }
    }
}

/// Refuses a database whose value tables carry metadata of a GC policy this open does not know
/// (a custom policy not registered, or a policy of a newer build): the policy's GC may depend
/// on it, and nothing here can keep it right. Reads need none of it: a read-only open skips
/// this.
///
/// Errors: [`Error::InvalidArgument`] naming the policy and a table.
fn check_policy_meta(version: &Version, opts: &Options) -> Result<()> {
    let values = version.values();
    let tables = values
        .tables()
        .map(|t| t.meta())
        .chain(values.retired().values().map(|r| r.file.meta()));
    for t in tables {
        let Some(m) = &t.policy_meta else { continue };
        let known = GcPolicyKind::ALL.iter().any(|p| p.name() == m.tag)
            || opts.custom_policy().is_some_and(|f| f.name() == m.tag);
        if !known {
            return Err(Error::invalid(format!(
                "value table {} carries metadata of GC policy `{}`, which this open does not \
                 know: register it with Options::with_custom_policy, or open the database \
                 read-only",
                t.number, m.tag
            )));
        }
    }
    Ok(())
}

/// Applies the options saved in OPTIONS (`saved`, as `(name, value)`) that the caller did not
/// set. When the database was last opened under another GC policy than it opens under now, the
/// saved values of that policy's own options ([`crate::gc::own_options`]) are dropped: the new
/// policy does not read them, and they must not come back, stale, with a later switch back. The
/// same holds for the compaction style's own options
/// ([`crate::compaction::style::own_options`]).
///
/// A database last opened under a custom policy (`gc_policy=custom:NAME`) needs that policy's
/// factory, or another policy chosen explicitly: its GC would otherwise stop without a word. A
/// read-only open, which runs no GC, reads it under [`GcPolicyKind::READ_ONLY_FALLBACK`]'s
/// roles instead.
fn apply_saved_options(
    opts: &mut Options,
    saved: Vec<(String, String)>,
    read_only: bool,
) -> Result<()> {
    let saved_custom = saved
        .iter()
        .find(|(n, _)| n == "gc_policy")
        .and_then(|(_, v)| v.strip_prefix("custom:"));
    if let Some(name) = saved_custom
        && !opts.is_overridden("gc_policy")
    {
        if !read_only {
            return Err(Error::invalid(format!(
                "this database runs custom GC policy `{name}` (its OPTIONS file says so): \
                 register it with Options::with_custom_policy, open the database read-only, \
                 or choose another policy with option `gc_policy`"
            )));
        }
        *opts = opts
            .clone()
            .with_gc_policy(GcPolicyKind::READ_ONLY_FALLBACK);
    }
    let mut dropped = switch_selector(opts, &saved, "gc_policy", Options::gc_policy, |p| {
        crate::gc::own_options(p)
    })?;
    dropped.extend(switch_selector(
        opts,
        &saved,
        "compaction_style",
        Options::compaction_style,
        crate::compaction::style::own_options,
    )?);
    for (name, value) in &saved {
        if !dropped.contains(&name.as_str()) {
            opts.apply_saved(name, value)?;
        }
    }
    Ok(())
}

/// Applies the saved value of `selector` (an option choosing among implementations that own
/// options of their own: `gc_policy`, `compaction_style`) unless the caller set it, and returns
/// the options the saved choice owns and the current one does not, when they differ: their
/// saved values must not be applied.
fn switch_selector<T: OptionValue + Copy + PartialEq>(
    opts: &mut Options,
    saved: &[(String, String)],
    selector: &str,
    current: fn(&Options) -> T,
    own: fn(T) -> &'static [&'static str],
) -> Result<Vec<&'static str>> {
    let before = saved
        .iter()
        .find(|(n, _)| n == selector)
        .map(|(_, v)| {
            T::parse_option(v).map_err(|why| {
                Error::invalid(format!(
                    "OPTIONS file: option `{selector}` has unusable value `{v}`: {why}"
                ))
            })
        })
        .transpose()?;
    if let Some(b) = before
        && !opts.is_overridden(selector)
    {
        opts.apply_saved(selector, &b.format_option())?;
    }
    let now = current(opts);
    Ok(match before {
        Some(b) if b != now => own(b)
            .iter()
            .filter(|o| !own(now).contains(o))
            .copied()
            .collect(),
        _ => Vec::new(),
    })
}

/// What a read-write open does for write-back GC (docs/gc.md): it releases every
/// retired value table (no snapshot exists yet, and the replayed WALs are in key tables now, so
/// no reader can reach a version naming one), and settles the tables whose write-back a stop
/// interrupted: the handles that name such a table in key tables (their dependences) are its
/// references, every other record is garbage, and a table nothing references is deleted. One
/// more edit, only when there is something to do.
fn settle_write_backs(versions: &mut VersionSet) -> Result<Arc<Version>> {
    let current = Arc::clone(versions.current());
    let values = current.values();
    if values.retired().is_empty() && values.awaiting_write_back().is_empty() {
        return Ok(current);
    }
    let mut edit = VersionEdit {
        released_value_tables: values.retired().keys().copied().collect(),
        ..Default::default()
    };
    for &n in values.awaiting_write_back() {
        let (count, bytes) = current
            .all_files()
            .flat_map(|(_, f)| f.dependence.iter())
            .filter(|d| d.value_table == n)
            .fold((0u64, 0u64), |(c, b), d| (c + d.count, b + d.bytes));
        let Some(t) = values.live(n) else { continue };
        if count == 0 {
            edit.deleted_value_tables.push(n);
            continue;
        }
        // What is not referenced is garbage; some may be counted already (the replay's flush
        // counts the handles it drops), so only the rest is added.
        let counted = values.garbage(n);
        let unreferenced = t
            .records
            .checked_sub(count)
            .filter(|&g| g >= counted.records)
            .ok_or_else(|| {
                Error::corruption(
                    value_table_file_name(n),
                    0,
                    format!(
                        "key tables hold {count} handles to a table of {} records, {} of them \
                         garbage",
                        t.records, counted.records
                    ),
                )
            })?;
        let garbage = crate::version::Garbage {
            records: unreferenced - counted.records,
            bytes: t
                .record_bytes
                .saturating_sub(bytes)
                .saturating_sub(counted.bytes),
        };
        if garbage.records > 0 {
            edit.value_garbage.push((n, garbage));
        }
        edit.write_back.push((n, false));
    }
    versions.log_and_apply(edit)
}

/// Fails the open early when direct I/O is asked for but the file system cannot do it: reads
/// are probed by opening `read_probe` (an existing file) with direct I/O, background writes
/// (when `writes`) by creating and removing a temporary file.
fn probe_direct_io(
    fs: &dyn FileSystem,
    dir: &Path,
    opts: &Options,
    read_probe: &str,
    writes: bool,
) -> Result<()> {
    if opts.use_direct_io_for_reads() {
        drop(fs.open_readable(&dir.join(read_probe), ReadFileOptions { direct: true })?);
    }
    if writes && opts.use_direct_io_for_background_writes() {
        let probe = dir.join("IO_PROBE.tmp");
        let r = fs.new_writable(
            &probe,
            WriteFileOptions {
                direct: true,
                buffer_size: 1 << 20,
            },
        );
        let _ = fs.remove_file(&probe);
        drop(r?);
    }
    Ok(())
}

/// Removes what an earlier run left behind: replayed WALs, superseded manifests, key tables no
/// version references (outputs of interrupted jobs), temporary files. Files whose names Gleaner
/// does not use are never touched.
fn remove_unreferenced_files(
    fs: &dyn FileSystem,
    dir: &Path,
    version: &Version,
    live_wal: u64,
    live_manifest: Option<u64>,
) -> Result<()> {
    let live_tables: std::collections::HashSet<u64> =
        version.all_files().map(|(_, f)| f.number).collect();
    for name in fs.list_dir(dir)? {
        let obsolete = match parse_file_name(&name) {
            Some(FileType::Wal(n)) => n < live_wal,
            Some(FileType::KeyTable(n)) => !live_tables.contains(&n),
            Some(FileType::ValueTable(n)) => version.values().live(n).is_none(),
            // Written by a flush or compaction whose edit never landed, or listed by no live
            // value table any more.
            Some(FileType::DropFile(n)) => !version.values().drop_files().contains_key(&n),
            Some(FileType::Manifest(n)) => Some(n) != live_manifest,
            Some(FileType::Temp) => true,
            // A policy's own: kept, whichever policy runs (a switch back finds what it learned;
            // the policy deletes its own through `PolicyFiles::remove`).
            Some(FileType::PolicyFile) => false,
            // Advisory, and kept when partitioning is off: a switch back starts from them.
            Some(FileType::Hotness) => false,
            Some(FileType::Current | FileType::Lock | FileType::Options) | None => false,
        };
        if obsolete {
            fs.remove_file(&dir.join(&name))?;
        }
    }
    fs.sync_dir(dir)
}

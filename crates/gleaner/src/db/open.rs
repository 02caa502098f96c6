//! Opening a database: directory and lock checks, options merge, manifest recovery, WAL replay,
//! a fresh manifest and WAL, and removal of files nothing references.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use super::background::table_options;
use super::{Counters, DbInner, DbState, ObsoleteTables, SnapshotList, SuperVersion, Wal};
use crate::batch::BatchOp;
use crate::cache::{BlockCache, TableCache, ValueTableCache};
use crate::compaction::{DropCounter, PickerConfig, flush_memtables};
use crate::error::{Error, Result};
use crate::filename::{
    CURRENT, FileType, LOCK, OPTIONS, manifest_file_name, parse_file_name, table_file_name,
    value_table_file_name, wal_file_name,
};
use crate::io::{
    CountedReader, CountedWriter, FileSystem, IoClass, IoStats, PathKind, ReadFileOptions,
    TrackedFs, WriteFileOptions, write_file_atomically,
};
use crate::key::ValueKind;
use crate::memtable::MemTable;
use crate::options::{Options, parse_options_file, render_options_file};
use crate::version::{RecoveredCounters, Version, VersionEdit, VersionSet, VersionSetConfig};
use crate::wal::{LogWriter, decode_wal_record, wal_reader};

pub(super) fn open(path: &Path, mut opts: Options) -> Result<Arc<DbInner>> {
    let fs = Arc::clone(opts.file_system());
    match fs.path_kind(path)? {
        Some(PathKind::File) => {
            return Err(Error::invalid(format!(
                "{} is a file; a database is a directory",
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
    let lock = fs.lock(&dir.join(LOCK))?;
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
    if !exists && !opts.create_if_missing() {
        return Err(Error::invalid(format!(
            "no database at {} (no CURRENT file) and option `create_if_missing` is false",
            path.display()
        )));
    }
    let io = Arc::new(IoStats::default());
    if exists && fs.path_kind(&dir.join(OPTIONS))?.is_some() {
        let bytes = fs.read_all(&dir.join(OPTIONS))?;
        io.record_read(IoClass::Manifest, bytes.len() as u64);
        for (name, value) in parse_options_file(OPTIONS, &bytes)? {
            opts.apply_saved(&name, &value)?;
        }
    }
    opts.validate()?;
    probe_direct_io(fs.as_ref(), &dir, &opts)?;

    let block_cache = (opts.block_cache_size() > 0)
        .then(|| Arc::new(BlockCache::new(opts.block_cache_size() as usize)));
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
    };
    let (mut versions, recovered) = if exists {
        let (vs, counters) = VersionSet::recover(cfg)?;
        (vs, Some(counters))
    } else {
        (VersionSet::new_empty(cfg), None)
    };
    let log_number = recovered.map_or(0, |c| c.log_number);
    let mut last_seq = recovered.map_or(0, |c| c.last_sequence);
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
            Some(FileType::KeyTable(n) | FileType::ValueTable(n) | FileType::Manifest(n)) => {
                next_file_number.fetch_max(n + 1, Ordering::SeqCst);
            }
            _ => {}
        }
    }
    wals.sort_unstable();
    if let Some(counters) = recovered {
        check_recovered_files(&names, versions.current(), &counters)?;
    }

    let counters = Counters::default();
    let table_opts = table_options(&opts);
    let mut edit = VersionEdit::default();
    let mut mem = Arc::new(MemTable::new(0));
    // Replayed memtables go straight to L0 tables (no snapshot exists yet, so shadowed versions
    // are dropped).
    // Tables written from the logs are deleted again unless the edit installing them lands.
    let mut recovered_files = crate::compaction::PendingFiles::new(Arc::clone(&fs), dir.clone());
    let mut flush_recovered = |mem: Arc<MemTable>, edit: &mut VersionEdit| -> Result<()> {
        let out = crate::compaction::OutputConfig {
            fs: Arc::clone(&fs),
            dir: dir.clone(),
            stats: Arc::clone(&io),
            table: table_opts,
            direct: opts.use_direct_io_for_background_writes(),
            class: IoClass::Flush,
            next_file_number: Arc::clone(&next_file_number),
            target_file_size: u64::MAX,
            max_grandparent_overlap: u64::MAX,
        };
        let values = crate::compaction::ValueOutputConfig {
            fs: Arc::clone(&fs),
            dir: dir.clone(),
            stats: Arc::clone(&io),
            class: IoClass::Flush,
            next_file_number: Arc::clone(&next_file_number),
            target_size: opts.value_table_size(),
            index_compression: opts.compression(),
            direct: opts.use_direct_io_for_background_writes(),
        };
        // Recovery has no hotness yet: replayed values go to default-class tables.
        let separation = Some((values, opts.min_separated_value_size(), None));
        let (done, _) = flush_memtables(
            &[mem],
            Vec::new(),
            out,
            separation,
            &mut DropCounter::default(),
        )?;
        edit.new_tables.extend(done.key_tables);
        edit.new_value_tables.extend(done.value_tables);
        recovered_files.absorb(done.pending);
        Ok(())
    };
    for &number in &wals {
        let name = wal_file_name(number);
        let file = fs.open_readable(&dir.join(&name), ReadFileOptions::default())?;
        let mut reader = wal_reader(
            CountedReader::new(file, Arc::clone(&io)),
            name.clone(),
            IoClass::Wal,
            opts.wal_recovery_mode(),
        )?;
        while let Some((offset, record)) = reader.read_record()? {
            let Some(batch) = decode_wal_record(record, &name, offset)? else {
                continue;
            };
            let mut seq = batch.sequence();
            for op in batch.iter() {
                let op = op.map_err(|d| Error::corruption(&name, offset, d))?;
                match op {
                    BatchOp::Put { key, value } => mem.add(seq, ValueKind::Value, key, value),
                    BatchOp::Delete { key } => mem.add(seq, ValueKind::Deletion, key, &[]),
                }
                seq += 1;
            }
            last_seq = last_seq.max(seq - 1);
            Counters::add(&counters.recovered_records, 1);
            if mem.approximate_bytes() >= opts.memtable_size() {
                flush_recovered(mem, &mut edit)?;
                mem = Arc::new(MemTable::new(0));
            }
        }
        for region in reader.dropped() {
            Counters::add(&counters.recovered_dropped_bytes, region.len);
        }
    }
    if !mem.is_empty() {
        flush_recovered(mem, &mut edit)?;
    }

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
        Arc::clone(&io),
    )));
    fs.sync_dir(&dir)?;
    edit.log_number = Some(wal_number);
    edit.last_sequence = Some(last_seq);
    let version = versions.log_and_apply(edit)?;
    recovered_files.keep();
    write_file_atomically(
        fs.as_ref(),
        &dir,
        OPTIONS,
        render_options_file(&opts).as_bytes(),
        &io,
        IoClass::Manifest,
    )?;

    let live_manifest = versions.manifest_number();
    remove_unreferenced_files(fs.as_ref(), &dir, &version, wal_number, live_manifest)?;

    let mem = Arc::new(MemTable::new(wal_number));
    let picker = PickerConfig {
        num_levels,
        l0_compaction_trigger: opts.l0_compaction_trigger() as usize,
        level_base_size: opts.level_base_size(),
        level_multiplier: u64::from(opts.level_multiplier()),
        target_file_size: opts.key_table_size(),
    };
    let compact_pointers = (0..num_levels)
        .map(|l| versions.compact_pointer(l).map(<[u8]>::to_vec))
        .collect();
    let state = DbState {
        mem: Arc::clone(&mem),
        imm: VecDeque::new(),
        flush_claimed: 0,
        version: Arc::clone(&version),
        compact_pointers,
        running: Vec::new(),
        next_compaction_id: 0,
        gc_claimed: BTreeSet::new(),
        late_drops: BTreeMap::new(),
        gc_failed: BTreeSet::new(),
        compaction_failures: 0,
        compaction_retry_at: None,
        bg_error: None,
        shutting_down: false,
    };
    let gc_policy = crate::gc::policy_for(&opts);
    let drop_cache = opts.hotness_enabled().then(|| {
        Arc::new(crate::hotness::DropCache::new(
            usize::try_from(opts.drop_cache_bytes()).unwrap_or(usize::MAX),
        ))
    });
    let space = opts
        .space_budget()
        .map(super::space::SpaceControl::new)
        .transpose()?;
    let inner = Arc::new(DbInner {
        dir,
        opts,
        fs,
        io,
        block_cache,
        tables,
        values,
        picker,
        gc_policy,
        next_file_number,
        visible_seq: AtomicU64::new(last_seq),
        super_version: ArcSwap::from_pointee(SuperVersion {
            mem,
            imm: Vec::new(),
            version,
        }),
        snapshots: Arc::new(SnapshotList::default()),
        writers: Mutex::new(VecDeque::new()),
        writers_cv: Condvar::new(),
        wal: Mutex::new(Some(Wal { writer: wal_writer })),
        versions: Mutex::new(versions),
        state: Mutex::new(state),
        bg_cv: Condvar::new(),
        progress_cv: Condvar::new(),
        shutting_down: AtomicBool::new(false),
        foreground: AtomicUsize::new(0),
        disk,
        obsolete,
        counters,
        last_gc_error: Mutex::new(None),
        last_compaction_error: Mutex::new(None),
        threads: Mutex::new(Vec::new()),
        inline_turn: Mutex::new(()),
        lock: Mutex::new(Some(lock)),
        space,
        drop_cache,
    });
    inner.spawn_workers()?;
    // Compaction may be due right away (e.g. many L0 tables from replay).
    inner.bg_cv.notify_all();
    inner.run_inline_work();
    Ok(inner)
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
    for v in version.values().tables() {
        let name = value_table_file_name(v.number);
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

/// Fails the open early when direct I/O is asked for but the file system cannot do it.
fn probe_direct_io(fs: &dyn FileSystem, dir: &Path, opts: &Options) -> Result<()> {
    if opts.use_direct_io_for_reads() {
        drop(fs.open_readable(&dir.join(LOCK), ReadFileOptions { direct: true })?);
    }
    if opts.use_direct_io_for_background_writes() {
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
            Some(FileType::Manifest(n)) => Some(n) != live_manifest,
            Some(FileType::Temp) => true,
            Some(FileType::Current | FileType::Lock | FileType::Options) | None => false,
        };
        if obsolete {
            fs.remove_file(&dir.join(&name))?;
        }
    }
    fs.sync_dir(dir)
}

//! Policy `novkv`: flushes and compactions record the identity of every record whose handle they
//! drop (drop keys, in drop files attached by their own manifest edit), and GC tells garbage by
//! those alone: no index-tree lookup, nothing written back into the index tree.
//!
//! What is tested here: drop keys are exact (one per garbage record, naming the version); GC
//! performs no lookup (the `gc_lookup` I/O counters stay at zero) and writes no WAL record and no
//! key table; a snapshot held across compaction and GC reads what it read; drop keys that a
//! compaction attaches to a victim while its job runs are carried over to the job's outputs;
//! power lost at every step of a compaction that writes drop keys loses nothing and leaves no
//! garbage without its drop key (a redone compaction adds none twice); drop files of obsolete
//! tables are deleted by the job's own purge (inline) or the purge thread, orphans at open.

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;
mod rounds;
mod sim;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rounds::{KEYS, assert_reads, build, key, value};

use gleaner::io::{FaultFs, FaultOp, FaultRule, TornMode};
use gleaner::{Db, DbStats, GcPolicyKind, Options, ReadOptions};

fn options(fs: &FaultFs) -> Options {
    shared(fs)
        .with_gc_policy(GcPolicyKind::Novkv)
        .with_novkv_valid_threshold(0.9)
}

/// The options of every policy these tests run (`novkv`'s own come on top).
fn shared(fs: &FaultFs) -> Options {
    rounds::inline_options(fs)
}

fn assert_recount(db: &Db, ctx: &str) {
    rounds::assert_exact_garbage(db, ctx);
}

/// Every live table's drop keys identify exactly its garbage records (before any GC job, whose
/// outputs may share carried-over blocks).
fn assert_drop_keys_exact(s: &DbStats, ctx: &str) {
    for t in &s.values.per_table {
        assert_eq!(
            t.drop_keys, t.garbage_records,
            "{ctx}: table {} has {} drop keys for {} garbage records",
            t.number, t.drop_keys, t.garbage_records
        );
    }
}

fn io(s: &DbStats, class: &str) -> gleaner::io::IoCounters {
    s.io.get(class).copied().unwrap_or_default()
}

/// NovKV's own figure `name` (`stats().gc.policy_stats`), 0 when absent.
fn own(s: &DbStats, name: &str) -> u64 {
    s.gc.policy_stats.get(name).copied().unwrap_or(0)
}

fn drop_files(fs: &FaultFs, path: &Path) -> usize {
    use gleaner::io::FileSystem;
    fs.list_dir(path)
        .expect("list")
        .iter()
        .filter(|n| n.ends_with(".vdk"))
        .count()
}

#[test]
fn gc_tells_garbage_by_drop_keys_without_lookups_or_write_back() {
    let fs = FaultFs::new(1);
    let path = Path::new("/novkv");
    let db = Db::open(path, options(&fs)).expect("open");
    let latest = build(&db);
    let before = db.stats();
    let garbage = before.values.garbage_records;
    assert_eq!(
        garbage,
        u64::from(KEYS.div_ceil(3)),
        "one per overwritten key"
    );
    assert_eq!(
        before.values.drop_keys_written, garbage,
        "one drop key per garbage record, no more"
    );
    assert!(before.values.drop_files > 0 && drop_files(&fs, path) == before.values.drop_files);
    assert_drop_keys_exact(&before, "after compaction");
    let key_tables: Vec<usize> = before.levels.iter().map(|l| l.files).collect();

    let run = db.run_gc().expect("gc");
    let s = db.stats();
    assert!(run.jobs > 0, "{run:?}");
    assert_eq!(
        run.totals.records_dropped, garbage,
        "every garbage record, exactly"
    );
    assert_eq!(own(&s, "drop_key_answers"), garbage, "each by its drop key");
    let block_bytes = own(&s, "drop_key_bytes_read");
    assert!(block_bytes > 0);
    // No index lookup, and nothing written into the index tree: no WAL record, no key table.
    let lookups = io(&s, "gc_lookup");
    assert_eq!(
        (lookups.read_bytes, lookups.read_ops),
        (0, 0),
        "GC looked nothing up"
    );
    // The drop blocks are read as part of the victims, under `gc_index_read`.
    let index_reads = io(&s, "gc_index_read").read_bytes - io(&before, "gc_index_read").read_bytes;
    assert!(
        index_reads >= block_bytes,
        "{index_reads} bytes under gc_index_read, {block_bytes} of drop blocks"
    );
    assert_eq!(s.gc.index_bytes_read, io(&s, "gc_index_read").read_bytes);
    assert_eq!(
        io(&s, "wal").write_bytes,
        io(&before, "wal").write_bytes,
        "GC wrote nothing through the write path"
    );
    assert_eq!(
        s.levels.iter().map(|l| l.files).collect::<Vec<_>>(),
        key_tables,
        "GC wrote no key table"
    );
    assert_eq!(s.values.garbage_records, 0);
    // The victims' drop files went with them (deleted from disk at the latest by the next
    // open, checked below).
    assert_eq!(s.values.drop_files, 0);
    // Handles naming the collected tables resolve by key in the outputs.
    assert!(s.values.inheritance_records > 0);
    assert_reads(&db, &latest, "after GC");
    assert_recount(&db, "after GC");
    drop(db);
    let db = Db::open(path, options(&fs)).expect("reopen");
    assert_eq!(drop_files(&fs, path), 0, "drop files deleted from disk");
    assert_reads(&db, &latest, "after reopen");
    sim::check_recovered_state(db, path, &options(&fs), "after reopen");

    // The counter is not blind: the same database under `terarkdb` looks every record up.
    let fs = FaultFs::new(1);
    let path = Path::new("/terarkdb");
    let tdb = || {
        shared(&fs)
            .with_gc_policy(GcPolicyKind::Terarkdb)
            .with_gc_garbage_ratio(0.1)
    };
    let db = Db::open(path, tdb()).expect("open");
    build(&db);
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0);
    assert!(
        io(&db.stats(), "gc_lookup").read_ops > 0,
        "terarkdb's GC looks records up"
    );
}

/// A snapshot taken before the overwrites keeps the versions it reads out of every drop set:
/// compaction keeps them (so drops nothing), and GC copies them. Once the snapshot is released,
/// the next compaction drops them, with their drop keys, and GC collects them.
#[test]
fn a_snapshot_held_across_compaction_and_gc_reads_what_it_read() {
    let fs = FaultFs::new(2);
    let path = Path::new("/novkv-snapshot");
    let db = Db::open(path, options(&fs)).expect("open");
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    let snap = db.snapshot();
    for i in (0..KEYS).step_by(2) {
        db.put(key(i), value(i, 1)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert_eq!(
        s.values.garbage_records, 0,
        "the snapshot needs every old version"
    );
    assert_eq!(s.values.drop_keys_written, 0);
    // Make some garbage the snapshot does not need: keys 1, 5, 9, ... are overwritten twice
    // after it. Their round-2 table also holds keys 3, 7, 11, ..., which stay live, so it is
    // a GC victim rather than freed whole.
    for i in (1..KEYS).step_by(2) {
        db.put(key(i), value(i, 2)).expect("put");
    }
    db.flush().expect("flush");
    for i in (1..KEYS).step_by(4) {
        db.put(key(i), value(i, 3)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert!(s.values.garbage_records > 0);
    assert_drop_keys_exact(&s, "with the snapshot");
    db.run_gc().expect("gc");
    assert_eq!(
        own(&db.stats(), "drop_key_answers"),
        s.values.garbage_records
    );
    let ro = ReadOptions {
        snapshot: Some(&snap),
        ..Default::default()
    };
    for i in 0..KEYS {
        assert_eq!(
            db.get_with(key(i), &ro).expect("snapshot get"),
            Some(value(i, 0)),
            "the snapshot reads {} as before",
            key(i)
        );
    }
    assert_recount(&db, "with the snapshot");
    drop(snap);
    // Every round-0 version is garbage now: their table is freed by the compaction itself.
    let written = db.stats().values.drop_keys_written;
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert!(
        s.values.drop_keys_written > written,
        "the old versions' drop keys are written"
    );
    assert!(s.values.tables_freed_without_gc > 0, "{:?}", s.values);
    db.run_gc().expect("gc");
    for i in 0..KEYS {
        let want = match i {
            i if i % 4 == 1 => value(i, 3),
            i if i % 2 == 0 => value(i, 1),
            i => value(i, 2),
        };
        assert_eq!(db.get(key(i)).expect("get"), Some(want), "{}", key(i));
    }
    assert_eq!(db.stats().values.garbage_records, 0);
    assert_recount(&db, "after the snapshot");
    sim::check_recovered_state(db, path, &options(&fs), "after the snapshot");
}

/// A compaction that commits while a job runs attaches its drop keys to the job's victim; the
/// job copied those records (it did not know them as garbage), so its edit hands the blocks to
/// its outputs with the garbage. The next job must find every garbage record of the outputs by
/// its drop key (a missing one would make it look records up).
#[test]
fn drop_keys_attached_while_a_job_runs_carry_over_to_its_outputs() {
    let fs = FaultFs::new(3);
    let path = Path::new("/novkv-late");
    // The victims (valid rate 2/3) are collected, the output with the late garbage (7/8) not
    // yet: the reopen below lowers the bar for it.
    let db = Arc::new(Db::open(path, options(&fs).with_novkv_valid_threshold(0.8)).expect("open"));
    let mut latest = build(&db);
    // GC is held as it creates its first output, after it read its victims' drop keys.
    let gate = fs.add_gate(FaultOp::Create, Some(".vst"), 0);
    let gc = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.run_gc())
    };
    assert!(
        gate.wait_until_reached(Duration::from_secs(60)),
        "GC reaches its first output"
    );
    // Keys live in the victims (round 0, not overwritten), overwritten and compacted now.
    let late: Vec<u32> = (0..KEYS).filter(|i| i % 3 == 1).take(10).collect();
    for &i in &late {
        db.put(key(i), value(i, 5))
            .expect("overwrite while GC is held");
        latest[i as usize] = 5;
    }
    db.compact_range(None, None)
        .expect("compact while GC is held");
    gate.open();
    let first = gc.join().expect("gc thread").expect("gc");
    assert!(first.jobs > 0);
    let s = db.stats();
    assert_eq!(
        s.values.garbage_records,
        late.len() as u64,
        "the late drops are garbage of the outputs"
    );
    for t in s.values.per_table.iter().filter(|t| t.garbage_records > 0) {
        assert!(
            t.drop_keys >= t.garbage_records,
            "table {} got the late drop keys: {t:?}",
            t.number
        );
    }
    assert_reads(&db, &latest, "after the first job");
    assert_recount(&db, "after the first job");
    // The carried blocks are in the manifest: they survive reopens. (Every open starts a new
    // manifest from a snapshot of the version; the snapshot once left the drop blocks out, so
    // the first reopen still had them in memory and the second lost them.)
    drop(Arc::into_inner(db).expect("only handle"));
    let opts = options(&fs).with_novkv_valid_threshold(0.95);
    for _ in 0..2 {
        let db = Db::open(path, opts.clone()).expect("reopen");
        assert_eq!(
            db.stats()
                .values
                .per_table
                .iter()
                .map(|t| t.drop_keys)
                .sum::<u64>(),
            late.len() as u64,
            "the drop keys survive the reopen"
        );
        db.close().expect("close");
    }
    let db = Db::open(path, opts.clone()).expect("reopen");
    let second = db.run_gc().expect("second gc");
    assert_eq!(
        own(&db.stats(), "drop_key_answers"),
        late.len() as u64,
        "{second:?}"
    );
    assert_eq!(
        io(&db.stats(), "gc_lookup").read_ops,
        0,
        "the carried blocks name all the garbage: nothing looked up"
    );
    assert_eq!(db.stats().values.garbage_records, 0);
    assert_reads(&db, &latest, "after the second job");
    sim::check_recovered_state(db, path, &opts, "after the late drops");
}

/// The mutating operations the crash test tells apart.
const OP_KINDS: [FaultOp; 7] = [
    FaultOp::Create,
    FaultOp::Append,
    FaultOp::Flush,
    FaultOp::Sync,
    FaultOp::Rename,
    FaultOp::Remove,
    FaultOp::SyncDir,
];

/// The steps of recording drop keys the test must see: the drop file written and synced, its
/// directory entry made durable, and the compaction's manifest edit that attaches its blocks.
const DROP_KEY_STEPS: [(FaultOp, &str); 6] = [
    (FaultOp::Create, ".vdk"),
    (FaultOp::Append, ".vdk"),
    (FaultOp::Sync, ".vdk"),
    (FaultOp::SyncDir, "/novkv-crash"),
    (FaultOp::Append, "MANIFEST"),
    (FaultOp::Sync, "MANIFEST"),
];

/// Rules that never fire and only count, one per kind of operation, then one per step.
fn add_counting_rules(fs: &FaultFs) {
    let kinds = OP_KINDS.iter().map(|&op| (op, None));
    let steps = DROP_KEY_STEPS
        .iter()
        .map(|&(op, f)| (op, Some(f.to_string())));
    for (op, path_contains) in kinds.chain(steps) {
        fs.add_fault(FaultRule::counter(op, path_contains));
    }
}

#[test]
fn power_loss_at_every_step_of_recording_drop_keys_loses_nothing() {
    // Overwrites wait in L0 and the memtable; `compact_range` then flushes, compacts, writes the
    // drop file and installs it. Power is lost at each of its mutating operations in turn. After
    // recovery every value is there, the garbage accounting is exact, every table's drop keys
    // identify exactly its garbage (none lost, none added twice by the compaction that runs
    // again), and GC collects all of it by drop keys alone.
    let path = Path::new("/novkv-crash/db");
    let setup = |fs: &FaultFs| {
        let db = Db::open(path, options(fs)).expect("open");
        let mut latest = vec![0u32; KEYS as usize];
        for i in 0..KEYS {
            db.put(key(i), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        for i in (0..KEYS).step_by(3) {
            db.put(key(i), value(i, 1)).expect("put");
            latest[i as usize] = 1;
        }
        db.flush().expect("flush");
        for i in (0..KEYS).step_by(5) {
            db.put(key(i), value(i, 2)).expect("put");
            latest[i as usize] = 2;
        }
        // Synced, so the crash keeps every write (what the WAL holds is replayed).
        db.flush().expect("flush");
        add_counting_rules(fs);
        (db, latest)
    };
    let kinds = OP_KINDS.len();
    let fs = FaultFs::new(9);
    let (db, _) = setup(&fs);
    let before = fs.mutating_ops();
    db.compact_range(None, None).expect("fault-free compaction");
    let ops = fs.mutating_ops() - before;
    let all = fs.fault_rule_matches();
    assert!(db.stats().values.drop_keys_written > 0);
    drop(db);
    assert_eq!(all[..kinds].iter().sum::<u64>(), ops, "{all:?}");
    for (s, (op, file)) in DROP_KEY_STEPS.iter().enumerate() {
        assert!(all[kinds + s] > 0, "the compaction never {op:?} {file}");
    }
    let mut cases = 0;
    for at in 0..ops {
        for torn in [TornMode::None, TornMode::KeepPrefixWithGarbage] {
            let ctx = format!("power loss at mutating operation {at} of {ops}, torn {torn:?}");
            let fs = FaultFs::new(9);
            let (db, latest) = setup(&fs);
            fs.set_crash_after(at);
            let _ = db.compact_range(None, None);
            assert!(fs.is_frozen(), "{ctx}: power loss did not strike");
            drop(db);
            fs.crash(torn);
            let db = Db::open(path, options(&fs)).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            assert_reads(&db, &latest, &ctx);
            assert_recount(&db, &ctx);
            assert_drop_keys_exact(&db.stats(), &ctx);
            // The compaction runs again; then GC finds every garbage record by its drop key.
            db.compact_range(None, None)
                .unwrap_or_else(|e| panic!("{ctx}: compaction after recovery: {e}"));
            let s = db.stats();
            assert_drop_keys_exact(&s, &ctx);
            let garbage = s.values.garbage_records;
            assert!(garbage > 0, "{ctx}");
            let answered = own(&db.stats(), "drop_key_answers");
            let run = db
                .run_gc()
                .unwrap_or_else(|e| panic!("{ctx}: gc after recovery: {e}"));
            assert_eq!(
                own(&db.stats(), "drop_key_answers") - answered,
                garbage,
                "{ctx}: {run:?}"
            );
            assert_eq!(db.stats().values.garbage_records, 0, "{ctx}");
            assert_reads(&db, &latest, &ctx);
            sim::check_recovered_state(db, path, &options(&fs), &ctx);
            cases += 1;
        }
    }
    eprintln!("power loss struck in all {cases} cases");
}

/// Drop files go where obsolete tables go. With inline work the job's own turn deletes them:
/// after GC collected every table listing a block, none is left on disk before any reopen.
/// With the engine's threads the purge thread deletes them: a compaction that finds a table
/// entirely garbage frees it (no GC job), and its drop file goes with it. An orphan drop file
/// (written by a job whose edit never landed) is deleted at open like an orphan table.
#[test]
fn drop_files_of_obsolete_tables_are_purged_and_orphans_deleted_at_open() {
    use gleaner::io::FileSystem;

    // Inline: run_gc deletes the victims' drop files itself.
    let fs = FaultFs::new(4);
    let path = Path::new("/novkv-purge-inline");
    let db = Db::open(path, options(&fs)).expect("open");
    let latest = build(&db);
    assert!(drop_files(&fs, path) > 0, "the compaction wrote drop files");
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.drop_files, 0);
    assert_eq!(
        drop_files(&fs, path),
        0,
        "the collected tables' drop files are deleted before any reopen"
    );
    assert_reads(&db, &latest, "after GC");
    db.close().expect("close");

    // The engine's threads: only the purge thread deletes obsolete files here.
    let fs = FaultFs::new(5);
    let path = Path::new("/novkv-purge-threads");
    let threaded = options(&fs)
        .with_inline_background_work(false)
        .with_l0_compaction_trigger(2);
    let db = Db::open(path, threaded.clone()).expect("open");
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    // A third overwritten: the round-0 tables get drop keys (a drop file on disk).
    for i in (0..KEYS).step_by(3) {
        db.put(key(i), value(i, 1)).expect("put");
    }
    db.flush().expect("flush");
    let wait = |what: &str, done: &dyn Fn(&DbStats, usize) -> bool| {
        let start = std::time::Instant::now();
        loop {
            let s = db.stats();
            let on_disk = drop_files(&fs, path);
            let quiet = s.compaction.running == 0 && s.immutable_memtables == 0;
            if quiet && done(&s, on_disk) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what}: {on_disk} drop files on disk, {} listed, {} compactions",
                s.values.drop_files,
                s.compaction.compactions
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait("the first compaction", &|s, on_disk| {
        s.values.drop_files > 0 && on_disk == s.values.drop_files
    });
    // The rest overwritten: the round-0 tables become entirely garbage, the compaction frees
    // them, and their drop files are no longer listed by any table.
    for i in (0..KEYS).filter(|i| i % 3 != 0) {
        db.put(key(i), value(i, 2)).expect("put");
    }
    db.flush().expect("flush");
    // A second L0 table, so the trigger compacts them.
    db.put("zz", "filler").expect("put");
    db.flush().expect("flush");
    wait("the second compaction", &|s, on_disk| {
        s.values.tables_freed_without_gc > 0 && s.values.drop_files == 0 && on_disk == 0
    });
    db.close().expect("close");

    // An orphan drop file beside the database is deleted at open; listed ones stay.
    let db = Db::open(path, options(&fs)).expect("reopen");
    for i in (0..KEYS).step_by(2) {
        db.put(key(i), value(i, 3)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let listed = db.stats().values.drop_files;
    assert!(listed > 0);
    db.close().expect("close");
    fs.set_file_bytes(&path.join("999999.vdk"), b"not a drop file".to_vec())
        .expect("orphan");
    assert_eq!(drop_files(&fs, path), listed + 1);
    let db = Db::open(path, options(&fs)).expect("reopen");
    assert_eq!(
        drop_files(&fs, path),
        listed,
        "the orphan is deleted, the listed drop files kept"
    );
    assert!(
        !fs.list_dir(path)
            .expect("list")
            .iter()
            .any(|n| n == "999999.vdk")
    );
    db.close().expect("close");
}

/// A database that ran `terarkdb` before `novkv` holds garbage without drop keys, and drop
/// blocks that inheritance records attach to several tables (a TerarkDB job cut its outputs at
/// `value_table_size`, and a block of a collected table goes to every output that may hold one
/// of its keys), so drop keys can seem to cover garbage they do not name. GC must stay correct
/// and live there: it once never picked a table whose garbage the drop keys did not cover, and
/// put the output of a job fooled by shared blocks out of reach until the next open, so that
/// garbage was never collected. Now a job whose drop keys cannot name all the garbage looks up
/// the records they do not name, and the output of a fooled job is collected that way by the
/// next job.
#[test]
fn garbage_without_drop_keys_and_shared_blocks_are_collected() {
    let fs = FaultFs::new(6);
    let path = Path::new("/novkv-mixed");
    let base = || options(&fs).with_value_table_size(8 << 10);
    let terarkdb = shared(&fs)
        .with_value_table_size(8 << 10)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_gc_garbage_ratio(0.3);
    let db = Db::open(path, terarkdb).expect("open");
    let mut latest = vec![0u32; KEYS as usize];
    let mut put = |db: &Db, i: u32, round: u32| {
        db.put(key(i), value(i, round)).expect("put");
        latest[i as usize] = round;
    };
    for i in 0..KEYS {
        put(&db, i, 0);
    }
    db.flush().expect("flush");
    // Every other key of the first half overwritten: the four tables holding it reach the
    // ratio, and one job collects them into outputs cut at 8 KiB. One key of the last table
    // too: it stays below the ratio, with garbage that has no drop key.
    for i in (0..KEYS / 2).step_by(2) {
        put(&db, i, 1);
    }
    put(&db, KEYS - 3, 1);
    db.compact_range(None, None).expect("compact");
    let run = db.run_gc().expect("terarkdb gc");
    assert!(run.jobs > 0);
    // No compaction since: the handles of the first half still name the collected tables.
    assert!(db.stats().values.inheritance_records > 0);
    db.close().expect("close");

    // Now `novkv`. Two keys of the last collected table overwritten and compacted: their drop
    // keys are one block, placed through the inheritance records on both outputs that hold
    // one of them.
    let db = Db::open(path, base()).expect("reopen as novkv");
    for i in [59, 63] {
        put(&db, i, 3);
    }
    db.compact_range(None, None).expect("compact");
    let mut tables: Vec<gleaner::stats::ValueTableStats> = db
        .stats()
        .values
        .per_table
        .into_iter()
        .filter(|t| t.garbage_records > 0)
        .collect();
    let valid = |t: &gleaner::stats::ValueTableStats| {
        (t.records - t.garbage_records) as f64 / t.records as f64
    };
    tables.sort_by(|a, b| valid(a).total_cmp(&valid(b)));
    // The scenario: the lowest valid rate is a table whose drop-key count exceeds its garbage
    // (the shared block), the next one holds garbage without drop keys; together their keys
    // seem to cover their garbage, so a job collecting both alone is fooled.
    let (shared, bare) = (&tables[0], &tables[1]);
    assert!(shared.drop_keys > shared.garbage_records, "{tables:#?}");
    assert!(
        bare.drop_keys == 0 && bare.garbage_records > 0,
        "{tables:#?}"
    );
    assert!(
        shared.drop_keys + bare.drop_keys >= shared.garbage_records + bare.garbage_records,
        "{tables:#?}"
    );
    let first_job = shared.file_bytes + bare.file_bytes;
    assert!(
        tables[2..].iter().all(|t| t.file_bytes > 0) && tables.len() > 2,
        "a third table with garbage, left to a later job: {tables:#?}"
    );
    assert_recount(&db, "before novkv gc");
    db.close().expect("close");
    // The first job takes exactly those two tables.
    let novkv = base()
        .with_novkv_valid_threshold(0.95)
        .with_gc_max_input_size(first_job);
    let db = Db::open(path, novkv.clone()).expect("reopen");
    let run = db.run_gc().expect("novkv gc");
    let s = db.stats();
    assert_eq!(
        s.values.garbage_records, 0,
        "every garbage record collected: {run:?} {:#?}",
        s.values.per_table
    );
    assert!(
        io(&s, "gc_lookup").read_ops > 0,
        "records without drop keys were looked up"
    );
    assert_reads(&db, &latest, "after novkv gc");
    assert_recount(&db, "after novkv gc");
    sim::check_recovered_state(db, path, &novkv, "after novkv gc");
}

/// Keys `build` left at round 0 (never overwritten): after GC, their handles name collected
/// tables, so a read finds the record through inheritance.
fn unchanged(latest: &[u32]) -> Vec<u32> {
    (0..KEYS).filter(|&i| latest[i as usize] == 0).collect()
}

/// `build`, then GC: the handles of the unchanged keys name collected tables.
fn build_and_collect(db: &Db) -> Vec<u32> {
    let latest = build(db);
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0);
    latest
}

fn ops(db: &Db) -> gleaner::stats::OperationStats {
    db.stats().operations
}

/// Selective handle updating (NovKV §III-D): a read that found its record through inheritance
/// writes an alias through the write path, and the next read of the key goes straight to the
/// record. Aliases never make records garbage: compacting them records no drop key and counts
/// nothing, and keeps their owners; when the keys are overwritten, each owner becomes garbage
/// exactly once. Garbage matches the recount all along.
#[test]
fn a_read_through_inheritance_writes_an_alias_and_the_next_read_needs_no_search() {
    let fs = FaultFs::new(11);
    let path = Path::new("/novkv-alias");
    let db = Db::open(path, options(&fs)).expect("open");
    let mut latest = build_and_collect(&db);
    let stale = unchanged(&latest);
    let before = ops(&db);
    let wal_before = io(&db.stats(), "wal").write_bytes;
    assert_reads(&db, &latest, "first reads after GC");
    let first = ops(&db);
    assert_eq!(
        first.gets_via_inheritance - before.gets_via_inheritance,
        stale.len() as u64,
        "every unchanged key is found through inheritance"
    );
    // Inline work: the reads only queued their updates; the next fixed point writes them.
    assert_eq!(first.handle_updates_written, 0);
    db.flush().expect("a fixed point");
    let updated = ops(&db);
    assert_eq!(updated.handle_updates_written, stale.len() as u64);
    assert_eq!(updated.handle_updates_skipped, 0);
    assert_eq!(updated.handle_updates_dropped, 0);
    assert!(
        io(&db.stats(), "wal").write_bytes > wal_before,
        "the aliases went through the write path"
    );
    assert_reads(&db, &latest, "second reads");
    let second = ops(&db);
    assert_eq!(
        second.gets_via_inheritance, updated.gets_via_inheritance,
        "no second read goes through inheritance"
    );
    assert_eq!(
        second.handle_updates_written,
        updated.handle_updates_written
    );
    let r = db.recount_garbage().expect("recount");
    assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
    assert_eq!(r.aliases, stale.len() as u64, "{r:?}");

    // Compacting the aliases (flushed with the memtable) drops nothing and counts nothing.
    let s = db.stats();
    db.compact_range(None, None).expect("compact");
    let after = db.stats();
    assert_eq!(after.values.garbage_records, s.values.garbage_records);
    assert_eq!(after.values.drop_keys_written, s.values.drop_keys_written);
    let r = db.recount_garbage().expect("recount");
    assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
    assert_eq!(r.aliases, stale.len() as u64, "the aliases are kept: {r:?}");
    assert_reads(&db, &latest, "after compacting the aliases");
    assert_eq!(
        ops(&db).gets_via_inheritance,
        second.gets_via_inheritance,
        "reads still need no search"
    );

    // Every key overwritten: each owner becomes garbage once, aliases add nothing.
    let garbage = after.values.garbage_records;
    let written = after.values.drop_keys_written;
    for i in 0..KEYS {
        db.put(key(i), value(i, 7)).expect("put");
        latest[i as usize] = 7;
    }
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert_eq!(
        s.values.drop_keys_written - written,
        u64::from(KEYS),
        "one drop key per overwritten owner"
    );
    assert!(s.values.garbage_records > garbage || s.values.tables_freed_without_gc > 0);
    let r = db.recount_garbage().expect("recount");
    assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
    assert_eq!(r.aliases, 0, "{r:?}");
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.garbage_records, 0);
    assert_reads(&db, &latest, "after the overwrites");
    sim::check_recovered_state(db, path, &options(&fs), "after the aliases");
}

/// A full memtable does not stop handle updates: the update switches it, as any writer would
/// when that needs no wait. Otherwise, once a memtable filled up while only reads came (the
/// aliases themselves fill it), every later update would find no room, the queue would fill,
/// and every read after it would keep paying the search (the bench's second read run once
/// wrote no alias at all). Here the write that is the fixed point leaves its memtable full.
#[test]
fn handle_updates_switch_a_full_memtable() {
    let fs = FaultFs::new(13);
    let path = Path::new("/novkv-full-memtable");
    let db = Db::open(path, options(&fs)).expect("open");
    let latest = build_and_collect(&db);
    let stale = unchanged(&latest);
    db.flush().expect("an empty memtable before the reads");
    assert_reads(&db, &latest, "reads after GC");
    let queued = ops(&db);
    assert_eq!(queued.handle_updates_written, 0, "inline: only queued");
    // Fills the empty memtable past its size in one write; its fixed point then writes the
    // queued updates.
    let filler = vec![b'f'; 1 << 20];
    db.put("zz-filler", &filler).expect("put");
    let after = ops(&db);
    assert_eq!(
        after.handle_updates_written,
        stale.len() as u64,
        "{after:?}"
    );
    assert_eq!(after.handle_updates_dropped, 0, "{after:?}");
    assert_reads(&db, &latest, "second reads");
    assert_eq!(
        ops(&db).gets_via_inheritance,
        after.gets_via_inheritance,
        "no second read goes through inheritance"
    );
    assert_eq!(db.get("zz-filler").expect("get"), Some(filler));
    assert_recount(&db, "after the updates");
}

/// The update is conditioned on the key's newest version still being the one the read found:
/// a user write that lands between the read and the update wins, deterministically (inline
/// work writes the queued updates after the write that triggers it).
#[test]
fn a_user_write_between_the_read_and_its_handle_update_wins() {
    let fs = FaultFs::new(12);
    let path = Path::new("/novkv-alias-race");
    let db = Db::open(path, options(&fs)).expect("open");
    let mut latest = build_and_collect(&db);
    let stale = unchanged(&latest);
    let (raced, other) = (stale[0], stale[1]);
    assert_eq!(
        db.get(key(raced)).expect("get"),
        Some(value(raced, 0)),
        "read through inheritance, update queued"
    );
    let before = ops(&db);
    assert_eq!(
        before.handle_updates_written + before.handle_updates_skipped,
        0
    );
    // The user's write commits first; the fixed point after it then tries the update.
    db.put(key(raced), value(raced, 9)).expect("put");
    latest[raced as usize] = 9;
    let after = ops(&db);
    assert_eq!(after.handle_updates_skipped, 1, "{after:?}");
    assert_eq!(after.handle_updates_written, 0, "{after:?}");
    assert_eq!(db.get(key(raced)).expect("get"), Some(value(raced, 9)));
    // Without a write in between, the same sequence writes the update.
    db.get(key(other)).expect("get");
    db.put("unrelated", "x").expect("put");
    assert_eq!(ops(&db).handle_updates_written, 1);
    assert_reads(&db, &latest, "after the race");
    db.compact_range(None, None).expect("compact");
    assert_reads(&db, &latest, "after compaction");
    assert_recount(&db, "after the race");
    sim::check_recovered_state(db, path, &options(&fs), "after the race");
}

/// Aliases are ordinary WAL records: after a crash they are replayed (synced) or lost (not
/// synced), and either way every value reads back and garbage matches the recount; later
/// overwrites make each owner garbage once.
#[test]
fn aliases_survive_a_crash_or_are_lost_without_harm() {
    for synced in [true, false] {
        let ctx = format!("aliases synced: {synced}");
        let fs = FaultFs::new(13);
        let path = Path::new("/novkv-alias-crash");
        let db = Db::open(path, options(&fs)).expect("open");
        let mut latest = build_and_collect(&db);
        let stale = unchanged(&latest);
        // Synced, so that everything before the aliases survives the crash.
        db.sync_wal().expect("sync");
        assert_reads(&db, &latest, &ctx);
        db.put("unrelated", "x")
            .expect("the fixed point writes the aliases");
        assert_eq!(ops(&db).handle_updates_written, stale.len() as u64, "{ctx}");
        if synced {
            db.sync_wal().expect("sync");
        }
        // Power lost now: nothing the close would write reaches the disk.
        fs.set_crash_after(0);
        drop(db);
        fs.crash(TornMode::None);
        let db = Db::open(path, options(&fs)).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let r = db.recount_garbage().expect("recount");
        assert!(r.mismatches.is_empty(), "{ctx}: {:#?}", r.mismatches);
        assert_eq!(
            r.aliases,
            if synced { stale.len() as u64 } else { 0 },
            "{ctx}: {r:?}"
        );
        assert_reads(&db, &latest, &ctx);
        let via = ops(&db).gets_via_inheritance;
        if synced {
            assert_eq!(via, 0, "{ctx}: the replayed aliases spare the search");
        } else {
            assert_eq!(
                via,
                stale.len() as u64,
                "{ctx}: lost aliases, searched again"
            );
        }
        db.compact_range(None, None).expect("compact");
        assert_recount(&db, &ctx);
        let written = db.stats().values.drop_keys_written;
        for i in 0..KEYS {
            db.put(key(i), value(i, 8)).expect("put");
            latest[i as usize] = 8;
        }
        db.compact_range(None, None).expect("compact");
        assert_eq!(
            db.stats().values.drop_keys_written - written,
            u64::from(KEYS),
            "{ctx}: one drop key per owner"
        );
        assert_recount(&db, &ctx);
        db.run_gc().expect("gc");
        assert_eq!(db.stats().values.garbage_records, 0, "{ctx}");
        assert_reads(&db, &latest, &ctx);
        sim::check_recovered_state(db, path, &options(&fs), &ctx);
    }
}

/// Snapshots across handle updates: one taken before the update still reads its version after
/// it; one taken after reads the alias, and while it lives a compaction that meets an overwrite
/// of the key keeps the alias and, behind it in the same snapshot stripe, its owner (the record
/// stays referenced, no drop key); once it is released, the owner becomes garbage once.
#[test]
fn snapshots_held_across_handle_updates_read_their_versions() {
    let fs = FaultFs::new(14);
    let path = Path::new("/novkv-alias-snapshot");
    // No value cache: it would serve the owner's value by its handle, and the test tells which
    // version a read found by whether it searched.
    let db = Db::open(path, options(&fs).with_value_cache_share(0.0)).expect("open");
    let mut latest = build_and_collect(&db);
    let stale = unchanged(&latest);
    let pair = [stale[0], stale[1]];
    let read_at = |snap: &gleaner::Snapshot, i: u32| {
        db.get_with(
            key(i),
            &ReadOptions {
                snapshot: Some(snap),
                ..Default::default()
            },
        )
        .expect("snapshot get")
    };
    let early = db.snapshot();
    assert_reads(&db, &latest, "reads");
    db.put("unrelated", "x")
        .expect("the fixed point writes the aliases");
    assert_eq!(ops(&db).handle_updates_written, stale.len() as u64);
    let late = db.snapshot();
    for i in pair {
        db.put(key(i), value(i, 4)).expect("overwrite");
        latest[i as usize] = 4;
    }
    // Owner and alias give the same value; which one a read found shows in the searches: the
    // owner names a collected table, the alias the table holding the record.
    let searches = || ops(&db).gets_via_inheritance;
    for i in pair {
        let before = searches();
        assert_eq!(read_at(&early, i), Some(value(i, 0)), "early, {}", key(i));
        assert_eq!(searches(), before + 1, "early reads the owner, {}", key(i));
        assert_eq!(read_at(&late, i), Some(value(i, 0)), "late, {}", key(i));
        assert_eq!(searches(), before + 1, "late reads the alias, {}", key(i));
    }
    drop(early);
    let written = db.stats().values.drop_keys_written;
    let garbage = db.stats().values.garbage_records;
    db.compact_range(None, None).expect("compact");
    for i in pair {
        assert_eq!(read_at(&late, i), Some(value(i, 0)), "late, {}", key(i));
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i, 4)));
    }
    let s = db.stats();
    assert_eq!(
        s.values.drop_keys_written, written,
        "the late snapshot still reads the old records"
    );
    assert_eq!(s.values.garbage_records, garbage);
    let r = db.recount_garbage().expect("recount");
    assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
    assert_eq!(r.aliases, stale.len() as u64, "{r:?}");
    db.run_gc().expect("gc");
    for i in pair {
        assert_eq!(read_at(&late, i), Some(value(i, 0)), "late after GC");
    }
    let garbage = db.stats().values.garbage_records;
    drop(late);
    db.compact_range(None, None).expect("compact");
    assert_eq!(
        db.stats().values.drop_keys_written - written,
        2,
        "each overwritten owner once, its alias never"
    );
    assert_eq!(
        db.stats().values.garbage_records - garbage,
        2,
        "the two owners' records, counted once"
    );
    assert_recount(&db, "after the snapshots");
    assert_reads(&db, &latest, "after the snapshots");
    sim::check_recovered_state(db, path, &options(&fs), "after the snapshots");
}

/// Values written once (`separate_at=write`): a value overwritten in its own memtable is garbage
/// of the segment the flush seals, and the flush's drop key for it joins that segment in the
/// same edit, so GC still needs no lookup.
#[test]
fn drop_keys_of_a_flush_join_the_segments_it_seals() {
    let fs = FaultFs::new(8);
    let path = Path::new("/novkv-write");
    let db = Db::open(
        path,
        options(&fs)
            .with_separate_at(gleaner::SeparateAt::Write)
            .with_memtable_size(1 << 20),
    )
    .expect("open");
    let value = |i: u32, round: u32| vec![b'a' + (round % 26) as u8; 300 + i as usize];
    for round in 0..2 {
        for i in 0..60u32 {
            if round == 0 || i % 3 == 0 {
                db.put(format!("k{i:03}"), value(i, round)).expect("put");
            }
        }
    }
    db.flush().expect("flush");
    let s = db.stats();
    assert_eq!(s.values.garbage_records, 20, "one per overwritten key");
    assert_drop_keys_exact(&s, "after the flush");
    db.run_gc().expect("gc");
    let s = db.stats();
    let lookups = io(&s, "gc_lookup");
    assert_eq!(
        (lookups.read_bytes, lookups.read_ops),
        (0, 0),
        "GC looked nothing up"
    );
    for i in 0..60u32 {
        let want = value(i, if i % 3 == 0 { 1 } else { 0 });
        assert_eq!(db.get(format!("k{i:03}")).expect("get"), Some(want));
    }
    assert_recount(&db, "after GC");
}

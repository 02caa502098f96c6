//! Key-value separation and garbage collection: large values live in value tables, overwrites
//! and deletes become garbage that compaction counts and GC reclaims, and no value is ever lost
//! or wrong along the way.

use std::path::Path;
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{Db, GcPolicyKind, Options, ReadOptions, Switch};

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(64 << 10)
        .with_key_table_size(16 << 10)
        .with_level_base_size(64 << 10)
        .with_value_table_size(64 << 10)
        .with_min_separated_value_size(256)
        .with_gc_garbage_ratio(0.2)
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    v.resize(1000 + (i as usize % 7) * 100, b'a' + (round % 26) as u8);
    v
}

fn assert_recount_clean(db: &Db) {
    let r = db.recount_garbage().expect("recount");
    assert!(
        r.mismatches.is_empty(),
        "garbage accounting drifted: {:#?}",
        r.mismatches
    );
}

/// Loads `n` values, then overwrites the keys `overwrite` selects, and checks that compaction
/// plus GC bring the bytes on disk within 1.3× of the live data with every value intact.
fn reclaim(dir: &Path, overwrite: fn(u32) -> bool) -> (gleaner::DbStats, gleaner::GcRunStats) {
    reclaim_with(dir, overwrite, |o| o)
}

/// [`reclaim`] with options adjusted by `tune` (a GC policy or switch).
fn reclaim_with(
    dir: &Path,
    overwrite: fn(u32) -> bool,
    tune: fn(Options) -> Options,
) -> (gleaner::DbStats, gleaner::GcRunStats) {
    let fs = FaultFs::new(1);
    // GC only when asked, so the test sees what `run_gc` does; no workers, so no background
    // job still holds (and keeps on disk) a table GC collected when the bytes are measured.
    let opts = || {
        tune(
            options(&fs)
                .with_gc_threads(0)
                .with_inline_background_work(true),
        )
    };
    let db = Db::open(dir, opts()).expect("open");
    let n = 600u32;
    let latest = |i: u32| {
        if overwrite(i) {
            value(i, 1)
        } else {
            value(i, 0)
        }
    };
    for i in 0..n {
        db.put(format!("key{i:05}"), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    let s = db.stats();
    assert!(
        s.values.tables > 0 && s.values.records == u64::from(n),
        "values separated: {:?}",
        s.values
    );
    for i in (0..n).filter(|&i| overwrite(i)) {
        db.put(format!("key{i:05}"), value(i, 1))
            .expect("overwrite");
    }
    // Compaction finds the overwritten handles and counts their records as garbage; tables
    // that are all garbage go at once, GC reclaims the rest.
    db.compact_range(None, None).expect("compact");
    assert_recount_clean(&db);
    let run = db.run_gc().expect("gc");
    assert_recount_clean(&db);
    let after = db.stats();
    let live: u64 = (0..n).map(|i| latest(i).len() as u64 + 8).sum();
    let on_disk = after.space.disk_bytes;
    assert!(
        on_disk as f64 <= 1.3 * live as f64,
        "on disk {on_disk} > 1.3 × live {live}; gc {run:?}; stats {:?}",
        after.values
    );
    for i in 0..n {
        assert_eq!(
            db.get(format!("key{i:05}")).expect("get"),
            Some(latest(i)),
            "key{i:05}"
        );
    }
    let scanned: Vec<_> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("item"))
        .collect();
    assert_eq!(scanned.len(), n as usize);
    drop(db);
    // The accounting survives a reopen unchanged.
    let db = Db::open(dir, opts()).expect("reopen");
    assert_eq!(db.stats().values.per_table, after.values.per_table);
    assert_recount_clean(&db);
    for i in (0..n).step_by(7) {
        assert_eq!(db.get(format!("key{i:05}")).expect("get"), Some(latest(i)));
    }
    (after, run)
}

#[test]
fn overwriting_everything_frees_whole_tables_without_gc() {
    let (stats, _) = reclaim(Path::new("/all"), |_| true);
    assert!(
        stats.values.tables_freed_without_gc > 0,
        "{:?}",
        stats.values
    );
}

#[test]
fn overwriting_part_of_every_table_is_reclaimed_by_gc() {
    let (stats, run) = reclaim(Path::new("/part"), |i| i % 3 != 0);
    assert!(
        run.jobs > 0 && run.totals.records_dropped > 0,
        "GC ran: {run:?}"
    );
    assert_eq!(stats.gc.jobs, run.jobs);
    assert!(
        stats.gc.records_written > 0 && stats.gc.value_bytes_read > 0,
        "{:?}",
        stats.gc
    );
}

#[test]
fn lazy_read_reads_only_the_values_of_live_records() {
    let overwrite = |i: u32| !i.is_multiple_of(3);
    let (full, full_run) = reclaim_with(Path::new("/full"), overwrite, |o| {
        o.with_gc_policy(GcPolicyKind::Terarkdb)
    });
    // No gap is read through, so the lazy job reads exactly the records it copies.
    let (lazy, lazy_run) = reclaim_with(Path::new("/lazy"), overwrite, |o| {
        o.with_gc_policy(GcPolicyKind::Terarkdb)
            .with_gc_lazy_read(Switch::On)
            .with_gc_read_gap(0)
    });
    assert!(!full.gc.lazy_read && lazy.gc.lazy_read);
    let (f, l) = (&full_run.totals, &lazy_run.totals);
    assert!(
        f.records_dropped > 0 && l.records_dropped > 0,
        "{f:?} {l:?}"
    );
    // Full read: every record examined is read; lazy read: only the records it copies (a
    // third of them here). Background compactions make the victims differ between the two
    // databases, so compare bytes per record, not totals.
    let per_examined = f.bytes_read as f64 / f.records_read as f64;
    let per_copied = l.bytes_read as f64 / l.records_written as f64;
    assert!(
        (per_copied / per_examined - 1.0).abs() < 0.15,
        "lazy read {per_copied:.0} B per copied record, full read {per_examined:.0} B per examined record"
    );
    assert!(
        (l.bytes_read as f64) < 0.5 * per_examined * l.records_read as f64,
        "lazy read skipped the garbage: {l:?}"
    );
    assert_eq!(full.gc.value_bytes_read, full_run.totals.bytes_read);
    assert_eq!(lazy.gc.value_bytes_read, lazy_run.totals.bytes_read);
    assert!(full.gc.index_bytes_read > 0 && lazy.gc.index_bytes_read > 0);
    assert!(f.index_bytes_read > 0 && l.index_bytes_read > 0);
}

/// GC's validity checks with mixed key tables read data blocks full of small inline values;
/// with index-decoupled tables and GetKey they read handle blocks, which are a small part of
/// the tables and stay in the block cache's high-priority pool, so the checks read far less.
#[test]
fn index_decoupled_lookups_read_handle_blocks_not_data_blocks() {
    /// Incompressible small values (LZ4 would shrink repeated bytes to nothing).
    fn small(i: u32, j: u32) -> Vec<u8> {
        let mut x = u64::from(i) << 32 | u64::from(j) | 1;
        (0..180)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }
    fn run(dir: &str, decoupled: Switch) -> gleaner::DbStats {
        let fs = FaultFs::new(3);
        // A cache far smaller than the small values (about 360 KB) but larger than the
        // handles (about 10 KB).
        let opts = options(&fs)
            .with_gc_threads(0)
            .with_block_cache_size(64 << 10)
            .with_block_size(4 << 10)
            .with_gc_policy(GcPolicyKind::Terarkdb)
            .with_index_decoupled_tables(decoupled);
        let db = Db::open(Path::new(dir), opts).expect("open");
        // Per key: a large (separated) value, and many small inline neighbours between the
        // large keys, as in Mixed-8K; then a third of the large values overwritten, so every
        // value table is a third garbage.
        let round = |i: u32| u32::from(i.is_multiple_of(3));
        for i in 0..300u32 {
            db.put(format!("key{i:05}/big"), value(i, 0)).expect("put");
            for j in 0..6 {
                db.put(format!("key{i:05}/small{j}"), small(i, j))
                    .expect("put");
            }
        }
        db.flush().expect("flush");
        for i in (0..300u32).filter(|i| round(*i) == 1) {
            db.put(format!("key{i:05}/big"), value(i, 1)).expect("put");
        }
        db.compact_range(None, None).expect("compact");
        let run = db.run_gc().expect("gc");
        assert!(run.totals.records_read > 0, "{dir}: GC ran: {run:?}");
        for i in (0..300u32).step_by(13) {
            assert_eq!(
                db.get(format!("key{i:05}/big")).expect("get"),
                Some(value(i, round(i)))
            );
        }
        assert_recount_clean(&db);
        db.stats()
    }
    let mixed = run("/mixed", Switch::Off);
    let decoupled = run("/decoupled", Switch::On);
    assert!(!mixed.gc.index_decoupled && decoupled.gc.index_decoupled);
    // Handle blocks live in the block cache's high-priority pool; mixed tables have none.
    assert!(
        decoupled.cache.high_priority_hits > 0 && decoupled.cache.high_priority_usage_bytes > 0,
        "{:?}",
        decoupled.cache
    );
    assert_eq!(
        mixed.cache.high_priority_usage_bytes, 0,
        "{:?}",
        mixed.cache
    );
    let per_record =
        |s: &gleaner::DbStats| s.gc.lookup_bytes_read as f64 / s.gc.records_read as f64;
    assert!(
        per_record(&decoupled) < 0.25 * per_record(&mixed),
        "lookup bytes per record: decoupled {:.0}, mixed {:.0}",
        per_record(&decoupled),
        per_record(&mixed)
    );
}

/// With hotness-aware writing, keys that keep being overwritten end up in hot value tables and
/// the rest in cold ones, at flush and at GC; GC's hot and cold outputs overlap in key range,
/// and every handle still finds its record through them.
#[test]
fn hotness_aware_writing_separates_hot_and_cold_values() {
    let fs = FaultFs::new(11);
    let opts = options(&fs)
        .with_gc_threads(0)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_hotness_aware_writes(Switch::On);
    let db = Db::open(Path::new("/hot"), opts).expect("open");
    let keys = 600u32;
    let hot = |i: u32| i.is_multiple_of(4);
    let mut latest = vec![0u32; keys as usize];
    for i in 0..keys {
        db.put(format!("key{i:05}"), value(i, 0)).expect("put");
    }
    // The hot quarter is overwritten round after round; compaction drops the old versions and
    // so teaches the DropCache which keys are hot.
    for round in 1..6u32 {
        for i in (0..keys).filter(|&i| hot(i)) {
            db.put(format!("key{i:05}"), value(i, round)).expect("put");
            latest[i as usize] = round;
        }
        db.compact_range(None, None).expect("compact");
    }
    let s = db.stats();
    // Scavenger reports its DropCache under its own name.
    let cache = |figure: &str| s.gc.policy_stats.get(figure).copied();
    assert!(
        cache("drop_cache_entries") > Some(0) && cache("drop_cache_inserts") > Some(0),
        "{:?}",
        s.gc.policy_stats
    );
    let classes = |s: &gleaner::DbStats, class: u32| {
        s.values
            .per_table
            .iter()
            .filter(|t| t.class == class)
            .count()
    };
    assert!(
        classes(&s, 1) > 0 && classes(&s, 2) > 0,
        "flushes wrote hot and cold tables: {:?}",
        s.values.per_table
    );
    // Half of the hot keys are overwritten once more (the hot tables get garbage, and GC copies
    // the other half, hot keys, to hot outputs), and a third of the cold keys once (the cold
    // tables get garbage, and GC copies the remaining cold keys to cold outputs).
    for i in (0..keys).filter(|&i| i.is_multiple_of(8) || (!hot(i) && i.is_multiple_of(3))) {
        db.put(format!("key{i:05}"), value(i, 9)).expect("put");
        latest[i as usize] = 9;
    }
    db.compact_range(None, None).expect("compact");
    let run = db.run_gc().expect("gc");
    assert!(run.totals.records_written > 0, "{run:?}");
    // Classes 1 and 2 are the router's hot and cold.
    let by_class = run.totals.bytes_written_by_class;
    assert!(
        by_class[1] > 0 && by_class[2] > 0,
        "GC wrote hot and cold outputs: {run:?}"
    );
    assert_eq!(run.totals.bytes_written, by_class.iter().sum::<u64>());
    let named = db.stats().gc.bytes_written_by_class;
    assert_eq!(
        (named.get("hot"), named.get("cold")),
        (Some(&by_class[1]), Some(&by_class[2])),
        "stats name the classes"
    );
    assert_recount_clean(&db);
    for i in 0..keys {
        assert_eq!(
            db.get(format!("key{i:05}")).expect("get"),
            Some(value(i, latest[i as usize])),
            "key{i:05}"
        );
    }
    // Handles still naming the collected tables resolve through overlapping hot and cold
    // children, also after a reopen.
    drop(db);
    let db = Db::open(
        Path::new("/hot"),
        options(&fs)
            .with_gc_threads(0)
            .with_gc_policy(GcPolicyKind::Terarkdb)
            .with_hotness_aware_writes(Switch::On),
    )
    .expect("reopen");
    assert_recount_clean(&db);
    let n = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .count();
    assert_eq!(n, keys as usize);
}

#[test]
fn snapshots_and_iterators_keep_their_values_across_gc() {
    let fs = FaultFs::new(2);
    let db = Db::open("/snap-gc", options(&fs).with_gc_threads(0)).expect("open");
    let n = 300u32;
    let key = |i: u32| format!("key{i:05}");
    for i in 0..n {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    // Odd keys are overwritten before the snapshot: their first records become garbage.
    for i in (0..n).filter(|i| i % 2 == 1) {
        db.put(key(i), value(i, 1)).expect("overwrite");
    }
    let snap = db.snapshot();
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    // Even keys are overwritten after it: their first records are garbage to everyone but the
    // snapshot, and must survive GC of the tables they share with real garbage.
    for i in (0..n).filter(|i| i % 2 == 0) {
        db.put(key(i), value(i, 2)).expect("overwrite");
    }
    db.compact_range(None, None).expect("compact");
    let run = db.run_gc().expect("gc");
    assert!(
        run.jobs > 0 && run.totals.records_written > 0,
        "GC moved the snapshot's records: {run:?}"
    );
    assert!(db.stats().values.inheritance_records > 0);
    assert_recount_clean(&db);
    let at = |i: u32| if i % 2 == 1 { value(i, 1) } else { value(i, 0) };
    for i in 0..n {
        let old = db
            .get_with(key(i), &ReadOptions::default().at(&snap))
            .expect("get at snapshot");
        assert_eq!(old, Some(at(i)), "{} at the snapshot", key(i));
    }
    // The iterator opened before the GC reads the tables it started with.
    it.seek_to_first().expect("seek");
    let mut seen = 0u32;
    while it.valid() {
        assert_eq!(it.value(), at(seen).as_slice(), "{}", key(seen));
        seen += 1;
        it.next().expect("next");
    }
    assert_eq!(seen, n);
    drop(it);
    drop(snap);
    // Without the snapshot, compaction drops the even keys' first versions and GC reclaims them.
    db.compact_range(None, None).expect("compact");
    db.run_gc().expect("gc");
    assert_recount_clean(&db);
    let now = |i: u32| if i % 2 == 1 { value(i, 1) } else { value(i, 2) };
    for i in 0..n {
        assert_eq!(db.get(key(i)).expect("get"), Some(now(i)), "{}", key(i));
    }
    // GC ran to quiescence: no table is left at or above the victim ratio.
    for t in db.stats().values.per_table {
        assert!(
            (t.garbage_bytes as f64) < 0.2 * t.record_bytes as f64,
            "table {} still {} / {} garbage",
            t.number,
            t.garbage_bytes,
            t.record_bytes
        );
    }
}

#[test]
fn a_damaged_value_table_is_corruption_never_a_wrong_value() {
    let fs = FaultFs::new(3);
    let dir = Path::new("/corrupt-vst");
    let db = Db::open(dir, options(&fs)).expect("open");
    for i in 0..50u32 {
        db.put(format!("key{i:05}"), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let vst = fs
        .list_files()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".vst"))
        .expect("a value table");
    let size = fs.file_bytes(&vst).expect("bytes").len() as u64;
    let name = vst
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    for offset in (0..size).step_by((size / 30).max(1) as usize) {
        fs.corrupt_byte(&vst, offset, 0x08).expect("corrupt");
        let db = Db::open(dir, options(&fs).with_gc_threads(0)).expect("open");
        let mut detected = false;
        for i in 0..50u32 {
            match db.get(format!("key{i:05}")) {
                Ok(v) => assert_eq!(v, Some(value(i, 0)), "flip at {offset}"),
                Err(gleaner::Error::Corruption { file, .. }) => {
                    assert_eq!(file, name, "flip at {offset}");
                    detected = true;
                }
                Err(e) => panic!("flip at {offset}: unexpected error {e}"),
            }
        }
        let scan: Result<Vec<_>, _> = db
            .range(.., &ReadOptions::default())
            .expect("range")
            .collect();
        match scan {
            Ok(items) => {
                for (i, (_, v)) in items.iter().enumerate() {
                    assert_eq!(v, &value(i as u32, 0), "flip at {offset}");
                }
            }
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                detected = true;
            }
        }
        // Records are read by handle; a flip in the index or footer shows when the table is
        // opened, which every read above does.
        assert!(detected, "flip at {offset} of {name} went unnoticed");
        drop(db);
        fs.corrupt_byte(&vst, offset, 0x08).expect("restore");
    }
}

#[test]
fn scans_read_ahead_within_a_value_table() {
    let fs = FaultFs::new(4);
    let scan_reads = |readahead: u64, depth: u32| {
        let dir = format!("/readahead-{readahead}-{depth}");
        let db = Db::open(
            dir.as_str(),
            options(&fs)
                .with_value_table_size(1 << 20)
                .with_memtable_size(1 << 20)
                .with_value_readahead_size(readahead)
                .with_scan_prefetch_depth(depth),
        )
        .expect("open");
        for i in 0..200u32 {
            db.put(format!("key{i:05}"), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        assert_eq!(db.stats().values.tables, 1);
        let before = db.stats().io["user_read"];
        let mut n = 0;
        for item in db.range(.., &ReadOptions::default()).expect("range") {
            item.expect("item");
            n += 1;
        }
        assert_eq!(n, 200);
        let after = db.stats().io["user_read"];
        (
            after.read_ops - before.read_ops,
            after.read_bytes - before.read_bytes,
        )
    };
    let (without, record_bytes) = scan_reads(0, 0);
    let (with, _) = scan_reads(1 << 20, 0);
    let (prefetched, _) = scan_reads(1 << 20, 16);
    let (adjacent, adjacent_bytes) = scan_reads(0, 16);
    assert!(
        without >= 200,
        "one read per record without read-ahead: {without}"
    );
    assert!(
        with * 10 < without,
        "read-ahead coalesces record reads: {with} vs {without}"
    );
    assert!(
        prefetched * 10 < without,
        "so does the scan prefetch: {prefetched} vs {without}"
    );
    // Without read-ahead, the prefetch reads adjacent records together, and nothing else.
    assert!(
        adjacent * 4 < without && adjacent_bytes <= record_bytes,
        "{adjacent} reads of {adjacent_bytes} bytes; one per record: {record_bytes} bytes"
    );
}

#[test]
fn the_separation_threshold_decides_what_moves() {
    let fs = FaultFs::new(5);
    let count_tables = |dir: &str, threshold: u64, values: &[Vec<u8>]| {
        let db =
            Db::open(dir, options(&fs).with_min_separated_value_size(threshold)).expect("open");
        for (i, v) in values.iter().enumerate() {
            db.put(format!("key{i:03}"), v).expect("put");
        }
        db.flush().expect("flush");
        for (i, v) in values.iter().enumerate() {
            assert_eq!(db.get(format!("key{i:03}")).expect("get").as_ref(), Some(v));
        }
        db.stats().values.records
    };
    let values: Vec<Vec<u8>> = vec![vec![], vec![1; 10], vec![2; 300], vec![3; 3000]];
    assert_eq!(
        count_tables("/t0", 0, &values),
        4,
        "0 separates every value, even empty ones"
    );
    assert_eq!(
        count_tables("/t300", 300, &values),
        2,
        "at least the threshold"
    );
    assert_eq!(
        count_tables("/tmax", 1 << 40, &values),
        0,
        "above the value cap: none"
    );
}

#[test]
fn gc_options_are_checked_at_open() {
    let fs = FaultFs::new(6);
    for (opts, name) in [
        (options(&fs).with_gc_garbage_ratio(1.5), "gc_garbage_ratio"),
        (options(&fs).with_gc_garbage_ratio(-0.5), "gc_garbage_ratio"),
        (options(&fs).with_value_table_size(0), "value_table_size"),
    ] {
        match Db::open("/bad-gc", opts) {
            Err(gleaner::Error::InvalidArgument(m)) => assert!(m.contains(name), "{m}"),
            other => panic!("expected an error naming {name}, got {other:?}"),
        }
    }
    let mut o = options(&fs);
    let e = o
        .set("gc_policy", "titanic")
        .expect_err("unknown policy")
        .to_string();
    assert!(e.contains("gc_policy") && e.contains("terarkdb"), "{e}");
    o.set("gc_policy", "terarkdb").expect("known policy");
    let db = Db::open("/good-gc", o).expect("open");
    assert_eq!(db.stats().gc.policy, "terarkdb");
}

/// Point reads are counted by how they found their value: `gets_separated` for a value handle,
/// and of those `gets_via_inheritance` when the handle names a table GC collected (the record
/// is looked up in the table it was copied to). A compaction rewrites such handles, after which
/// reads go straight to the record again.
#[test]
fn reads_through_inheritance_are_counted_until_compaction_rewrites_the_handles() {
    let fs = FaultFs::new(12);
    // No key table rewritten for its stale handles behind the test's back: only its own
    // compactions rewrite them.
    let db = Db::open(
        "/inherited-reads",
        options(&fs).with_gc_threads(0).with_stale_handle_share(0.0),
    )
    .expect("open");
    let n = 300u32;
    for i in 0..n {
        db.put(format!("key{i:05}"), value(i, 0)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    // Half the records become garbage; GC copies the rest, whose handles still name the
    // collected tables until the next compaction.
    for i in (0..n).filter(|i| i.is_multiple_of(2)) {
        db.put(format!("key{i:05}"), value(i, 1))
            .expect("overwrite");
    }
    // Compaction drops the old versions, which counts their records as garbage.
    db.compact_range(None, None).expect("compact");
    let gc = db.run_gc().expect("gc");
    assert!(gc.jobs > 0, "GC collected tables");
    let reads = |db: &Db| {
        let before = db.stats().operations;
        for i in 0..n {
            let round = u32::from(i.is_multiple_of(2));
            assert_eq!(
                db.get(format!("key{i:05}")).expect("get"),
                Some(value(i, round))
            );
        }
        let after = db.stats().operations;
        (
            after.gets_separated - before.gets_separated,
            after.gets_via_inheritance - before.gets_via_inheritance,
        )
    };
    let (separated, inherited) = reads(&db);
    assert_eq!(separated, u64::from(n), "every value is separated");
    // The odd keys were copied by GC; the even ones were rewritten into new tables.
    assert!(
        inherited > 0 && inherited <= u64::from(n / 2),
        "reads of copied records go through inheritance: {inherited}"
    );
    db.compact_range(None, None).expect("compact");
    let (separated, inherited) = reads(&db);
    assert_eq!(separated, u64::from(n));
    assert_eq!(inherited, 0, "compaction rewrote every stale handle");
}

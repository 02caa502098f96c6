//! Key-value separation and garbage collection: large values live in value tables, overwrites
//! and deletes become garbage that compaction counts and GC reclaims, and no value is ever lost
//! or wrong along the way.

use std::path::Path;
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{Db, Options, ReadOptions};

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
    let fs = FaultFs::new(1);
    // GC only when asked, so the test sees what `run_gc` does.
    let opts = || options(&fs).with_gc_threads(0);
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

//! GC reclaims the records of shadowed versions early: a version the index tree still holds but
//! that a newer version hides from every reader (no snapshot between them) is garbage, and GC
//! drops it whether it learns this from the index tree or, with hotness-aware writing, from the
//! DropCache alone. The stale handles left in the tree are never resolved, compaction drops them
//! later without counting garbage twice, and `gleaner check` and the recount accept them.

use std::path::Path;
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::tools::check_db;
use gleaner::{Db, GcPolicyKind, Options, ReadOptions, Switch};

const KEYS: u32 = 300;

fn options(fs: &FaultFs, hotness: Switch) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(1 << 20)
        .with_key_table_size(16 << 10)
        .with_level_base_size(64 << 10)
        .with_value_table_size(64 << 10)
        .with_min_separated_value_size(256)
        .with_gc_garbage_ratio(0.2)
        .with_gc_threads(0)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_hotness_aware_writes(hotness)
        // The handles GC leaves stale stay so until the tests' own compactions.
        .with_stale_handle_share(0.0)
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    v.resize(1000 + (i as usize % 7) * 100, b'a' + (round % 26) as u8);
    v
}

/// The round of key `i`'s newest version once [`build`] has run.
fn latest(i: u32) -> u32 {
    if i % 2 == 1 {
        3
    } else if i.is_multiple_of(3) {
        1
    } else {
        0
    }
}

/// Round 0 writes every key; round 1 overwrites every third key and is compacted, so the first
/// tables show a third of their records as garbage and GC picks them. Then `between` runs (it
/// may take a snapshot), and rounds 2 and 3 overwrite the odd keys and are flushed but not
/// compacted: the odd keys' round-0 versions stay in the index tree, shadowed. (Round 2 is
/// dropped by the flush itself, which tells the DropCache the odd keys' newest sequence
/// numbers.)
fn build<T>(db: &Db, between: impl FnOnce(&Db) -> T) -> T {
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for i in (0..KEYS).filter(|i| i.is_multiple_of(3)) {
        db.put(key(i), value(i, 1)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let kept = between(db);
    for round in [2, 3] {
        for i in (0..KEYS).filter(|i| i % 2 == 1) {
            db.put(key(i), value(i, round)).expect("put");
        }
    }
    db.flush().expect("flush");
    kept
}

fn assert_latest(db: &Db) {
    for i in 0..KEYS {
        assert_eq!(
            db.get(key(i)).expect("get"),
            Some(value(i, latest(i))),
            "{}",
            key(i)
        );
    }
}

/// Round-0 records GC copies when it reclaims shadowed versions: the even keys round 1 left
/// alone.
fn live_round0() -> u64 {
    (0..KEYS)
        .filter(|&i| i % 2 == 0 && !i.is_multiple_of(3))
        .count() as u64
}

/// Odd keys round 1 left alone: their round-0 versions are shadowed but still in the tree.
fn shadowed_round0() -> u64 {
    (0..KEYS)
        .filter(|&i| i % 2 == 1 && !i.is_multiple_of(3))
        .count() as u64
}

/// The validity checks Scavenger's DropCache answered so far (its own figure in `stats()`;
/// none without hotness).
fn drop_cache_answers(db: &Db) -> u64 {
    db.stats()
        .gc
        .policy_stats
        .get("drop_cache_answers")
        .copied()
        .unwrap_or(0)
}

fn reclaims_shadowed_versions(dir: &Path, hotness: Switch) {
    let fs = FaultFs::new(7);
    let db = Db::open(dir, options(&fs, hotness)).expect("open");
    build(&db, |_| ());
    let before = db.stats();
    assert_eq!(before.values.garbage_records, u64::from(KEYS / 3));
    let answers_before = drop_cache_answers(&db);
    let run = db.run_gc().expect("gc");
    // Only the round-0 tables show garbage, so only they are collected: of their records the
    // counted garbage and the shadowed versions are dropped, the rest copied.
    assert_eq!(run.totals.records_read, u64::from(KEYS), "{run:?}");
    assert_eq!(run.totals.records_written, live_round0(), "{run:?}");
    let by_cache = if hotness == Switch::On {
        // Every dropped key has a newer version the DropCache learned of: round 1's from the
        // compaction, rounds 2 and 3 from the flush.
        run.totals.records_dropped
    } else {
        0
    };
    assert_eq!(
        drop_cache_answers(&db) - answers_before,
        by_cache,
        "{run:?}"
    );
    assert_latest(&db);
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    assert_eq!(recount.reclaimed_early, shadowed_round0());
    drop(db);

    let report = check_db(dir, &options(&fs, hotness)).expect("check");
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.handles_reclaimed_early, shadowed_round0());

    // Compaction meets the stale handles next to their newer versions and drops them, counting
    // no garbage for records that are gone.
    let db = Db::open(dir, options(&fs, hotness)).expect("reopen");
    let garbage_before = db.stats().values.garbage_records;
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert_eq!(s.values.drops_reclaimed_early, shadowed_round0());
    assert_eq!(s.values.unresolved_drops, 0);
    // The odd multiples of 3: their round-1 records, flushed after the round-0 tables, become
    // garbage now.
    let round1_shadowed = (0..KEYS).filter(|&i| i % 6 == 3).count() as u64;
    assert_eq!(s.values.garbage_records, garbage_before + round1_shadowed);
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    assert_eq!(recount.reclaimed_early, 0);
    assert_latest(&db);
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("item"))
        .collect();
    assert_eq!(scanned.len(), KEYS as usize);
    for (i, (k, v)) in (0..KEYS).zip(&scanned) {
        assert_eq!((k.as_slice(), v), (key(i).as_bytes(), &value(i, latest(i))));
    }
}

#[test]
fn gc_reclaims_shadowed_versions_found_by_lookup() {
    reclaims_shadowed_versions(Path::new("/shadowed-lookup"), Switch::Off);
}

#[test]
fn gc_reclaims_shadowed_versions_the_drop_cache_knows_without_lookup() {
    reclaims_shadowed_versions(Path::new("/shadowed-dropcache"), Switch::On);
}

/// A snapshot taken between a version and the one that shadows it still reads the old one: GC
/// keeps it, whether it asks the tree or the DropCache.
fn snapshot_keeps_shadowed_versions(dir: &Path, hotness: Switch) {
    let fs = FaultFs::new(8);
    let db = Db::open(dir, options(&fs, hotness)).expect("open");
    let snap = build(&db, Db::snapshot);
    let answers_before = drop_cache_answers(&db);
    let run = db.run_gc().expect("gc");
    assert_eq!(
        run.totals.records_written,
        live_round0() + shadowed_round0()
    );
    // The DropCache answers only for the even multiples of 3: the snapshot reads above their
    // newer version (round 1). The odd keys' newer version (round 3) is above the snapshot.
    let by_cache = if hotness == Switch::On {
        (0..KEYS).filter(|&i| i % 6 == 0).count() as u64
    } else {
        0
    };
    assert_eq!(
        drop_cache_answers(&db) - answers_before,
        by_cache,
        "{run:?}"
    );
    assert_latest(&db);
    for i in 0..KEYS {
        let at_snap = if i.is_multiple_of(3) { 1 } else { 0 };
        assert_eq!(
            db.get_with(key(i), &ReadOptions::default().at(&snap))
                .expect("get at snapshot"),
            Some(value(i, at_snap)),
            "{} at the snapshot",
            key(i)
        );
    }
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    assert_eq!(recount.reclaimed_early, 0);
    // Released, the snapshot no longer protects them: the next compaction drops them as plain
    // garbage, which GC then reclaims.
    drop(snap);
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert_eq!(s.values.unresolved_drops, 0);
    assert_eq!(s.values.drops_reclaimed_early, 0);
    db.run_gc().expect("gc");
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    assert_latest(&db);
}

#[test]
fn a_snapshot_keeps_shadowed_versions_from_lookup_gc() {
    snapshot_keeps_shadowed_versions(Path::new("/snap-lookup"), Switch::Off);
}

#[test]
fn a_snapshot_keeps_shadowed_versions_from_the_drop_cache() {
    snapshot_keeps_shadowed_versions(Path::new("/snap-dropcache"), Switch::On);
}

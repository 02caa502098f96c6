//! Expiring keys under every GC policy (issue 26): reads honour expiry whatever the policy does
//! with the records (a titan write-back and a novkv alias carry the key's expiry, so neither
//! brings an expired key back), compaction drops the expired versions and counts their
//! values' garbage exactly (`recount_garbage`), GC then reclaims it, and a reopen reads the same.

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;
#[allow(dead_code, reason = "this test reads its own state, not the rounds'")]
mod rounds;

use std::path::Path;
use std::sync::Arc;

use rounds::{KEYS, key, value};

use gleaner::expiry::ManualClock;
use gleaner::io::FaultFs;
use gleaner::{Db, Options};

/// The clock's start.
const T0: u64 = 5_000_000;

/// Keys `[EXPIRING.start, EXPIRING.end)` are written with a TTL of `TTL_MS` in round 1; the
/// others are written in round 1 and again in round 2, so half of round 1's records are
/// garbage and every policy's GC collects their table before the expiry, moving the expiring
/// records.
const EXPIRING: std::ops::Range<u32> = 30..90;
const TTL_MS: u64 = 1_000;

/// The round of key `i`'s latest value.
fn latest(i: u32) -> u32 {
    if EXPIRING.contains(&i) { 1 } else { 2 }
}

/// Every key at time `now`: the expiring ones read nothing once expired, the others their
/// latest value.
fn assert_reads(db: &Db, expired: bool, ctx: &str) {
    let mut live = 0;
    for i in 0..KEYS {
        let want = (!(expired && EXPIRING.contains(&i))).then(|| value(i, latest(i)));
        live += usize::from(want.is_some());
        assert_eq!(
            db.get(key(i))
                .unwrap_or_else(|e| panic!("{ctx}: {}: {e}", key(i))),
            want,
            "{ctx}: {}",
            key(i)
        );
    }
    let keys = db
        .range(.., &gleaner::ReadOptions::default())
        .expect("range")
        .count();
    assert_eq!(keys, live, "{ctx}: scan");
}

/// Writes the rounds (see [`EXPIRING`]), every round flushed and compacted.
fn write_rounds(db: &Db) {
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in 0..KEYS {
        if EXPIRING.contains(&i) {
            db.put_with_ttl(key(i), value(i, 1), TTL_MS).expect("put");
        } else {
            db.put(key(i), value(i, 1)).expect("put");
        }
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in (0..KEYS).filter(|i| !EXPIRING.contains(i)) {
        db.put(key(i), value(i, 2)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
}

fn run(variant: &str, opts: Options, clock: &ManualClock) {
    let path = Path::new("/expiry").join(variant);
    let db = Db::open(&path, opts.clone()).expect("open");
    write_rounds(&db);
    assert_reads(&db, false, &format!("{variant}: before the expiry"));
    // GC before the expiry: a write-back or an alias carries the expiry with the handle.
    let moved_before = db.stats().gc.records_written;
    for _ in 0..3 {
        db.run_gc().expect("gc");
    }
    if common::runs_gc_jobs(variant) {
        assert!(
            db.stats().gc.records_written >= moved_before + EXPIRING.len() as u64,
            "{variant}: GC moved the expiring records: {:?}",
            db.stats().gc
        );
    }
    // Reads of the present, so a policy that updates handles on read writes its aliases.
    assert_reads(
        &db,
        false,
        &format!("{variant}: collected before the expiry"),
    );
    db.flush().expect("flush");
    rounds::assert_exact_garbage(&db, &format!("{variant}: collected before the expiry"));
    clock.advance(TTL_MS);
    let ctx = format!("{variant}: expired");
    assert_reads(&db, true, &ctx);
    // Compaction drops the expired versions: their records are garbage, counted exactly.
    db.compact_range(None, None).expect("compact");
    let ctx = format!("{variant}: expired, compacted");
    assert_reads(&db, true, &ctx);
    rounds::assert_exact_garbage(&db, &ctx);
    let stats = db.stats();
    assert!(
        stats.compaction.dropped_expired >= EXPIRING.len() as u64,
        "{ctx}: {:?}",
        stats.compaction
    );
    for _ in 0..4 {
        db.run_gc().expect("gc");
    }
    let ctx = format!("{variant}: expired, collected");
    assert_reads(&db, true, &ctx);
    rounds::assert_exact_garbage(&db, &ctx);
    let stats = db.stats();
    let live = stats.values.records - stats.values.garbage_records;
    let live_keys = u64::from(KEYS) - EXPIRING.len() as u64;
    assert_eq!(live, live_keys, "{ctx}: one live record per key left");
    if common::runs_gc_jobs(variant) {
        assert_eq!(stats.values.garbage_records, 0, "{ctx}: reclaimed");
    }
    db.close().expect("close");
    drop(db);
    let db = Db::open(&path, opts).expect("reopen");
    assert_reads(&db, true, &format!("{variant}: reopened"));
    rounds::assert_exact_garbage(&db, &format!("{variant}: reopened"));
}

/// GC after the expiry, before any compaction dropped the expired versions: every policy's
/// GC judges their records dead (the dense index keeps each record's expiry), though an entry
/// still names them; the garbage stays exact, and compaction then drops the entries without
/// counting anything.
fn run_gc_after_expiry(variant: &str, opts: Options, clock: &ManualClock) {
    let path = Path::new("/expiry-gc").join(variant);
    let db = Db::open(&path, opts.clone()).expect("open");
    write_rounds(&db);
    clock.advance(TTL_MS);
    let ctx = format!("{variant}: expired");
    assert_reads(&db, true, &ctx);
    for _ in 0..3 {
        db.run_gc().expect("gc");
    }
    let ctx = format!("{variant}: expired, collected");
    assert_reads(&db, true, &ctx);
    let recount = rounds::assert_exact_garbage(&db, &ctx);
    let stats = db.stats();
    if common::runs_gc_jobs(variant) {
        assert_eq!(
            stats.gc.records_expired,
            EXPIRING.len() as u64,
            "{ctx}: judged dead though still named: {:?}",
            stats.gc
        );
        assert_eq!(recount.expired, EXPIRING.len() as u64, "{ctx}: {recount:?}");
    }
    db.compact_range(None, None).expect("compact");
    let ctx = format!("{variant}: expired, collected, compacted");
    assert_reads(&db, true, &ctx);
    rounds::assert_exact_garbage(&db, &ctx);
    let stats = db.stats();
    let live = stats.values.records - stats.values.garbage_records;
    assert_eq!(live, u64::from(KEYS) - EXPIRING.len() as u64, "{ctx}");
    db.close().expect("close");
    drop(db);
    let db = Db::open(&path, opts).expect("reopen");
    assert_reads(&db, true, &format!("{variant}: reopened"));
    rounds::assert_exact_garbage(&db, &format!("{variant}: reopened"));
}

/// Runs `scenario` under every GC variant, each on a file system of `fs_seed` with a clock of
/// its own.
fn under_every_policy(fs_seed: u64, scenario: fn(&str, Options, &ManualClock)) {
    let fs = FaultFs::new(fs_seed);
    for (variant, tune) in common::gc_variants() {
        let clock = Arc::new(ManualClock::new(T0));
        let opts = tune(
            rounds::inline_options(&fs)
                .with_gc_garbage_ratio(0.2)
                .with_clock(clock.clone()),
        );
        scenario(&variant, opts, &clock);
    }
}

#[test]
fn every_policy_judges_expired_records_dead_though_an_entry_names_them() {
    under_every_policy(27, run_gc_after_expiry);
}

#[test]
fn every_policy_drops_expired_keys_counts_their_garbage_and_never_resurrects_them() {
    under_every_policy(26, run);
}

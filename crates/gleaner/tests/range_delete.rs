//! Range deletes under every GC policy (issue 25): GC treats a record a visible range tombstone
//! deletes as dead (the index lookup answers `Deleted`; the drop events of the compaction that
//! drops its handle feed the DropCache and the drop keys), a write-back never brings a deleted
//! key back, the garbage the delete makes is counted exactly (`recount_garbage`), and GC then
//! reclaims it; reads stay exact through flushes, compactions, GC and a reopen.

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;
#[allow(dead_code, reason = "this test reads its own state, not the rounds'")]
mod rounds;

use std::path::Path;

use rounds::{KEYS, key, value};

use gleaner::io::FaultFs;
use gleaner::{Db, Options};

/// Keys `[0, OVERWRITTEN)` are overwritten (round 1), making garbage GC picks its victim by.
const OVERWRITTEN: u32 = 30;

/// Keys `[DELETED.start, DELETED.end)` are range-deleted.
const DELETED: std::ops::Range<u32> = 30..90;

/// Every key: deleted ones read nothing, the others their latest value.
fn assert_reads(db: &Db, ctx: &str) {
    for i in 0..KEYS {
        let round = u32::from(i < OVERWRITTEN);
        let want = (!DELETED.contains(&i)).then(|| value(i, round));
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
    assert_eq!(keys, (KEYS - DELETED.len() as u32) as usize, "{ctx}: scan");
}

fn run(variant: &str, opts: Options) {
    let path = Path::new("/range-delete").join(variant);
    let db = Db::open(&path, opts.clone()).expect("open");
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in 0..OVERWRITTEN {
        db.put(key(i), value(i, 1)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    // The round-0 table: a quarter of its records garbage, above the GC threshold.
    db.delete_range(key(DELETED.start), key(DELETED.end))
        .expect("delete_range");
    assert_reads(&db, &format!("{variant}: tombstone in the memtable"));
    // GC while the tombstone is only in an L0 table above the values, which still hold their
    // handles: whatever a policy decides about a deleted record, no read may see it again (a
    // titan write-back is conditional on the key still naming the record).
    db.flush().expect("flush");
    db.run_gc().expect("gc");
    let ctx = format!("{variant}: GC below the flushed tombstone");
    assert_reads(&db, &ctx);
    rounds::assert_exact_garbage(&db, &ctx);
    let stats = db.stats();
    let live_keys = u64::from(KEYS) - DELETED.len() as u64;
    if common::runs_gc_jobs(variant) && variant != "novkv" {
        // The index lookup answers `Deleted` for a covered key: GC copied only the records
        // of the keys left (and round 1's are in their own table).
        assert_eq!(
            stats.values.records, live_keys,
            "{ctx}: the deleted records were not copied: {:?}",
            stats.values
        );
    }
    // Compaction drops the covered handles: their records are garbage, counted exactly, and GC
    // reclaims them.
    db.compact_range(None, None).expect("compact");
    let ctx = format!("{variant}: compacted");
    assert_reads(&db, &ctx);
    rounds::assert_exact_garbage(&db, &ctx);
    let stats = db.stats();
    assert_eq!(stats.range_tombstones, 0, "{ctx}: dropped at the bottom");
    for _ in 0..4 {
        db.run_gc().expect("gc");
    }
    let ctx = format!("{variant}: collected");
    assert_reads(&db, &ctx);
    rounds::assert_exact_garbage(&db, &ctx);
    let stats = db.stats();
    let live = stats.values.records - stats.values.garbage_records;
    assert_eq!(live, live_keys, "{ctx}: one live record per key left");
    if common::runs_gc_jobs(variant) {
        assert_eq!(stats.values.garbage_records, 0, "{ctx}: reclaimed");
    }
    db.close().expect("close");
    drop(db);
    let db = Db::open(&path, opts).expect("reopen");
    assert_reads(&db, &format!("{variant}: reopened"));
    rounds::assert_exact_garbage(&db, &format!("{variant}: reopened"));
}

#[test]
fn every_policy_reclaims_what_a_range_delete_deletes_and_never_resurrects_it() {
    let fs = FaultFs::new(25);
    for (variant, tune) in common::gc_variants() {
        let opts = tune(rounds::inline_options(&fs).with_gc_garbage_ratio(0.2));
        run(&variant, opts);
    }
}

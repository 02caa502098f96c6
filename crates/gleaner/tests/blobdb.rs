//! Policy `blobdb` (RocksDB's integrated BlobDB GC): no GC job; compactions relocate the values
//! of the entries they keep that live in the oldest quarter of the value tables, counting the old
//! records as garbage in their own edit; a value table goes once nothing references it; with a
//! force threshold, the key tables referencing the oldest value table are compacted when the old
//! tables hold enough garbage.
//!
//! Besides the mechanics, the tests show the scheme's known weaknesses, which the benchmarks
//! measure: a key range no compaction visits pins its old tables (facebook/rocksdb #9235) until
//! forced compactions reach it; inserts alone relocate values that hold no garbage (#11570).

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;
mod sim;

use std::path::Path;
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{Db, GcPolicyKind, Options};

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        // No workers: the test decides when flushes and compactions run.
        .with_inline_background_work(true)
        .with_gc_policy(GcPolicyKind::Blobdb)
        .with_memtable_size(1 << 20)
        .with_l0_compaction_trigger(100)
        .with_l0_slowdown_trigger(100)
        .with_l0_stop_trigger(100)
        .with_level_base_size(1 << 30)
        .with_value_table_size(16 << 10)
        .with_min_separated_value_size(100)
}

fn key(prefix: &str, i: u32) -> String {
    format!("{prefix}{i:04}")
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i} {round} ").into_bytes();
    v.resize(500, b'a' + (round % 26) as u8);
    v
}

fn assert_clean(db: &Db, ctx: &str) {
    let r = db.recount_garbage().expect("recount");
    assert!(r.mismatches.is_empty(), "{ctx}: {:#?}", r.mismatches);
}

/// Every flush writes about 8 value tables of 16 KiB; the keys `prefix0000..` are written in
/// `rounds` rounds, each flushed, so the value tables age round by round.
fn write_rounds(db: &Db, prefix: &str, keys: u32, rounds: std::ops::Range<u32>) {
    for round in rounds {
        for i in 0..keys {
            db.put(key(prefix, i), value(i, round)).expect("put");
        }
        db.flush().expect("flush");
    }
}

#[test]
fn compaction_relocates_the_oldest_values_and_frees_their_tables() {
    let fs = FaultFs::new(1);
    let path = Path::new("/blobdb");
    let db = Db::open(path, options(&fs)).expect("open");
    write_rounds(&db, "k", 200, 0..4);
    let before = db.stats();
    let oldest = before.values.per_table[0].number;
    assert_eq!(db.run_gc().expect("gc").jobs, 0, "blobdb runs no GC job");
    // One compaction of everything: the three older rounds' records are garbage (their
    // versions are dropped); the newest round's records that live in the oldest quarter of the
    // tables are relocated. There are none here — the newest round is in the newest tables —
    // so relocation leaves the live data alone and the old tables go because nothing
    // references them.
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert!(
        s.values.per_table.iter().all(|t| t.number != oldest),
        "the oldest table is gone"
    );
    assert_clean(&db, "after compaction");
    // Now write a round to other keys, so the round-3 tables of `k` become the oldest, and
    // compact again: the live `k` values in the oldest quarter move to new tables.
    write_rounds(&db, "m", 200, 0..1);
    let tables_before: Vec<u64> = db
        .stats()
        .values
        .per_table
        .iter()
        .map(|t| t.number)
        .collect();
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert!(
        s.gc.relocated_values > 0 && s.gc.relocated_bytes > 0,
        "values of the oldest quarter moved: {:?}",
        s.gc
    );
    let quarter = tables_before.len() / 4;
    for n in &tables_before[..quarter] {
        assert!(
            s.values.per_table.iter().all(|t| t.number != *n),
            "table {n} in the oldest quarter was emptied by relocation and freed"
        );
    }
    for i in 0..200 {
        assert_eq!(db.get(key("k", i)).expect("get"), Some(value(i, 3)));
        assert_eq!(db.get(key("m", i)).expect("get"), Some(value(i, 0)));
    }
    assert_clean(&db, "after relocation");
    sim::check_recovered_state(db, path, &options(&fs), "after relocation");
}

/// A key range that compaction never visits keeps pinning the oldest value tables: their
/// garbage is counted (other keys' versions were dropped), but no compaction reads the entries
/// that still reference them (facebook/rocksdb #9235). A force threshold marks the key tables
/// that reference the oldest value table, and the forced compactions free them.
#[test]
fn a_cold_range_pins_old_tables_until_forced_compactions_reach_it() {
    let run = |force_threshold: f64| {
        let fs = FaultFs::new(2);
        let path = Path::new("/blobdb-cold");
        // One value table per flush (cold and hot values together, as a flush of a memtable
        // holding both writes them), small key tables (so the cold keys' tables are not the
        // hot keys').
        let opts = options(&fs)
            .with_value_table_size(1 << 20)
            .with_key_table_size(2 << 10)
            .with_blobdb_force_threshold(force_threshold);
        let db = Db::open(path, opts.clone()).expect("open");
        // Cold keys and hot keys share the first value table; the cold ones are never written
        // again, the hot ones are overwritten and compacted (only their range).
        for i in 0..200 {
            db.put(key("cold", i), value(i, 0)).expect("put");
            db.put(key("hot", i), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        // More cold data in tables of its own, so the first table is the oldest quarter.
        for batch in 1..4 {
            for i in 0..200 {
                db.put(key(&format!("cold{batch}-"), i), value(i, 0))
                    .expect("put");
            }
            db.flush().expect("flush");
        }
        db.compact_range(None, None).expect("compact");
        for round in 1..4 {
            for i in 0..200 {
                db.put(key("hot", i), value(i, round)).expect("put");
            }
            db.flush().expect("flush");
            db.compact_range(Some(b"hot"), Some(b"hot~"))
                .expect("compact the hot range");
        }
        // A fixed point of the inline schedule: the compactions now due run (forced ones,
        // with a threshold).
        db.flush().expect("flush");
        let s = db.stats();
        for i in 0..200 {
            assert_eq!(db.get(key("cold", i)).expect("get"), Some(value(i, 0)));
            assert_eq!(db.get(key("hot", i)).expect("get"), Some(value(i, 3)));
        }
        assert_clean(&db, "cold range");
        let garbage = s.values.garbage_bytes;
        let forced = s.gc.forced_compactions;
        sim::check_recovered_state(db, path, &opts, "cold range");
        (garbage, forced)
    };
    let (pinned, forced_off) = run(1.0);
    assert_eq!(forced_off, 0);
    assert!(
        pinned > 0,
        "without forced compactions the old tables keep their garbage"
    );
    let (freed, forced_on) = run(0.3);
    assert!(forced_on > 0, "forced compactions ran");
    assert!(
        freed < pinned,
        "forced compactions relocated the cold values and freed garbage: {freed} vs {pinned}"
    );
}

/// Inserts alone make no garbage, yet every compaction relocates the values it keeps in the
/// oldest quarter of the tables: write amplification without any space to gain
/// (facebook/rocksdb #11570).
#[test]
fn inserts_alone_relocate_the_oldest_quarter() {
    let fs = FaultFs::new(3);
    let path = Path::new("/blobdb-inserts");
    let db = Db::open(path, options(&fs)).expect("open");
    for batch in 0..4u32 {
        for i in 0..200 {
            db.put(key("k", batch * 1000 + i), value(i, batch))
                .expect("put");
        }
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
    }
    let s = db.stats();
    assert_eq!(s.values.garbage_bytes, 0, "inserts make no garbage");
    assert!(
        s.gc.relocated_values > 0,
        "values were relocated all the same: {:?}",
        s.gc
    );
    assert_clean(&db, "inserts");
    sim::check_recovered_state(db, path, &options(&fs), "inserts");
}

//! A small key space written in rounds, shared by the policy tests (`titan.rs`, `novkv.rs`):
//! `KEYS` keys whose values name their key and round, `build` to make a third of the first
//! round's records garbage, and `assert_reads` to check every key against its latest round;
//! `inline_options`, the options those tests share.

use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{Db, Options};

/// Options for the policy tests on `fs`, before the policy's own: background work inline and GC
/// only when asked (the test decides when flushes, compactions and GC run: no key table is
/// rewritten for its stale handles, `stale_handle_share` 0), values of 100 bytes and more
/// separated into value tables of 64 KiB.
pub fn inline_options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_gc_threads(0)
        .with_memtable_size(1 << 20)
        .with_l0_compaction_trigger(8)
        .with_value_table_size(64 << 10)
        .with_min_separated_value_size(100)
        .with_stale_handle_share(0.0)
}

/// Keys in the key space.
pub const KEYS: u32 = 120;

/// Key number `i`.
pub fn key(i: u32) -> String {
    format!("key{i:04}")
}

/// The value of key `i` in `round`: 400 to 600 bytes, separated under the tests' options.
pub fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i} {round} ").into_bytes();
    v.resize(400 + (i as usize % 5) * 50, b'a' + (round % 26) as u8);
    v
}

/// Writes every key (round 0), overwrites every third (round 1), and compacts, so the round-0
/// tables have a third of their records as garbage; returns each key's round.
pub fn build(db: &Db) -> Vec<u32> {
    let mut latest = vec![0u32; KEYS as usize];
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for i in (0..KEYS).step_by(3) {
        db.put(key(i), value(i, 1)).expect("put");
        latest[i as usize] = 1;
    }
    db.compact_range(None, None).expect("compact");
    latest
}

/// Reads every key and requires the value of its `latest` round.
pub fn assert_reads(db: &Db, latest: &[u32], ctx: &str) {
    for i in 0..KEYS {
        assert_eq!(
            db.get(key(i))
                .unwrap_or_else(|e| panic!("{ctx}: {}: {e}", key(i))),
            Some(value(i, latest[i as usize])),
            "{ctx}: {}",
            key(i)
        );
    }
}

/// Asserts that the garbage counts of `db` match a recount from scratch and that no drop went
/// unplaced (`ctx` names the moment in failures); returns the recount for further checks.
pub fn assert_exact_garbage(db: &Db, ctx: &str) -> gleaner::GarbageRecount {
    let r = db
        .recount_garbage()
        .unwrap_or_else(|e| panic!("{ctx}: recount: {e}"));
    assert!(r.mismatches.is_empty(), "{ctx}: {:#?}", r.mismatches);
    assert_eq!(
        db.stats().values.unresolved_drops,
        0,
        "{ctx}: unplaced drops"
    );
    r
}

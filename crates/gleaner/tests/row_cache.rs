//! The row cache (`row_cache_size`, `prepopulate_row_cache`): a point read of the present is
//! answered from memory with the key's newest value, and never with a value the key no longer
//! has — after overwrites, deletions, range deletions, expiry, conditional writes, GC and
//! reopens — while reads at a snapshot and reads that do not fill caches leave it alone.

use std::path::Path;
use std::sync::Arc;

use gleaner::expiry::ManualClock;
use gleaner::io::FaultFs;
use gleaner::{
    Db, Error, GcPolicyKind, Options, ReadOptions, SeparateAt, WriteBatch, WriteOptions,
};

const T0: u64 = 1_700_000_000_000;

fn options(fs: &FaultFs, rows: u64) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_min_separated_value_size(100)
        .with_row_cache_size(rows)
}

fn value(tag: u8) -> Vec<u8> {
    vec![tag; 4000]
}

/// Reads of the device for user reads (key tables and value tables).
fn user_reads(db: &Db) -> u64 {
    db.stats().io.get("user_read").map_or(0, |c| c.read_ops)
}

fn hits(db: &Db) -> (u64, u64) {
    let c = db.stats().cache;
    (c.row_hits, c.row_misses)
}

#[test]
fn a_second_read_is_answered_from_the_row_cache_with_no_io() {
    let fs = FaultFs::new(1);
    let db = Db::open(Path::new("/db"), options(&fs, 1 << 20)).expect("open");
    assert_eq!(db.stats().cache.row_capacity_bytes, 1 << 20);
    db.put("big", value(1)).expect("put");
    db.put("small", b"inline").expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get("big").expect("get"), Some(value(1)));
    assert_eq!(db.get("small").expect("get"), Some(b"inline".to_vec()));
    assert_eq!(hits(&db), (0, 2));
    let before = user_reads(&db);
    assert!(before > 0, "the first reads went to the tables");
    assert_eq!(db.get("big").expect("get"), Some(value(1)));
    assert_eq!(db.get("small").expect("get"), Some(b"inline".to_vec()));
    assert_eq!(
        db.get_expiry("big", &ReadOptions::default())
            .expect("get_expiry"),
        Some(None)
    );
    assert_eq!(user_reads(&db), before, "the hits read nothing");
    assert_eq!(hits(&db), (3, 2));
    let usage = db.stats().cache.row_usage_bytes;
    assert!(usage >= 4000 + 6, "{usage}");
    // A missing key is not cached, and answers absent.
    assert_eq!(db.get("none").expect("get"), None);
    assert_eq!(db.get("none").expect("get"), None);
    assert_eq!(hits(&db), (3, 4));
}

#[test]
fn every_kind_of_write_replaces_or_removes_the_cached_answer() {
    for warm in [false, true] {
        let fs = FaultFs::new(2);
        let clock = Arc::new(ManualClock::new(T0));
        let opts = options(&fs, 1 << 20)
            .with_prepopulate_row_cache(warm)
            .with_clock(clock.clone());
        let db = Db::open(Path::new("/db"), opts).expect("open");
        let read = |k: &str| db.get(k).expect("get");
        for k in ["a", "b", "c", "d", "e"] {
            db.put(k, value(1)).expect("put");
        }
        db.flush().expect("flush");
        for k in ["a", "b", "c", "d", "e"] {
            assert_eq!(read(k), Some(value(1)), "warm {warm}");
            assert_eq!(read(k), Some(value(1)), "warm {warm}");
        }
        // Overwrite, delete, a batch that writes a key twice, and a put that expires.
        db.put("a", value(2)).expect("put");
        db.delete("b").expect("delete");
        let mut batch = WriteBatch::new();
        batch.put("c", value(3));
        batch.put("c", value(4));
        db.write(batch, &WriteOptions::default()).expect("write");
        db.put_with_ttl("d", value(5), 1_000).expect("put_with_ttl");
        for _ in 0..2 {
            assert_eq!(read("a"), Some(value(2)), "warm {warm}");
            assert_eq!(read("b"), None, "warm {warm}");
            assert_eq!(read("c"), Some(value(4)), "warm {warm}");
            assert_eq!(read("d"), Some(value(5)), "warm {warm}");
        }
        // A cached answer that expires is judged at the read's time, and then dropped.
        clock.advance(1_001);
        let held = db.stats().cache.row_usage_bytes;
        assert_eq!(read("d"), None, "warm {warm}");
        assert!(
            db.stats().cache.row_usage_bytes <= held - 4000,
            "warm {warm}: the expired entry's memory was freed"
        );
        assert_eq!(
            db.get_expiry("d", &ReadOptions::default())
                .expect("get_expiry"),
            None
        );
        // A conditional write that applies replaces the answer; one that fails leaves it.
        let snap = db.snapshot();
        let mut batch = WriteBatch::new();
        batch.put("e", value(6));
        assert!(
            db.write_if_unchanged(batch, &WriteOptions::default(), &snap, ["e"])
                .expect("write_if_unchanged")
        );
        assert_eq!(read("e"), Some(value(6)), "warm {warm}");
        let mut batch = WriteBatch::new();
        batch.put("e", value(7));
        assert!(
            !db.write_if_unchanged(batch, &WriteOptions::default(), &snap, ["e"])
                .expect("write_if_unchanged")
        );
        assert_eq!(read("e"), Some(value(6)), "warm {warm}");
        // A range deletion empties the cache: every key in it reads absent, others stay.
        assert_eq!(read("a"), Some(value(2)));
        db.delete_range("a", "d").expect("delete_range");
        assert_eq!(read("a"), None, "warm {warm}");
        assert_eq!(read("c"), None, "warm {warm}");
        assert_eq!(read("e"), Some(value(6)), "warm {warm}");
        db.close().expect("close");
    }
}

#[test]
fn a_prepopulated_row_cache_answers_the_first_read_after_a_write() {
    for at in [SeparateAt::Flush, SeparateAt::Write] {
        let fs = FaultFs::new(3);
        let opts = options(&fs, 1 << 20)
            .with_prepopulate_row_cache(true)
            .with_separate_at(at);
        let db = Db::open(Path::new("/db"), opts).expect("open");
        db.put("k", value(1)).expect("put");
        db.put("s", b"small").expect("put");
        let before = user_reads(&db);
        assert_eq!(db.get("k").expect("get"), Some(value(1)), "{at:?}");
        assert_eq!(db.get("s").expect("get"), Some(b"small".to_vec()), "{at:?}");
        assert_eq!(hits(&db), (2, 0), "{at:?}");
        db.flush().expect("flush");
        assert_eq!(db.get("k").expect("get"), Some(value(1)), "{at:?}");
        assert_eq!(user_reads(&db), before, "{at:?}: no read went to a table");
    }
}

#[test]
fn snapshot_reads_and_reads_that_do_not_fill_caches_leave_the_row_cache_alone() {
    let fs = FaultFs::new(4);
    let db = Db::open(Path::new("/db"), options(&fs, 1 << 20)).expect("open");
    db.put("k", value(1)).expect("put");
    db.flush().expect("flush");
    let snap = db.snapshot();
    db.put("k", value(2)).expect("put");
    // Filled with the present's value...
    assert_eq!(db.get("k").expect("get"), Some(value(2)));
    assert_eq!(hits(&db), (0, 1));
    // ...which a read at the older snapshot neither asks nor gets.
    let at = ReadOptions::default().at(&snap);
    assert_eq!(db.get_with("k", &at).expect("get_with"), Some(value(1)));
    assert_eq!(
        hits(&db),
        (0, 1),
        "the snapshot read did not ask the row cache"
    );
    // A read that does not fill caches does not fill the row cache, but a hit answers it.
    let no_fill = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    db.put("n", value(3)).expect("put");
    assert_eq!(
        db.get_with("n", &no_fill).expect("get_with"),
        Some(value(3))
    );
    assert_eq!(
        db.get_with("n", &no_fill).expect("get_with"),
        Some(value(3))
    );
    assert_eq!(hits(&db), (0, 3), "no fill: two misses");
    assert_eq!(
        db.get_with("k", &no_fill).expect("get_with"),
        Some(value(2))
    );
    assert_eq!(hits(&db), (1, 3), "a cached key is answered");
}

#[test]
fn values_gc_moves_and_a_reopen_under_another_policy_stay_exact() {
    let fs = FaultFs::new(5);
    let opts = |p: GcPolicyKind| {
        options(&fs, 1 << 20)
            .with_gc_policy(p)
            .with_value_table_size(16 << 10)
            .with_gc_garbage_ratio(0.05)
    };
    let db = Db::open(Path::new("/db"), opts(GcPolicyKind::Scavenger)).expect("open");
    // The first round's tables keep the odd keys live beside the even keys' garbage: GC
    // moves the odd keys' records.
    let last_round = |i: u32| if i.is_multiple_of(2) { 3 } else { 0 };
    for round in 0..4u8 {
        for i in (0..20u32).filter(|i| round == 0 || i.is_multiple_of(2)) {
            db.put(format!("k{i:02}"), value(round * 20 + i as u8))
                .expect("put");
        }
        db.flush().expect("flush");
    }
    let expect = |db: &Db| {
        for i in 0..20u32 {
            assert_eq!(
                db.get(format!("k{i:02}")).expect("get"),
                Some(value(last_round(i) * 20 + i as u8)),
                "k{i:02}"
            );
        }
    };
    // Cached before GC moves the records, read after it.
    expect(&db);
    db.compact_range(None, None).expect("compact");
    db.run_gc().expect("gc");
    let gc = db.stats().gc;
    assert!(
        gc.jobs > 0 && gc.records_written > 0,
        "GC moved records under the cached rows: {gc:?}"
    );
    expect(&db);
    expect(&db);
    assert!(db.stats().cache.row_hits >= 40, "both passes after GC hit");
    db.close().expect("close");
    let db = Db::open(Path::new("/db"), opts(GcPolicyKind::Titan)).expect("reopen");
    assert_eq!(hits(&db), (0, 0), "a reopen starts with an empty row cache");
    expect(&db);
    expect(&db);
    assert_eq!(hits(&db), (20, 20));
}

#[test]
fn the_row_cache_stays_within_its_budget_and_an_oversized_one_is_refused() {
    let fs = FaultFs::new(6);
    let db = Db::open(
        Path::new("/db"),
        options(&fs, 64 << 10).with_prepopulate_row_cache(true),
    )
    .expect("open");
    for i in 0..200u32 {
        db.put(format!("k{i:03}"), value(i as u8)).expect("put");
    }
    // Newest first: the last values written are still cached, the first ones evicted.
    for i in (0..200u32).rev() {
        assert_eq!(
            db.get(format!("k{i:03}")).expect("get"),
            Some(value(i as u8))
        );
    }
    let c = db.stats().cache;
    assert!(c.row_usage_bytes <= 64 << 10, "{}", c.row_usage_bytes);
    assert!(c.row_hits > 0 && c.row_misses > 0, "{c:?}");
    db.close().expect("close");
    let fs = FaultFs::new(7);
    match Db::open(Path::new("/db"), options(&fs, 1 << 51)) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("row_cache_size"), "{msg}"),
        other => panic!("expected an invalid-argument error, got {other:?}"),
    }
}

/// Writers racing on the same keys, each write's value put in by its own thread after its
/// group committed (`prepopulate_row_cache`), and readers filling beside them: at the end the
/// row cache answers every key with what the tables hold (a read at a snapshot does not ask
/// the cache), so no older put or fill outlived a newer write.
#[test]
fn racing_writers_of_the_same_keys_leave_the_newest_values_cached() {
    const KEYS: usize = 8;
    for warm in [true, false] {
        let fs = FaultFs::new(8);
        let opts = options(&fs, 1 << 20)
            .with_prepopulate_row_cache(warm)
            .with_inline_background_work(false);
        let db = Db::open(Path::new("/db"), opts).expect("open");
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let db = &db;
                s.spawn(move || {
                    for i in 0..6000usize {
                        let k = format!("k{}", (i * 7 + usize::from(t)) % KEYS);
                        if i % 3 == 0 {
                            db.get(&k).expect("get");
                        } else {
                            let mut v = value(t);
                            v[..8].copy_from_slice(&(i as u64).to_le_bytes());
                            db.put(&k, v).expect("put");
                        }
                    }
                });
            }
        });
        let snap = db.snapshot();
        for k in 0..KEYS {
            let k = format!("k{k}");
            let tables = db
                .get_with(&k, &ReadOptions::default().at(&snap))
                .expect("get_with");
            assert_eq!(db.get(&k).expect("get"), tables, "warm {warm}: {k}");
            assert_eq!(db.get(&k).expect("get"), tables, "warm {warm}: {k}");
        }
        assert!(db.stats().cache.row_hits > 0, "warm {warm}");
        db.close().expect("close");
    }
}

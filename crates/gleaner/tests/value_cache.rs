//! The value cache (`value_cache_share`): a point read of a hot separated value is answered
//! from memory, within the block cache's budget, and never with a value the key no longer has.

use std::path::Path;
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{Db, GcPolicyKind, Options, ReadOptions, SeparateAt};

fn options(fs: &FaultFs, share: f64) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_min_separated_value_size(100)
        .with_block_cache_size(1 << 20)
        .with_value_cache_share(share)
}

fn value(tag: u8) -> Vec<u8> {
    vec![tag; 4000]
}

/// Reads of separated values that went to a value table.
fn value_reads(db: &Db) -> u64 {
    db.stats().io.get("user_read").map_or(0, |c| c.read_ops)
}

#[test]
fn a_second_read_of_a_value_comes_from_the_cache_within_the_budget() {
    let fs = FaultFs::new(1);
    let db = Db::open(Path::new("/db"), options(&fs, 0.25)).expect("open");
    let stats = db.stats();
    assert_eq!(stats.cache.value_capacity_bytes, 256 << 10);
    assert_eq!(
        stats.cache.capacity_bytes,
        768 << 10,
        "the block cache keeps the rest"
    );
    db.put("k", value(1)).expect("put");
    db.flush().expect("flush");
    assert_eq!(db.get("k").expect("get"), Some(value(1)));
    let after_first = value_reads(&db);
    assert!(after_first > 0, "the first read went to the value table");
    assert_eq!(db.get("k").expect("get"), Some(value(1)));
    assert_eq!(value_reads(&db), after_first, "the second read did no I/O");
    let stats = db.stats();
    assert_eq!((stats.cache.value_hits, stats.cache.value_misses), (1, 1));
    assert!(stats.cache.value_usage_bytes >= 4000);
}

/// A separated value is handed out without a copy: the read that fills the cache, every later
/// hit and the cache share one buffer, so `get_entry` of a cached 4 KB value costs a reference
/// count, not a copy.
#[test]
fn a_cached_value_is_handed_out_without_a_copy() {
    let fs = FaultFs::new(1);
    let db = Db::open(Path::new("/db"), options(&fs, 0.25)).expect("open");
    db.put("k", value(1)).expect("put");
    db.flush().expect("flush");
    let read = |db: &Db| {
        db.get_entry("k", &ReadOptions::default())
            .expect("get_entry")
            .expect("present")
            .value
    };
    let first = read(&db);
    let second = read(&db);
    assert_eq!(first, value(1));
    assert_eq!(second, value(1));
    assert_eq!(db.stats().cache.value_hits, 1, "the second read was a hit");
    assert_eq!(
        first.as_ptr(),
        second.as_ptr(),
        "the hit handed out the buffer the first read filled"
    );
}

#[test]
fn an_overwritten_or_collected_value_is_never_served_stale() {
    // `novkv` too: its GC learns garbage from drop keys, not from the index, and writes its
    // output under a new file number, so no cached (file, offset) ever names another record.
    for policy in [GcPolicyKind::Scavenger, GcPolicyKind::Novkv] {
        overwritten_or_collected_never_stale(policy);
    }
}

fn overwritten_or_collected_never_stale(policy: GcPolicyKind) {
    let fs = FaultFs::new(2);
    let opts = options(&fs, 0.5)
        .with_gc_policy(policy)
        .with_gc_garbage_ratio(0.1);
    let opts = match policy {
        GcPolicyKind::Novkv => opts.with_novkv_valid_threshold(0.9),
        _ => opts,
    };
    let db = Db::open(Path::new("/db"), opts).expect("open");
    for i in 0..20u8 {
        db.put(format!("k{i}"), value(i)).expect("put");
    }
    db.flush().expect("flush");
    for i in 0..20u8 {
        assert_eq!(db.get(format!("k{i}")).expect("get"), Some(value(i)));
    }
    // Overwrite half: their cached values are for the old versions' handles.
    for i in (0..20u8).step_by(2) {
        db.put(format!("k{i}"), value(100 + i)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    // GC moves the other half's records into a new table; their handles resolve through
    // inheritance, and the cache still answers for them with the same record.
    let gc = db.run_gc().expect("gc");
    assert!(gc.jobs > 0, "{policy:?}: GC ran: {gc:?}");
    for i in 0..20u8 {
        let want = if i % 2 == 0 { value(100 + i) } else { value(i) };
        assert_eq!(
            db.get(format!("k{i}")).expect("get"),
            Some(want),
            "{policy:?}: k{i}"
        );
    }
    assert!(
        db.stats().cache.value_hits >= 10,
        "{policy:?}: {:?}",
        db.stats().cache
    );
    // Overwrite the other half and collect again: the handles of the new versions name the
    // newest tables, the old entries' (file, offset) only ever named the old records.
    for i in (1..20u8).step_by(2) {
        db.put(format!("k{i}"), value(100 + i)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    db.run_gc().expect("gc");
    for i in 0..20u8 {
        assert_eq!(
            db.get(format!("k{i}")).expect("get"),
            Some(value(100 + i)),
            "{policy:?}: k{i} after the second round"
        );
    }
    db.close().expect("close");
}

#[test]
fn reads_that_do_not_fill_the_cache_leave_it_alone_and_share_zero_turns_it_off() {
    let fs = FaultFs::new(3);
    let db = Db::open(Path::new("/db"), options(&fs, 0.5)).expect("open");
    db.put("k", value(7)).expect("put");
    db.flush().expect("flush");
    let no_fill = ReadOptions {
        fill_cache: false,
        ..Default::default()
    };
    for _ in 0..2 {
        assert_eq!(db.get_with("k", &no_fill).expect("get"), Some(value(7)));
    }
    assert_eq!(db.stats().cache.value_usage_bytes, 0);
    assert_eq!(db.stats().cache.value_hits, 0);
    db.close().expect("close");

    let db = Db::open(Path::new("/db"), options(&fs, 0.0)).expect("reopen");
    assert_eq!(db.get("k").expect("get"), Some(value(7)));
    assert_eq!(db.get("k").expect("get"), Some(value(7)));
    let stats = db.stats();
    assert_eq!(stats.cache.value_capacity_bytes, 0);
    assert_eq!(stats.cache.capacity_bytes, 1 << 20);
    assert_eq!((stats.cache.value_hits, stats.cache.value_misses), (0, 0));
}

/// Reads spread evenly over far more values than the value cache holds stop filling it
/// (docs/architecture.md, "The value cache while it thrashes"), every read still answers
/// right, and a value read again and again still gets in and is answered from the cache.
#[test]
fn a_thrashing_value_cache_takes_few_values_but_still_the_hot_ones() {
    let fs = FaultFs::new(4);
    // 256 KiB of values: about 60 of the 4,000 written.
    let db = Db::open(Path::new("/db"), options(&fs, 0.25)).expect("open");
    let key = |i: u64| format!("key{i:05}");
    let tag = |i: u64| (i % 251) as u8;
    for i in 0..4000 {
        db.put(key(i), value(tag(i))).expect("put");
    }
    db.flush().expect("flush");
    let mut x = 1u64;
    for _ in 0..14_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = (x >> 33) % 4000;
        assert_eq!(db.get(key(i)).expect("get"), Some(value(tag(i))), "{i}");
    }
    let stats = db.stats();
    let (misses, skipped) = (stats.cache.value_misses, stats.cache.value_skipped_inserts);
    assert!(misses > 3 * 4096, "{misses}");
    // The first window takes every value; from the second on, about one in eight.
    assert!(
        skipped > (misses - 4096) * 3 / 4 && skipped < misses - 4096,
        "{skipped} of {misses} misses not inserted"
    );
    assert!(stats.cache.value_usage_bytes <= stats.cache.value_capacity_bytes);

    let hits_before = stats.cache.value_hits;
    for _ in 0..100 {
        assert_eq!(db.get(key(7)).expect("get"), Some(value(tag(7))));
    }
    let hits = db.stats().cache.value_hits - hits_before;
    assert!(
        hits >= 50,
        "{hits} of 100 reads of one key answered from the cache"
    );
}

/// A read of a handle naming a collected table follows inheritance once; the value cache
/// remembers where it found the record, and the next read whose value is not cached goes there
/// directly. (When the place's table goes in turn the place is passed over: the unit tests of
/// `ValueSet::read_value`.)
#[test]
fn a_moved_record_is_read_at_its_remembered_place() {
    let fs = FaultFs::new(4);
    // Values larger than the value cache are never kept as values, so every read misses them
    // and only places can help.
    let big = |tag: u8| vec![tag; 600 << 10];
    let opts = options(&fs, 0.5).with_gc_garbage_ratio(0.1);
    let db = Db::open(Path::new("/db"), opts).expect("open");
    for i in 0..6u8 {
        db.put(format!("k{i}"), big(i)).expect("put");
    }
    db.flush().expect("flush");
    // Overwrite all but k1; the compaction tells GC what is garbage, and GC then moves k1's
    // record into a new table, leaving k1's handle stale (no compaction rewrites it).
    for i in (0..6u8).filter(|&i| i != 1) {
        db.put(format!("k{i}"), big(100 + i)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert!(db.run_gc().expect("gc").jobs > 0);
    let via = |db: &Db| db.stats().operations.gets_via_inheritance;
    let places = |db: &Db| db.stats().cache.value_place_hits;
    assert_eq!(db.get("k1").expect("get"), Some(big(1)));
    assert_eq!(
        (via(&db), places(&db)),
        (1, 0),
        "the first read followed inheritance"
    );
    assert_eq!(
        db.stats().cache.value_hits,
        0,
        "the value was too large to keep"
    );
    for n in 2..4 {
        assert_eq!(db.get("k1").expect("get"), Some(big(1)));
        assert_eq!((via(&db), places(&db)), (n, n - 1), "the place was read");
    }
    for i in (0..6u8).filter(|&i| i != 1) {
        assert_eq!(db.get(format!("k{i}")).expect("get"), Some(big(100 + i)));
    }
    db.close().expect("close");
}

/// With `prepopulate_value_cache`, a value is cached as it is separated (by the flush, or by
/// the write with `separate_at=write`): the first read of it is a hit, with no value-table
/// read. Without the option the first read goes to the table. Values GC moves are not put in
/// (their entries under the handles the index holds stay true), and an overwritten key is read
/// at its new version.
#[test]
fn prepopulated_values_are_hits_on_their_first_read() {
    for at in [SeparateAt::Flush, SeparateAt::Write] {
        for policy in [
            GcPolicyKind::Scavenger,
            GcPolicyKind::Titan,
            GcPolicyKind::Blobdb,
        ] {
            prepopulated_first_reads(at, policy);
        }
    }
}

fn prepopulated_first_reads(at: SeparateAt, policy: GcPolicyKind) {
    let case = format!("{at:?}/{policy:?}");
    // The I/O of the first reads with the option off, then on: the same key-table reads, and
    // with it off the value tables' besides.
    let mut first_read_ops = Vec::new();
    for prepopulate in [false, true] {
        let fs = FaultFs::new(5);
        let opts = options(&fs, 0.5)
            .with_separate_at(at)
            .with_gc_policy(policy)
            .with_gc_garbage_ratio(0.1)
            .with_prepopulate_value_cache(prepopulate);
        let db = Db::open(Path::new("/db"), opts).expect("open");
        for i in 0..20u8 {
            db.put(format!("k{i}"), value(i)).expect("put");
        }
        db.flush().expect("flush");
        let before = value_reads(&db);
        for i in 0..20u8 {
            assert_eq!(
                db.get(format!("k{i}")).expect("get"),
                Some(value(i)),
                "{case}"
            );
        }
        first_read_ops.push(value_reads(&db) - before);
        let stats = db.stats();
        if !prepopulate {
            assert_eq!(
                (stats.cache.value_hits, stats.cache.value_misses),
                (0, 20),
                "{case}: nothing cached before a read"
            );
            db.close().expect("close");
            continue;
        }
        assert_eq!(
            (stats.cache.value_hits, stats.cache.value_misses),
            (20, 0),
            "{case}: every first read was a hit"
        );
        // Without the option, each key's record was read, and its table opened (footer and
        // index): at least 20 reads more.
        assert!(
            first_read_ops[0] >= first_read_ops[1] + 20,
            "{case}: no value table was read ({first_read_ops:?} reads without and with)"
        );
        // Overwrite half; compaction and GC move the other half's records. Every read is of
        // the key's newest value, and the new versions were cached by their flush.
        for i in (0..20u8).step_by(2) {
            db.put(format!("k{i}"), value(100 + i)).expect("put");
        }
        db.flush().expect("flush");
        let usage = db.stats().cache.value_usage_bytes;
        db.compact_range(None, None).expect("compact");
        db.run_gc().expect("gc");
        assert!(
            db.stats().cache.value_usage_bytes <= usage,
            "{case}: neither compaction nor GC put anything in the cache"
        );
        for i in 0..20u8 {
            let want = if i % 2 == 0 { value(100 + i) } else { value(i) };
            assert_eq!(
                db.get(format!("k{i}")).expect("get"),
                Some(want),
                "{case}: k{i}"
            );
        }
        // Scavenger's moved records keep the handles the index holds, and their entries
        // answer; Titan's GC and BlobDB's compaction give the moved half new handles, which
        // nothing cached (at most those ten reads miss).
        let stats = db.stats();
        let most_misses = if policy == GcPolicyKind::Scavenger {
            0
        } else {
            10
        };
        assert!(
            stats.cache.value_misses <= most_misses,
            "{case}: {:?}",
            stats.cache
        );
        db.close().expect("close");
    }
}

/// Prepopulating stays within the value cache's budget: writing more values than it holds
/// evicts the oldest, and every read is still right.
#[test]
fn prepopulating_more_than_the_cache_holds_stays_within_its_budget() {
    let fs = FaultFs::new(6);
    let opts = options(&fs, 0.25).with_prepopulate_value_cache(true);
    let db = Db::open(Path::new("/db"), opts).expect("open");
    // 200 values of 4,000 bytes: about three times the 256 KiB value cache.
    for i in 0..200u32 {
        db.put(format!("k{i:03}"), value(i as u8)).expect("put");
        if i % 50 == 49 {
            db.flush().expect("flush");
        }
    }
    let stats = db.stats();
    assert!(
        stats.cache.value_usage_bytes <= stats.cache.value_capacity_bytes,
        "{:?}",
        stats.cache
    );
    assert!(stats.cache.value_usage_bytes > 0, "{:?}", stats.cache);
    for i in 0..200u32 {
        assert_eq!(
            db.get(format!("k{i:03}")).expect("get"),
            Some(value(i as u8)),
            "k{i:03}"
        );
    }
    let stats = db.stats();
    assert!(
        stats.cache.value_misses > 0,
        "the oldest were evicted: {:?}",
        stats.cache
    );
    assert!(
        stats.cache.value_hits > 0,
        "the newest were kept: {:?}",
        stats.cache
    );
    db.close().expect("close");
}

//! Option `inline_background_work`: flush, compaction and GC run on the calling threads, with no
//! background thread, and the database behaves exactly as with workers — also with several
//! threads writing at once, and at a space budget where a stopped write must run GC itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use gleaner::io::{FaultFs, FaultKind, FaultOp, FaultRule};
use gleaner::{Db, Options, ReadOptions, Switch};

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_memtable_size(8 << 10)
        .with_key_table_size(8 << 10)
        .with_level_base_size(32 << 10)
        .with_l0_compaction_trigger(2)
        .with_min_separated_value_size(200)
        .with_value_table_size(16 << 10)
        .with_gc_garbage_ratio(0.1)
}

fn value(key: u32, round: u32) -> Vec<u8> {
    let len = if key.is_multiple_of(3) { 40 } else { 900 };
    let mut v = format!("{key}-{round}-").into_bytes();
    v.resize(len, b'a' + (round % 26) as u8);
    v
}

fn threads_named_gleaner() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|name| name.starts_with("gleaner-"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Writes alone drive flush, compaction and GC when they run inline, no worker thread is
/// started, and every value reads right before and after a reopen.
#[test]
fn writes_alone_drive_flush_compaction_and_gc_without_background_threads() {
    let fs = FaultFs::new(1);
    let db = Db::open("/inline/db", options(&fs)).expect("open");
    assert_eq!(threads_named_gleaner(), 0, "inline mode starts no worker");
    let mut expect = BTreeMap::new();
    for round in 0..6 {
        for key in 0..150u32 {
            let v = value(key, round);
            db.put(format!("k{key:04}"), &v).expect("put");
            expect.insert(format!("k{key:04}").into_bytes(), v);
        }
    }
    let s = db.stats();
    assert!(s.compaction.flushes > 0, "flushes ran: {:?}", s.compaction);
    assert!(
        s.compaction.compactions > 0,
        "compactions ran: {:?}",
        s.compaction
    );
    assert!(s.gc.jobs > 0, "GC ran: {:?}", s.gc);
    let check = |db: &Db| {
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db
            .range(.., &ReadOptions::default())
            .expect("range")
            .map(|r| r.expect("item"))
            .collect();
        assert!(got == expect, "contents differ from the model");
    };
    check(&db);
    assert!(db.recount_garbage().expect("recount").mismatches.is_empty());
    db.close().expect("close");
    drop(db);
    let db = Db::open("/inline/db", options(&fs)).expect("reopen");
    check(&db);
}

/// Several threads writing at once take turns running the inline work: no deadlock, no lost
/// write, exact garbage accounting.
#[test]
fn concurrent_writers_take_turns_running_inline_work() {
    let fs = FaultFs::new(2);
    let db = Arc::new(Db::open("/inline-mt/db", options(&fs)).expect("open"));
    let writers: Vec<_> = (0..4u32)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for round in 0..5 {
                    for key in (t * 100)..(t * 100 + 100) {
                        db.put(format!("k{key:04}"), value(key, round))
                            .expect("put");
                    }
                    if round == 2 {
                        db.flush().expect("flush");
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer thread");
    }
    for key in 0..400u32 {
        assert_eq!(
            db.get(format!("k{key:04}")).expect("get"),
            Some(value(key, 4)),
            "key {key}"
        );
    }
    let s = db.stats();
    assert!(s.compaction.flushes > 0 && s.gc.jobs > 0, "{s:?}");
    assert!(db.recount_garbage().expect("recount").mismatches.is_empty());
}

/// At the space budget there is no GC worker to wait for: the writer runs GC itself (the
/// normal garbage ratio, 0.9, is never reached, so only the budget's urgent GC can free space),
/// and writes go on within the budget.
#[test]
fn a_write_held_at_the_space_budget_runs_gc_itself() {
    const BUDGET: u64 = 160 << 10;
    let fs = FaultFs::new(3);
    let opts = options(&fs)
        .with_value_table_size(64 << 10)
        // Hot values in tables of their own would be freed whole by compaction, without GC.
        .with_hotness_aware_writes(Switch::Off)
        .with_gc_garbage_ratio(0.9)
        .with_max_disk_bytes(BUDGET)
        .with_space_stop_timeout_ms(5_000);
    let db = Db::open("/inline-budget/db", opts).expect("open");
    for key in 0..150u32 {
        db.put(format!("k{key:04}"), value(key, 0)).expect("load");
    }
    // Half the keys overwritten 30 times: every value table ends up about half garbage, and
    // without GC the disk would hold several times the budget.
    for round in 1..=30 {
        for key in (0..150u32).filter(|k| k.is_multiple_of(2)) {
            db.put(format!("k{key:04}"), value(key, round))
                .unwrap_or_else(|e| panic!("round {round} key {key}: {e}"));
        }
    }
    for key in 0..150u32 {
        let round = if key.is_multiple_of(2) { 30 } else { 0 };
        assert_eq!(
            db.get(format!("k{key:04}")).expect("get"),
            Some(value(key, round)),
            "key {key}"
        );
    }
    let s = db.stats();
    let throttle = s.throttle.expect("throttling is on");
    assert!(s.gc.jobs > 0, "GC ran: {:?} {throttle:?}", s.gc);
    assert!(
        throttle.disk_bytes <= BUDGET,
        "usage stays within the budget: {throttle:?}"
    );
}

/// The waiting writer's own GC, alone. Counted garbage (half of every value table, below the
/// normal victim ratio) sits on disk when one write, larger than the whole throttled band, would
/// take usage past the budget: it stops without passing through the band (where GC's falling
/// victim threshold would have collected the garbage first). Its first GC job fails (an
/// injected read error), so it stops with garbage visible: no hidden-garbage compaction runs,
/// no worker exists, and only the stopped writer itself can collect it. Without that it would
/// wait until the throttle gave up.
#[test]
fn a_stopped_writer_collects_counted_garbage_itself() {
    let fs = FaultFs::new(4);
    let path = "/inline-stopped/db";
    let opts = || {
        options(&fs)
            .with_value_table_size(64 << 10)
            .with_hotness_aware_writes(Switch::Off)
            .with_gc_garbage_ratio(0.9)
    };
    let db = Db::open(path, opts()).expect("open");
    for key in 0..300u32 {
        db.put(format!("k{key:04}"), value(key, 0)).expect("load");
    }
    for key in (0..300u32).filter(|k| k.is_multiple_of(2)) {
        db.put(format!("k{key:04}"), value(key, 1))
            .expect("overwrite");
    }
    // The overwritten versions become counted garbage, about half of each table.
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert!(
        s.values.garbage_bytes > 0 && s.gc.jobs == 0,
        "{:?}",
        s.values
    );
    let on_disk = s.space.disk_bytes;
    db.close().expect("close");
    drop(db);
    // A budget a little above today's usage, with a stop timeout far below the throttle's
    // give-up time: a writer that waited for GC that never runs would fail.
    let budget = on_disk + (on_disk / 10);
    let db = Db::open(
        path,
        opts()
            .with_max_disk_bytes(budget)
            .with_space_stop_timeout_ms(200),
    )
    .expect("reopen with a budget");
    // The first value-table read is GC's, the stopped writer's first job.
    fs.add_fault(FaultRule {
        op: FaultOp::Read,
        path_contains: Some(".vst".into()),
        skip: 0,
        times: Some(1),
        kind: FaultKind::Eio,
    });
    // One value of a fifth of today's usage: the budget leaves a tenth, and the band below it
    // is a tenth of the budget, so the write goes past it at once unless GC frees the ~100 KB
    // of garbage.
    let big = vec![b'b'; (on_disk / 5) as usize];
    db.put("k0300", &big)
        .expect("the stopped writer's GC makes room");
    assert_eq!(db.get("k0300").expect("get"), Some(big));
    let s = db.stats();
    let t = s.throttle.expect("throttling is on");
    assert!(t.stop_waits > 0, "writes reached the budget: {t:?}");
    assert!(
        s.gc.errors == 1 && s.gc.jobs > 0,
        "the first GC job failed, the stopped writer's succeeded: {:?}",
        s.gc
    );
    assert_eq!(t.failed_writes, 0);
}

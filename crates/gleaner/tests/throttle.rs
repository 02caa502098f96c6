//! Space-aware throttling in the engine: writes stop at the space budget and fail with
//! `Error::SpaceBudgetExceeded` after a bounded wait when GC has nothing to reclaim, while
//! reads, deletes and close keep working; and the live-data estimate the budget is measured
//! against agrees with a recount of the live data.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gleaner::io::FaultFs;
use gleaner::{Db, Error, GcPolicyKind, Options, ReadOptions, Switch};

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(64 << 10)
        .with_key_table_size(32 << 10)
        .with_level_base_size(128 << 10)
        .with_value_table_size(64 << 10)
        .with_min_separated_value_size(256)
}

fn value(i: u32, round: u32, len: usize) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    v.resize(len, b'a' + (round % 26) as u8);
    v
}

/// Writes about 1 KB values under new keys until a write fails, at most `most` of them: with
/// unique keys nothing ever becomes garbage, so GC can free nothing. Returns the writes that
/// succeeded and the error.
fn write_unique_keys_until_refused(db: &Db, most: u32) -> (u32, Error) {
    let mut written = 0u32;
    loop {
        match db.put(format!("key{written:06}"), value(written, 0, 1000)) {
            Ok(()) => written += 1,
            Err(e) => return (written, e),
        }
        assert!(
            written < most,
            "writes never stopped: {:?}",
            db.stats().space
        );
    }
}

#[test]
fn writes_fail_at_the_budget_when_nothing_can_be_reclaimed_and_the_rest_keeps_working() {
    let fs = FaultFs::new(5);
    let opts = options(&fs)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_space_throttling(Switch::On)
        .with_max_disk_bytes(400 << 10)
        .with_space_stop_timeout_ms(200);
    let db = Db::open(Path::new("/full"), opts).expect("open");
    assert!(db.stats().throttle.is_some_and(|t| t.enabled));
    let started = Instant::now();
    let (written, err) = write_unique_keys_until_refused(&db, 5_000);
    assert!(
        matches!(err, Error::SpaceBudgetExceeded { limit_bytes, .. } if limit_bytes == 400 << 10),
        "{err}"
    );
    assert!(err.to_string().contains("max_disk_bytes"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the failure came after a bounded wait"
    );
    let s = db.stats();
    let t = s.throttle.expect("throttle stats");
    assert!(t.failed_writes >= 1 && t.stopped_seconds > 0.0, "{t:?}");
    // Every acknowledged write is readable, the refused one was not written.
    for i in (0..written).step_by(17) {
        assert_eq!(
            db.get(format!("key{i:06}")).expect("get"),
            Some(value(i, 0, 1000))
        );
    }
    assert_eq!(db.get(format!("key{written:06}")).expect("get"), None);
    // A delete passes even while writes are stopped.
    db.delete("key000000").expect("delete while stopped");
    assert_eq!(db.get("key000000").expect("get"), None);
    // And so does a scan, and close.
    let n = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .count();
    assert_eq!(n as u32, written - 1);
    db.close().expect("close");
}

#[test]
fn gc_keeps_usage_within_the_budget_and_no_write_fails() {
    // About 450 KB of live data rewritten eight times: without GC the disk would hold several
    // times the limit.
    const LIMIT: u64 = 700 << 10;
    let fs = FaultFs::new(6);
    let opts = options(&fs)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_max_disk_bytes(LIMIT)
        .with_gc_garbage_ratio(0.3)
        .with_space_stop_timeout_ms(5_000);
    let dir = Path::new("/churn");
    let db = Db::open(dir, opts).expect("open");
    let keys = 300u32;
    // Rewrite until the throttle has had to act (background GC sometimes keeps up alone for a
    // while), within a bound.
    let mut rounds = 0u32;
    let mut peak = 0u64;
    while rounds < 8 || (rounds < 60 && db.stats().throttle.is_some_and(|t| t.transitions == 0)) {
        for i in 0..keys {
            db.put(format!("key{i:05}"), value(i, rounds, 1500))
                .unwrap_or_else(|e| panic!("round {rounds} key {i}: {e}"));
            peak = peak.max(real_bytes(&fs, dir));
        }
        rounds += 1;
    }
    for i in 0..keys {
        assert_eq!(
            db.get(format!("key{i:05}")).expect("get"),
            Some(value(i, rounds - 1, 1500))
        );
    }
    // What the directory really held: writes are let in below the budget; past it only by
    // what the background jobs running at that moment had written before deleting their inputs
    // (a flush, a compaction, a GC job). Measured 725-755 KB here at a budget of 700 KiB.
    assert!(
        peak <= LIMIT + LIMIT / 2,
        "the directory reached {peak} bytes at a budget of {LIMIT}"
    );
    let t = db.stats().throttle.expect("throttle stats");
    assert_eq!(t.failed_writes, 0, "{t:?}");
    // Usage reached the budget (writes were slowed or stopped) and GC brought it back.
    assert!(
        t.transitions > 0 && t.delayed_writes + t.stop_waits > 0,
        "the throttle engaged: {t:?}"
    );
}

#[test]
fn budget_options_are_checked_at_open_and_name_the_option() {
    let fs = FaultFs::new(7);
    let cases: Vec<(Options, &str)> = vec![
        (
            options(&fs)
                .with_space_budget_low(1.6)
                .with_space_budget_high(1.5),
            "space_budget_low",
        ),
        (options(&fs).with_space_budget_high(1.5), "space_budget_low"),
        (
            options(&fs)
                .with_space_budget_low(0.9)
                .with_space_budget_high(1.5),
            "space_budget_low",
        ),
        (
            options(&fs).with_gc_threads(3).with_gc_threads_max(2),
            "gc_threads_max",
        ),
        (
            options(&fs)
                .with_max_disk_bytes(1 << 20)
                .with_space_stop_timeout_ms(7_200_000),
            "space_stop_timeout_ms",
        ),
    ];
    for (i, (opts, name)) in cases.into_iter().enumerate() {
        let e = Db::open(Path::new(&format!("/bad{i}")), opts)
            .err()
            .unwrap_or_else(|| panic!("case {i} opened"));
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains(name),
            "case {i}: {e}"
        );
    }
    // Budgets without throttling (terarkdb, auto) open and do nothing.
    let db = Db::open(
        Path::new("/off"),
        options(&fs)
            .with_gc_policy(GcPolicyKind::Terarkdb)
            .with_max_disk_bytes(1 << 20),
    )
    .expect("open");
    assert!(db.stats().throttle.is_none());
}

#[test]
fn live_data_estimate_is_within_five_percent_of_a_recount() {
    let fs = FaultFs::new(8);
    let db = Db::open(
        Path::new("/estimate"),
        options(&fs).with_gc_policy(GcPolicyKind::Scavenger),
    )
    .expect("open");
    let keys = 400u32;
    for round in 0..3u32 {
        for i in 0..keys {
            // Every third key small (inline), the rest separated.
            let len = if i % 3 == 0 { 120 } else { 4000 };
            db.put(format!("key{i:05}"), value(i, round, len))
                .expect("put");
        }
    }
    for i in (0..keys).step_by(5) {
        db.delete(format!("key{i:05}")).expect("delete");
    }
    // Compaction turns every overwritten or deleted version into counted garbage (no hidden
    // garbage left), which is what the estimate can know.
    db.compact_range(None, None).expect("compact");
    db.run_gc().expect("gc");
    let recount: u64 = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| {
            let (k, v) = r.expect("item");
            (k.len() + v.len()) as u64
        })
        .sum();
    let estimate = db.stats().space.live_data_estimate;
    let error = (estimate as f64 - recount as f64).abs() / recount as f64;
    assert!(
        error < 0.05,
        "estimate {estimate} vs recount {recount}: {:.1} % off",
        error * 100.0
    );
}

/// Found by running the suite on a loaded machine: a hidden-garbage compaction could run at most
/// once per stop timeout, so when writes stopped a second time soon after the first, the stopped
/// writer was refused one, GC had nothing visible to collect, and the write failed although a
/// compaction would have made plenty collectable. A write now fails only when a hidden-garbage
/// compaction run right before found nothing either. Compaction is left to the throttle here
/// (L0 never triggers one), so all garbage stays hidden until the throttle surfaces it.
#[test]
fn a_second_stop_soon_after_the_first_still_surfaces_hidden_garbage() {
    const LIMIT: u64 = 700 << 10;
    let fs = FaultFs::new(8);
    let opts = options(&fs)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_space_throttling(Switch::On)
        .with_max_disk_bytes(LIMIT)
        .with_gc_garbage_ratio(0.3)
        .with_l0_compaction_trigger(1000)
        .with_l0_slowdown_trigger(1000)
        .with_l0_stop_trigger(1000)
        // Short: surfacing was limited to one per second at least, and every stop of this test
        // comes within a second of the one before.
        .with_space_stop_timeout_ms(200);
    let db = Db::open(Path::new("/second-stop"), opts).expect("open");
    let keys = 300u32;
    let mut rounds = 0u32;
    // Until writes have stopped (and surfaced hidden garbage) three times, within a bound.
    while rounds < 100 && db.stats().stalls.space_compactions < 3 {
        for i in 0..keys {
            db.put(format!("key{i:05}"), value(i, rounds, 1500))
                .unwrap_or_else(|e| panic!("round {rounds} key {i}: {e}"));
        }
        rounds += 1;
    }
    for i in 0..keys {
        assert_eq!(
            db.get(format!("key{i:05}")).expect("get"),
            Some(value(i, rounds - 1, 1500))
        );
    }
    let s = db.stats();
    let t = s.throttle.expect("throttle stats");
    assert_eq!(t.failed_writes, 0, "{t:?}");
    assert!(
        s.stalls.space_compactions >= 3,
        "writes stopped three times, each time surfacing hidden garbage: {:?} {t:?}",
        s.stalls
    );
}

/// Usage is measured at most every 10 ms; in between, the writes let through are added to the
/// last measurement. Before, a fast writer (here on the in-memory file system) could put several
/// times the budget on disk before the throttle looked again. Now, when writes fail at the
/// budget, usage is within a few percent of it.
#[test]
fn a_fast_writer_is_stopped_at_the_budget_not_past_it() {
    const LIMIT: u64 = 400 << 10;
    let fs = FaultFs::new(9);
    let opts = options(&fs)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_space_throttling(Switch::On)
        .with_max_disk_bytes(LIMIT)
        .with_space_stop_timeout_ms(100);
    let db = Db::open(Path::new("/fast"), opts).expect("open");
    let (written, err) = write_unique_keys_until_refused(&db, 20_000);
    assert!(matches!(err, Error::SpaceBudgetExceeded { .. }), "{err}");
    let disk = db.stats().space.disk_bytes;
    assert!(
        disk <= LIMIT + LIMIT / 20,
        "{disk} bytes on disk at a budget of {LIMIT} ({written} writes of about 1 KB)"
    );
    let real = real_bytes(&fs, Path::new("/fast"));
    assert!(
        real <= LIMIT + LIMIT / 20,
        "the directory holds {real} bytes at a budget of {LIMIT}"
    );
}

/// Bytes of every file under `dir` on the fault-injecting file system: what the directory
/// really holds, whatever the engine believes.
fn real_bytes(fs: &FaultFs, dir: &Path) -> u64 {
    fs.list_files()
        .iter()
        .filter(|p| p.starts_with(dir))
        .map(|p| fs.file_bytes(p).map_or(0, |b| b.len() as u64))
        .sum()
}

/// The usage the throttle sees is what the directory holds: every file, including the tables of
/// older versions an iterator pins, WALs, the manifest and OPTIONS. It used to be the current
/// version's tables plus the memtables, which missed all of those. With the background work
/// inline, nothing runs between a write's return and the check, so the two must be equal.
#[test]
fn usage_is_the_bytes_of_every_file_in_the_directory() {
    let fs = FaultFs::new(10);
    let dir = Path::new("/exact");
    let opts = options(&fs)
        .with_inline_background_work(true)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_gc_garbage_ratio(0.2);
    let db = Db::open(dir, opts).expect("open");
    let keys = 200u32;
    let mut iter = None;
    let mut checks = 0;
    for round in 0..8u32 {
        if round == 2 {
            // Pins the tables of this version for the next rounds, through GC and compaction.
            iter = Some(db.iter(&ReadOptions::default()).expect("iter"));
        }
        if round == 6 {
            iter = None;
        }
        for i in 0..keys {
            db.put(format!("key{i:05}"), value(i, round, 1500))
                .expect("put");
            if i % 25 == 0 {
                assert_eq!(
                    db.stats().space.disk_bytes,
                    real_bytes(&fs, dir),
                    "round {round} key {i}"
                );
                checks += 1;
            }
        }
    }
    drop(iter);
    let s = db.stats();
    assert!(s.gc.jobs > 0 && s.compaction.compactions > 0, "{:?}", s.gc);
    assert!(checks > 50);
    db.close().expect("close");
}

/// An iterator held while GC rewrites the tables keeps the old tables on disk. The throttle
/// used to count only the current version's tables, so writes went on while the directory grew
/// past the budget with every GC job. Now it counts them, writes stop, and once nothing more
/// can be reclaimed they fail; the directory stays near the budget. When the iterator is
/// dropped, its tables go and writes go on.
#[test]
fn a_long_lived_iterator_does_not_let_the_directory_grow_past_the_budget() {
    const LIMIT: u64 = 1 << 20;
    let fs = FaultFs::new(11);
    let dir = Path::new("/pinned");
    let opts = options(&fs)
        .with_inline_background_work(true)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_max_disk_bytes(LIMIT)
        .with_gc_garbage_ratio(0.2)
        .with_gc_max_input_size(128 << 10)
        .with_space_stop_timeout_ms(100);
    let db = Db::open(dir, opts).expect("open");
    // About 600 KB of live data, which the iterator pins once it has all been rewritten.
    let keys = 400u32;
    for i in 0..keys {
        db.put(format!("key{i:05}"), value(i, 0, 1500))
            .expect("put");
    }
    let iter = db.iter(&ReadOptions::default()).expect("iter");
    let mut peak = 0u64;
    let mut refused = None;
    'rounds: for round in 1..40u32 {
        for i in 0..keys {
            match db.put(format!("key{i:05}"), value(i, round, 1500)) {
                Ok(()) => peak = peak.max(real_bytes(&fs, dir)),
                Err(e) => {
                    refused = Some((round, e));
                    break 'rounds;
                }
            }
        }
    }
    let (round, err) = refused.expect("writes stop failing only if the budget is ignored");
    assert!(
        matches!(err, Error::SpaceBudgetExceeded { .. }),
        "round {round}: {err}"
    );
    // Past the budget by at most what one admitted write brings with the work it runs inline:
    // a memtable's flush (64 KiB), a compaction's outputs before its inputs go, a GC job's
    // outputs (victims of at most 128 KiB, which the iterator keeps). Counting only the current
    // version's tables, writes went on to 1.5 MB here and never failed.
    assert!(
        peak <= LIMIT + LIMIT / 4,
        "the directory reached {peak} bytes at a budget of {LIMIT}"
    );
    assert!(db.stats().space.disk_bytes >= LIMIT, "the throttle saw it");
    drop(iter);
    db.put("after", value(0, 99, 1500))
        .expect("the pinned tables are gone: writes go on");
    assert!(real_bytes(&fs, dir) < LIMIT, "{}", real_bytes(&fs, dir));
    db.close().expect("close");
}

/// A stopped writer used to run the hidden-garbage compaction on its own thread, after its last
/// give-up check, and a failure of that compaction came back as the write's error. A compaction
/// worker runs it now: the writer only waits, and gets `SpaceBudgetExceeded` when nothing could
/// be reclaimed, while the failed compaction is counted as one.
#[test]
fn a_failed_hidden_garbage_compaction_is_not_the_writers_error() {
    const LIMIT: u64 = 400 << 10;
    let fs = FaultFs::new(12);
    let opts = options(&fs)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_space_throttling(Switch::On)
        .with_max_disk_bytes(LIMIT)
        .with_l0_compaction_trigger(1000)
        .with_l0_slowdown_trigger(1000)
        .with_l0_stop_trigger(1000)
        .with_space_stop_timeout_ms(200);
    let db = Db::open(Path::new("/surface-fails"), opts).expect("open");
    // Compactions read key tables; flushes do not (and the test reads nothing until the end).
    fs.add_fault(gleaner::io::FaultRule {
        op: gleaner::io::FaultOp::Read,
        path_contains: Some(".sst".into()),
        skip: 0,
        times: None,
        kind: gleaner::io::FaultKind::Eio,
    });
    let mut refused = None;
    'rounds: for round in 0..100u32 {
        for i in 0..200u32 {
            if let Err(e) = db.put(format!("key{i:05}"), value(i, round, 1500)) {
                refused = Some(e);
                break 'rounds;
            }
        }
    }
    let err = refused.expect("writes stop at the budget");
    assert!(
        matches!(err, Error::SpaceBudgetExceeded { .. }),
        "the write fails for the budget, not for the compaction: {err}"
    );
    let s = db.stats();
    assert!(
        s.stalls.space_compactions >= 1 && s.compaction.errors >= 1,
        "a hidden-garbage compaction ran and failed: {:?} {:?}",
        s.stalls,
        s.compaction
    );
    fs.clear_faults();
    db.close().expect("close");
}

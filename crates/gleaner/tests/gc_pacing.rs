//! GC pacing while reads dominate (`gc_read_yield_rate`): a background GC job that starts after
//! a second without writes, with reads coming, waits between batches; turning the option off
//! turns the waits off; closing during a wait loses nothing.
//!
//! No timing is asserted. The one sleep below is the feature's own window (a second without
//! writes): sleeping longer, as a loaded machine may, only makes its condition more true.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gleaner::io::FaultFs;
use gleaner::{Db, GcPolicyKind, Options};

const KEYS: u32 = 256;

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_min_separated_value_size(100)
        // Two flushes stay in L0: the overwritten versions are hidden garbage until a
        // compaction drops them.
        .with_l0_compaction_trigger(8)
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

fn value(i: u32, round: u8) -> Vec<u8> {
    let mut v = vec![round; 8 << 10];
    v[..4].copy_from_slice(&i.to_le_bytes());
    v
}

/// Writes every key, then overwrites half of them, with GC off: after a compaction the first
/// value table is half garbage, which takes a GC job (an all-garbage table would be deleted
/// outright).
fn prepare(fs: &FaultFs) {
    let db = Db::open(Path::new("/db"), options(fs).with_gc_threads(0)).expect("open");
    for i in 0..KEYS {
        db.put(key(i), value(i, 1)).expect("put");
    }
    db.flush().expect("flush");
    for i in (0..KEYS).step_by(2) {
        db.put(key(i), value(i, 2)).expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
}

fn check_all(db: &Db) {
    for i in 0..KEYS {
        let round = if i % 2 == 0 { 2 } else { 1 };
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i, round)), "{i}");
    }
}

/// Polls `done` until it holds, for at most a minute.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Opens the prepared database with `gc_threads` background GC workers, lets a second go by
/// without writes, reads once, and surfaces the garbage with a compaction (not a write), so the
/// GC job that follows starts while reads dominate.
fn open_and_surface(fs: &FaultFs, gc_threads: u32, rate: u64) -> Db {
    let db = Db::open(
        Path::new("/db"),
        options(fs)
            .with_gc_threads(gc_threads)
            .with_gc_read_yield_rate(rate),
    )
    .expect("open");
    std::thread::sleep(gleaner::gc::pacing::WRITES_IDLE + Duration::from_millis(100));
    assert_eq!(db.get(key(1)).expect("get"), Some(value(1, 1)));
    db.compact_range(None, None).expect("compact");
    db
}

#[test]
fn a_job_started_while_reads_dominate_waits_and_closing_then_loses_nothing() {
    let fs = FaultFs::new(1);
    prepare(&fs);
    // 64 KiB a second: the job's first batch (about 1 MiB of records) owes many seconds.
    let db = Arc::new(open_and_surface(&fs, 1, 64 << 10));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                db.get(key(i % KEYS)).expect("get");
                i += 1;
            }
        })
    };
    wait_until("a paced wait", || db.stats().gc.paced_micros > 0);
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("reader");
    // The job is most likely still paying its debt (the reads stopped less than a second ago):
    // close cancels the wait (whether it sits it out is a matter of time, not asserted).
    db.close().expect("close");
    drop(db);

    let db = Db::open(Path::new("/db"), options(&fs).with_gc_threads(0)).expect("reopen");
    check_all(&db);
    db.run_gc().expect("gc");
    check_all(&db);
}

#[test]
fn gc_the_user_asks_for_is_never_paced() {
    let fs = FaultFs::new(4);
    prepare(&fs);
    let db = open_and_surface(&fs, 0, 64 << 10);
    let run = db.run_gc().expect("gc");
    assert!(run.jobs >= 1, "the half-garbage table was collected");
    assert_eq!(db.stats().gc.paced_micros, 0);
    check_all(&db);
    db.close().expect("close");
}

#[test]
fn once_the_reads_stop_the_job_finishes() {
    let fs = FaultFs::new(2);
    prepare(&fs);
    let db = open_and_surface(&fs, 1, 64 << 10);
    // Only the one read: a second after it, the job no longer yields, whatever it owes.
    wait_until("the GC job", || db.stats().gc.jobs >= 1);
    let stats = db.stats();
    assert!(
        stats.gc.paced_micros > 0,
        "it waited before the reads stopped"
    );
    assert!(stats.gc.records_dropped >= u64::from(KEYS / 2));
    check_all(&db);
    db.close().expect("close");
}

#[test]
fn rate_zero_turns_pacing_off() {
    let fs = FaultFs::new(3);
    prepare(&fs);
    let db = open_and_surface(&fs, 1, 0);
    wait_until("the GC job", || db.stats().gc.jobs >= 1);
    assert_eq!(db.stats().gc.paced_micros, 0);
    check_all(&db);
    db.close().expect("close");
}

#[test]
fn a_rate_below_the_least_is_refused_by_name() {
    let err = Options::default()
        .with_gc_read_yield_rate(1000)
        .validate()
        .expect_err("too small");
    assert!(err.to_string().contains("gc_read_yield_rate"), "{err}");
    assert!(
        Options::default()
            .with_gc_read_yield_rate(0)
            .validate()
            .is_ok()
    );
}

//! GC jobs and the compactions running when they claim their victims (docs/gc.md, "Racing with
//! compaction", rule 2). A job whose oracle reads the index tree alone does not wait for them:
//! it judges every record such a compaction drops dead as it is, and when it commits first, the
//! drops the compaction counted into its victims are reclaimed early, not lost nor unplaced. A
//! job whose oracle judges from what compactions hand over at their commit (`novkv`'s drop
//! keys) waits for them, and their drops count against its victims before it reads.
//!
//! A compaction is held at a gate on its first key-table file while GC runs on another thread.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use gleaner::io::{FaultFs, FaultOp};
use gleaner::tools::check_db;
use gleaner::{Db, GcPolicyKind, GcRunStats, Options};

const KEYS: u32 = 300;

/// Far longer than any step here takes on a loaded machine: reaching it is a hang.
const PATIENCE: Duration = Duration::from_secs(60);

fn options(fs: &FaultFs, policy: GcPolicyKind) -> Options {
    let opts = Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(1 << 20)
        .with_value_table_size(64 << 10)
        .with_min_separated_value_size(256)
        .with_gc_garbage_ratio(0.2)
        .with_gc_threads(0)
        .with_gc_policy(policy);
    if policy == GcPolicyKind::Novkv {
        opts.with_novkv_valid_threshold(0.9)
    } else {
        opts
    }
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
        2
    } else if i.is_multiple_of(3) {
        1
    } else {
        0
    }
}

/// Odd keys round 1 left alone: their round-0 records are what the held compaction drops into
/// the tables GC collects.
fn odd_round0() -> u64 {
    (0..KEYS)
        .filter(|&i| i % 2 == 1 && !i.is_multiple_of(3))
        .count() as u64
}

/// Round 0 writes every key; round 1 overwrites every third key and is compacted, so the
/// round-0 tables show a third of their records as garbage and GC picks them (and only them).
/// Round 2 overwrites the odd keys and is flushed, not compacted: the compaction the tests hold
/// is the one that drops the odd keys' older versions.
fn build(db: &Db) {
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for i in (0..KEYS).filter(|i| i.is_multiple_of(3)) {
        db.put(key(i), value(i, 1)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    for i in (0..KEYS).filter(|i| i % 2 == 1) {
        db.put(key(i), value(i, 2)).expect("put");
    }
    db.flush().expect("flush");
}

fn assert_latest(db: &Db, ctx: &str) {
    for i in 0..KEYS {
        assert_eq!(
            db.get(key(i)).expect("get"),
            Some(value(i, latest(i))),
            "{ctx}: {}",
            key(i)
        );
    }
}

/// Starts a compaction of everything on another thread and returns once it is held at its
/// first key-table file, with the gate and the thread.
fn held_compaction(
    fs: &FaultFs,
    db: &Arc<Db>,
) -> (
    gleaner::io::FaultGate,
    std::thread::JoinHandle<gleaner::Result<()>>,
) {
    let gate = fs.add_gate(FaultOp::Create, Some(".sst"), 0);
    let compaction = {
        let db = Arc::clone(db);
        std::thread::spawn(move || db.compact_range(None, None))
    };
    assert!(
        gate.wait_until_reached(PATIENCE),
        "the compaction reaches its first output"
    );
    (gate, compaction)
}

/// Runs GC on another thread; its result comes through the receiver.
fn gc_in_background(db: &Arc<Db>) -> mpsc::Receiver<gleaner::Result<GcRunStats>> {
    let (tx, rx) = mpsc::channel();
    let db = Arc::clone(db);
    std::thread::spawn(move || {
        let result = db.run_gc();
        // Let go of the database before the result arrives: a test that drops its own handle
        // next closes it, and then checks or reopens the directory (which the lock refuses
        // while this thread still holds a handle).
        drop(db);
        let _ = tx.send(result);
    });
    rx
}

fn gc_overtakes_a_running_compaction(policy: GcPolicyKind, dir: &str) {
    let fs = FaultFs::new(3);
    let path = Path::new(dir);
    let db = Arc::new(Db::open(path, options(&fs, policy)).expect("open"));
    build(&db);
    let (gate, compaction) = held_compaction(&fs, &db);
    // The job claims its victims while the compaction is held, and commits without it.
    let run = gc_in_background(&db)
        .recv_timeout(PATIENCE)
        .expect("the GC job finishes while the compaction is held")
        .expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    // Every record of the round-0 tables is read; the even keys round 1 left alone are live.
    let live = (0..KEYS)
        .filter(|&i| i % 2 == 0 && !i.is_multiple_of(3))
        .count() as u64;
    assert_eq!(run.totals.records_read, u64::from(KEYS), "{run:?}");
    assert_eq!(run.totals.records_written, live, "{run:?}");
    let s = db.stats();
    assert_eq!(s.gc.compaction_wait_micros, 0, "{:?}", s.gc);
    assert_eq!(s.values.drops_reclaimed_early, 0, "{:?}", s.values);
    gate.open();
    compaction
        .join()
        .expect("compaction thread")
        .expect("compact");
    // The compaction dropped the odd keys' round-0 handles into tables the job had collected:
    // reclaimed early, each of them, and none unplaced.
    let s = db.stats();
    assert_eq!(s.values.unresolved_drops, 0, "{:?}", s.values);
    assert_eq!(
        s.values.drops_reclaimed_early,
        odd_round0(),
        "{:?}",
        s.values
    );
    assert_latest(&db, "after both");
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    drop(db);
    let report = check_db(path, &options(&fs, policy)).expect("check");
    assert!(report.is_clean(), "{report:#?}");
    let db = Db::open(path, options(&fs, policy)).expect("reopen");
    assert_latest(&db, "after reopen");
}

#[test]
fn a_scavenger_job_overtakes_a_running_compaction() {
    gc_overtakes_a_running_compaction(GcPolicyKind::Scavenger, "/overtake-scavenger");
}

#[test]
fn a_terarkdb_job_overtakes_a_running_compaction() {
    gc_overtakes_a_running_compaction(GcPolicyKind::Terarkdb, "/overtake-terarkdb");
}

#[test]
fn a_job_judging_by_drop_keys_waits_for_a_running_compaction() {
    let fs = FaultFs::new(4);
    let path = Path::new("/novkv-waits");
    let policy = GcPolicyKind::Novkv;
    let db = Arc::new(Db::open(path, options(&fs, policy)).expect("open"));
    build(&db);
    let (gate, compaction) = held_compaction(&fs, &db);
    let gc = gc_in_background(&db);
    // The job has claimed its victims and waits: let the compaction go only then. (A job that
    // did not wait ends while the compaction is held, and fails the checks below.)
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut early = None;
    while early.is_none() && db.stats().gc.claimed == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the GC job claims its victims"
        );
        early = gc.try_recv().ok();
        std::thread::sleep(Duration::from_millis(5));
    }
    gate.open();
    compaction
        .join()
        .expect("compaction thread")
        .expect("compact");
    let run = match early {
        Some(run) => run,
        None => gc.recv_timeout(PATIENCE).expect("the GC job finishes"),
    }
    .expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    let s = db.stats();
    assert!(s.gc.compaction_wait_micros > 0, "{:?}", s.gc);
    // The compaction's drops were counted against the victims before the job read them: the
    // job dropped those records by their drop keys, and no drop was reclaimed early.
    assert_eq!(s.values.drops_reclaimed_early, 0, "{:?}", s.values);
    assert_eq!(s.values.unresolved_drops, 0, "{:?}", s.values);
    assert_latest(&db, "after both");
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
}

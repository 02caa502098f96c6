//! Policy `titan`: GC writes the new places of the records it moves back into the index tree,
//! each only if the key's newest version still names the record; victims are retired and stay
//! readable until no snapshot can read the versions that name them.
//!
//! Its hazards, each tested here: a user write landing between GC's check and its write-back
//! must win (and the copy must count as garbage at once); a snapshot taken before the job must
//! still read what it read; a written-back handle dropped by a flush (the key overwritten again
//! before the flush) must make its record garbage (Titan's own accounting misses this,
//! tikv/titan #86); with inline work, a job whose write-backs fill the memtables must not
//! deadlock the writer that makes room, and the late drops of a job's claimed outputs must go
//! with its claim (issue 23). And the data stays exact with background GC threads.

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;
mod rounds;
mod sim;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rounds::{KEYS, assert_reads, build, key, value};

use gleaner::io::{FaultFs, FaultOp};
use gleaner::{Db, GcPolicyKind, Options, ReadOptions};

fn options(fs: &FaultFs) -> Options {
    rounds::inline_options(fs)
        .with_gc_policy(GcPolicyKind::Titan)
        .with_titan_discardable_ratio(0.2)
}

fn assert_recount(db: &Db, ctx: &str) {
    let r = rounds::assert_exact_garbage(db, ctx);
    assert_eq!(r.awaiting_write_back, 0, "{ctx}: no job is half done");
}

#[test]
fn gc_writes_the_new_places_back_and_retires_its_victims() {
    let fs = FaultFs::new(1);
    let path = Path::new("/titan");
    let db = Db::open(path, options(&fs)).expect("open");
    let latest = build(&db);
    let before = db.stats();
    assert!(before.values.garbage_records > 0);
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0 && run.totals.records_written > 0, "{run:?}");
    let s = db.stats();
    assert_eq!(
        s.gc.written_back, run.totals.records_written,
        "every moved record was written back"
    );
    assert_eq!(s.gc.write_back_conflicts, 0);
    assert_eq!(
        s.values.inheritance_records, 0,
        "no inheritance under titan"
    );
    assert_eq!(
        s.values.retired_tables as u64, run.totals.victims,
        "the victims are retired, not deleted: the write-backs are still in the memtable"
    );
    assert_reads(&db, &latest, "after GC");
    assert_recount(&db, "after GC");
    // Once the write-backs are in key tables, nothing reads the victims: they are released.
    db.flush().expect("flush");
    let s = db.stats();
    assert_eq!(s.values.retired_tables, 0, "released after the flush");
    assert_eq!(s.values.tables_released, run.totals.victims);
    assert_reads(&db, &latest, "after release");
    assert_recount(&db, "after release");
    // Compaction drops the versions the write-backs shadow; they named released tables, so no
    // garbage is counted for them.
    db.compact_range(None, None).expect("compact");
    assert_recount(&db, "after compaction");
    assert_reads(&db, &latest, "after compaction");
    db.close().expect("close");
    let db = Db::open(path, options(&fs)).expect("reopen");
    assert_reads(&db, &latest, "after reopen");
    sim::check_recovered_state(db, path, &options(&fs), "after reopen");
}

/// The race Titan's `WriteWithCallback` exists for (and which DiffKV's code base lost): a user
/// overwrite, and a delete, land after GC checked the record live and before its write-back.
/// GC is held by a gate at its first manifest edit, after every check; the user writes; then
/// GC goes on. The user's writes must win, and the copies GC made count as garbage at once.
#[test]
fn a_user_write_between_the_check_and_the_write_back_wins() {
    let fs = FaultFs::new(2);
    let path = Path::new("/titan-race");
    let db = Arc::new(Db::open(path, options(&fs)).expect("open"));
    let mut latest = build(&db);
    // Keys that will be live in the victims (round 0, not overwritten) and that the user
    // changes while GC is held.
    let overwritten: Vec<u32> = (0..KEYS).filter(|i| i % 3 == 1).take(5).collect();
    let deleted: Vec<u32> = (0..KEYS).filter(|i| i % 3 == 2).take(5).collect();
    let gate = fs.add_gate(FaultOp::Append, Some("MANIFEST"), 0);
    let gc = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.run_gc())
    };
    assert!(
        gate.wait_until_reached(Duration::from_secs(60)),
        "GC reaches its first edit"
    );
    for &i in &overwritten {
        db.put(key(i), value(i, 7))
            .expect("overwrite while GC is held");
        latest[i as usize] = 7;
    }
    for &i in &deleted {
        db.delete(key(i)).expect("delete while GC is held");
    }
    gate.open();
    let run = gc.join().expect("gc thread").expect("gc");
    let s = db.stats();
    assert_eq!(
        s.gc.write_back_conflicts,
        (overwritten.len() + deleted.len()) as u64,
        "each user write won against the write-back of its key"
    );
    assert_eq!(
        s.gc.written_back + s.gc.write_back_conflicts,
        run.totals.records_written
    );
    for i in 0..KEYS {
        let want = if deleted.contains(&i) {
            None
        } else {
            Some(value(i, latest[i as usize]))
        };
        assert_eq!(db.get(key(i)).expect("get"), want, "{}", key(i));
    }
    // The copies of the overwritten and deleted keys are garbage already.
    assert!(
        s.values.garbage_records >= (overwritten.len() + deleted.len()) as u64,
        "{:?}",
        s.values
    );
    assert_recount(&db, "after the race");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_recount(&db, "after compaction");
    let db = Arc::into_inner(db).expect("only handle");
    sim::check_recovered_state(db, path, &options(&fs), "after the race");
}

/// A snapshot taken before the job reads the versions it read, from the victims, which stay on
/// disk (retired) until the snapshot is gone, even after the write-backs are flushed.
#[test]
fn a_snapshot_spanning_gc_keeps_the_victims_readable_until_it_is_released() {
    let fs = FaultFs::new(3);
    let path = Path::new("/titan-snapshot");
    let db = Db::open(path, options(&fs)).expect("open");
    let at_snapshot = build(&db);
    let snapshot = db.snapshot();
    // Overwrite half of the keys after the snapshot and compact: the round-0 and round-1
    // versions the snapshot reads are now shadowed, and more of the victims is garbage.
    let mut latest = at_snapshot.clone();
    for i in (0..KEYS).filter(|i| i % 2 == 0) {
        db.put(key(i), value(i, 2)).expect("put");
        latest[i as usize] = 2;
    }
    db.compact_range(None, None).expect("compact");
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    db.flush().expect("flush");
    let s = db.stats();
    assert!(
        s.values.retired_tables > 0,
        "the snapshot keeps the victims: {:?}",
        s.values
    );
    // The value tables on disk that are not live are the retired ones.
    let retired_files = |db: &Db| -> Vec<String> {
        let live: Vec<String> = db
            .stats()
            .values
            .per_table
            .iter()
            .map(|t| format!("{:06}.vst", t.number))
            .collect();
        fs.list_files()
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| n.ends_with(".vst") && !live.contains(n))
            .collect()
    };
    let retired = retired_files(&db);
    assert_eq!(retired.len(), s.values.retired_tables, "{retired:?}");
    let read_at = |i: u32| {
        db.get_with(key(i), &ReadOptions::default().at(&snapshot))
            .expect("read at the snapshot")
    };
    for i in 0..KEYS {
        assert_eq!(
            read_at(i),
            Some(value(i, at_snapshot[i as usize])),
            "{} at the snapshot",
            key(i)
        );
    }
    assert_reads(&db, &latest, "now");
    assert_recount(&db, "with the snapshot");
    drop(snapshot);
    // The next job (or flush) releases them.
    db.put("after", "x").expect("put");
    db.flush().expect("flush");
    let s = db.stats();
    assert_eq!(
        s.values.retired_tables, 0,
        "released with the snapshot gone"
    );
    assert!(
        retired_files(&db).is_empty(),
        "the retired tables {retired:?} were deleted"
    );
    assert_reads(&db, &latest, "after release");
    assert_recount(&db, "after release");
    sim::check_recovered_state(db, path, &options(&fs), "after release");
}

/// Titan counts a blob file's garbage only when compaction drops an index entry, so a
/// written-back index entry that a flush drops (the key was overwritten again before the flush)
/// is never counted, and the GC output's live size stays overstated (tikv/titan #86). Here a
/// flush that drops a written-back handle counts its record as garbage.
#[test]
fn a_written_back_handle_dropped_by_a_flush_is_garbage() {
    let fs = FaultFs::new(4);
    let path = Path::new("/titan-flush-drop");
    let db = Db::open(path, options(&fs)).expect("open");
    let mut latest = build(&db);
    let run = db.run_gc().expect("gc");
    assert!(run.totals.records_written > 0);
    let garbage_before = db.stats().values.garbage_records;
    // The write-backs are in the memtable; overwrite some of their keys there too.
    let again: Vec<u32> = (0..KEYS).filter(|i| i % 3 == 1).take(8).collect();
    for &i in &again {
        db.put(key(i), value(i, 9)).expect("put");
        latest[i as usize] = 9;
    }
    db.flush().expect("flush");
    let s = db.stats();
    assert_eq!(
        s.values.garbage_records,
        garbage_before + again.len() as u64,
        "the flush counted the written-back handles it dropped"
    );
    assert_reads(&db, &latest, "after the flush");
    assert_recount(&db, "after the flush");
    sim::check_recovered_state(db, path, &options(&fs), "after the flush");
}

/// Keys of the inline tests below, whose GC jobs write back more handles than a memtable holds.
const WIDE_KEYS: u32 = 400;

fn wide_key(i: u32) -> String {
    format!("wide{i:05}")
}

/// 200 bytes naming the key and its round: separated under [`inline_options`].
fn wide_value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i} {round} ").into_bytes();
    v.resize(200, b'a' + (round % 26) as u8);
    v
}

/// Inline work with GC on (one GC thread's worth, run at the fixed points), a 4 KiB memtable
/// and one immutable memtable: a job's write-backs fill the memtables many times over, so the
/// write path must make room (flush) in the middle of a job's commit.
fn inline_options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_gc_threads(1)
        .with_gc_policy(GcPolicyKind::Titan)
        .with_titan_discardable_ratio(0.2)
        .with_memtable_size(4 << 10)
        .with_max_immutable_memtables(1)
        .with_min_separated_value_size(200)
}

/// Runs `f` on a thread of its own and returns what it returns. A deadlock detector, not a
/// timing assertion: the work takes well under a second, and a deadlocked thread never
/// returns, so 30 s only separates "finished" from "hung".
fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(v) => v,
        // The closure panicked: show its panic.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(worker.join().expect_err("the worker sent nothing"))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within 30 s: deadlocked")
        }
    }
}

/// Reads every wide key against its round in `latest` (`None`: deleted).
fn assert_wide_reads(db: &Db, latest: &[Option<u32>], ctx: &str) {
    for (i, round) in latest.iter().enumerate() {
        let i = i as u32;
        assert_eq!(
            db.get(wide_key(i))
                .unwrap_or_else(|e| panic!("{ctx}: {}: {e}", wide_key(i))),
            round.map(|r| wide_value(i, r)),
            "{ctx}: {}",
            wide_key(i)
        );
    }
}

/// Writes every wide key (round 0), overwrites every third (round 1) and compacts, each step
/// checked for a deadlock; returns each key's round.
fn load_wide(db: &Arc<Db>) -> Vec<Option<u32>> {
    let db = Arc::clone(db);
    finishes("loading", move || {
        let mut latest = vec![Some(0); WIDE_KEYS as usize];
        for i in 0..WIDE_KEYS {
            db.put(wide_key(i), wide_value(i, 0)).expect("put");
        }
        for i in (0..WIDE_KEYS).step_by(3) {
            db.put(wide_key(i), wide_value(i, 1)).expect("overwrite");
            latest[i as usize] = Some(1);
        }
        db.compact_range(None, None).expect("compact");
        latest
    })
}

/// Issue 23, item 3: a titan job run by inline work held the inline turn while it wrote its
/// handles back; once they filled the memtables, the write path ran inline work to make room
/// on the same thread, which took the turn again and waited on itself forever.
#[test]
fn inline_write_backs_that_fill_the_memtables_do_not_deadlock() {
    let fs = FaultFs::new(5);
    let path = Path::new("/titan-inline-fill");
    let db = Arc::new(Db::open(path, inline_options(&fs)).expect("open"));
    let latest = load_wide(&db);
    {
        let db = Arc::clone(&db);
        finishes("a put after the compaction", move || {
            db.put("after", "x").expect("put");
        });
    }
    let s = db.stats();
    assert!(s.gc.jobs > 0, "{:?}", s.gc);
    assert!(
        s.gc.written_back > 100,
        "a job wrote back more handles than a memtable holds: {:?}",
        s.gc
    );
    assert_wide_reads(&db, &latest, "after GC");
    assert_eq!(db.get("after").expect("get"), Some(b"x".to_vec()));
    assert_recount(&db, "after GC");
    let db = Arc::into_inner(db).expect("only handle");
    sim::check_recovered_state(db, path, &inline_options(&fs), "after GC");
}

/// Issue 23, item 3, the other way to deadlock: a writer that found the memtables full ran the
/// inline work to make room while it held the WAL and led the write queue; when that work
/// claimed a titan job, the job's write-backs queued behind the writer running them. Here the
/// writer making room is itself a job's write-back: the garbage is made with GC off, then the
/// database is reopened with it on and small jobs (`gc_max_input_size`), so that while one job
/// writes back, filling the memtables, the next is due already.
#[test]
fn room_made_for_a_write_back_runs_no_gc_job() {
    let fs = FaultFs::new(6);
    let path = Path::new("/titan-inline-nested");
    let opts = || inline_options(&fs).with_gc_max_input_size(32 << 10);
    let db = Arc::new(Db::open(path, opts().with_gc_threads(0)).expect("open"));
    let mut latest = load_wide(&db);
    Arc::into_inner(db)
        .expect("only handle")
        .close()
        .expect("close");
    // The fixed point at the end of open runs every job that is due.
    let db = {
        let opts = opts();
        finishes("the reopen", move || {
            Arc::new(Db::open(path, opts).expect("reopen"))
        })
    };
    let s = db.stats();
    assert!(s.gc.jobs > 1, "{:?}", s.gc);
    assert!(
        s.gc.written_back > 100,
        "the jobs' write-backs filled the memtables: {:?}",
        s.gc
    );
    {
        let db = Arc::clone(&db);
        finishes("overwrites, GC and a put", move || {
            for i in (1..WIDE_KEYS).step_by(3) {
                db.put(wide_key(i), wide_value(i, 2)).expect("overwrite");
            }
            db.compact_range(None, None).expect("compact");
            db.run_gc().expect("gc");
        });
    }
    for i in (1..WIDE_KEYS).step_by(3) {
        latest[i as usize] = Some(2);
    }
    assert_wide_reads(&db, &latest, "after GC");
    assert_recount(&db, "after GC");
    let db = Arc::into_inner(db).expect("only handle");
    sim::check_recovered_state(db, path, &opts(), "after GC");
}

/// Waits until `cond` holds: a bounded wait for something another thread is about to do, which
/// fails only if it never happens (the test would otherwise hang).
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen within 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Issue 23, item 4: a write-back job keeps its outputs claimed from the edit installing them to
/// the end of its write-backs. A flush that drops a written-back handle meanwhile (the key was
/// overwritten after its write-back) counts the record as garbage of the output at once, and
/// keeps it as a late drop for the job holding the claim — which only inheritance commits read,
/// and then only for their victims, so these stayed for good. They must be freed when the claim
/// ends, and the garbage still counted.
///
/// Deterministic through gates: the job is held at its second write-back while a user write of
/// the first write-back's key waits behind it (the write queue shows it); the user write fills
/// the memtable, so the job's third write-back seals it and is held in turn, while the flush
/// worker flushes the sealed memtable — dropping the first write-back — with the outputs still
/// claimed.
#[test]
fn late_drops_of_a_write_back_jobs_outputs_are_freed_with_its_claim() {
    const MEMTABLE: u64 = 64 << 10;
    let fs = FaultFs::new(7);
    let path = Path::new("/titan-late-drops");
    // Background workers: the flush runs on the flush thread while the job is held. No GC
    // thread: the test runs the job.
    let opts = || {
        Options::default()
            .with_file_system(Arc::new(fs.clone()))
            .with_gc_threads(0)
            .with_gc_policy(GcPolicyKind::Titan)
            .with_titan_discardable_ratio(0.2)
            .with_memtable_size(MEMTABLE)
            .with_l0_compaction_trigger(8)
            .with_value_table_size(64 << 10)
            .with_min_separated_value_size(100)
    };
    let db = Arc::new(Db::open(path, opts()).expect("open"));
    let latest = build(&db);
    db.flush().expect("flush");
    // The first key the job writes back: the live records of its victims are copied, and
    // written back, in key order; key 0 was overwritten (round 1), key 1 was not. (Should that
    // change, the wait for a late drop below fails: the test cannot pass testing nothing.)
    let first = 1;
    assert_eq!(latest[first as usize], 0);
    // Every write group that does not sync flushes the WAL once; from here on the job's
    // write-backs and the one user write below are the only writes.
    let second_write_back = fs.add_gate(FaultOp::Flush, Some(".log"), 1);
    let third_write_back = fs.add_gate(FaultOp::Flush, Some(".log"), 3);
    let gc = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.run_gc())
    };
    assert!(
        second_write_back.wait_until_reached(Duration::from_secs(60)),
        "the job reaches its second write-back"
    );
    let big = vec![b'u'; MEMTABLE as usize];
    let user = {
        let db = Arc::clone(&db);
        let big = big.clone();
        std::thread::spawn(move || db.put(key(first), big))
    };
    // The job's write-back at the head of the queue, the user write behind it.
    wait_until("the user write queues behind the write-back", || {
        db.stats().operations.writes_queued == 2
    });
    second_write_back.open();
    user.join().expect("user thread").expect("user write");
    assert!(
        third_write_back.wait_until_reached(Duration::from_secs(60)),
        "the job reaches its third write-back, past the memtable it sealed"
    );
    wait_until("the flush records a late drop for an output", || {
        db.stats().gc.late_drops > 0
    });
    let s = db.stats();
    assert!(
        s.gc.claimed > 0,
        "the job still holds its claims: {:?}",
        s.gc
    );
    third_write_back.open();
    let run = gc.join().expect("gc thread").expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    let s = db.stats();
    assert_eq!(s.gc.claimed, 0, "{:?}", s.gc);
    assert_eq!(
        s.gc.late_drops, 0,
        "the late drops went with the claims: {:?}",
        s.gc
    );
    assert_eq!(db.get(key(first)).expect("get"), Some(big.clone()));
    for i in (0..KEYS).filter(|i| *i != first) {
        assert_eq!(
            db.get(key(i)).expect("get"),
            Some(value(i, latest[i as usize])),
            "{}",
            key(i)
        );
    }
    assert_recount(&db, "after the job");
    db.compact_range(None, None).expect("compact");
    assert_recount(&db, "after compaction");
    let db = Arc::into_inner(db).expect("only handle");
    sim::check_recovered_state(db, path, &opts(), "after the job");
}

/// Titan with background GC threads (the tests above run GC themselves): jobs run on GC workers
/// while four threads write — their write-backs racing user writes for real and filling small
/// memtables that the flush worker must flush before they can go on — and then until nothing
/// is left to collect. Every value must read exactly, scans included, and the garbage recount
/// must match.
#[test]
fn background_gc_threads_keep_every_value_exact() {
    const WRITERS: u32 = 4;
    const ROUNDS: u32 = 5;
    let fs = FaultFs::new(8);
    let path = Path::new("/titan-gc-threads");
    let opts = || {
        Options::default()
            .with_file_system(Arc::new(fs.clone()))
            .with_gc_threads(2)
            .with_gc_policy(GcPolicyKind::Titan)
            .with_titan_discardable_ratio(0.2)
            .with_memtable_size(4 << 10)
            .with_max_immutable_memtables(1)
            .with_key_table_size(8 << 10)
            .with_level_base_size(32 << 10)
            .with_l0_compaction_trigger(2)
            .with_value_table_size(8 << 10)
            .with_min_separated_value_size(200)
            .with_gc_max_input_size(32 << 10)
    };
    let db = Arc::new(Db::open(path, opts()).expect("open"));
    let per_writer = WIDE_KEYS / WRITERS;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    for i in (w * per_writer)..((w + 1) * per_writer) {
                        db.put(wide_key(i), wide_value(i, round)).expect("put");
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer thread");
    }
    let mut latest: Vec<Option<u32>> = vec![Some(ROUNDS - 1); WIDE_KEYS as usize];
    // Every last-round value in a value table (they are all the live records), then a third of
    // the keys overwritten and a sixth deleted, and compacted: half the live records, all of
    // one size, turn to garbage, so some table is at least half garbage whatever the workers
    // did so far, and GC has work left for them.
    db.flush().expect("flush");
    for i in (0..WIDE_KEYS).step_by(3) {
        db.put(wide_key(i), wide_value(i, ROUNDS)).expect("put");
        latest[i as usize] = Some(ROUNDS);
    }
    for i in (1..WIDE_KEYS).step_by(6) {
        db.delete(wide_key(i)).expect("delete");
        latest[i as usize] = None;
    }
    db.compact_range(None, None).expect("compact");
    // Bounded wait for the workers to collect everything due (they look every second even
    // unwoken); it fails only if they never do.
    wait_until("GC workers collect every table due", || {
        let s = db.stats();
        s.gc.claimed == 0
            && s.values.per_table.iter().all(|t| {
                t.garbage_bytes == 0 || (t.garbage_bytes as f64) < 0.2 * t.record_bytes as f64
            })
    });
    let s = db.stats();
    assert!(s.gc.jobs > 0 && s.gc.written_back > 0, "{:?}", s.gc);
    assert_eq!(s.gc.errors, 0, "{:?}", s.gc.last_error);
    assert_eq!(s.gc.late_drops, 0, "{:?}", s.gc);
    assert_wide_reads(&db, &latest, "after GC");
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("scan"))
        .collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = latest
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.map(|r| (wide_key(i as u32).into_bytes(), wide_value(i as u32, r))))
        .collect();
    assert!(scanned == expected, "the scan differs from the model");
    assert_recount(&db, "after GC");
    let db = Arc::into_inner(db).expect("only handle");
    db.close().expect("close");
    let db = Db::open(path, opts()).expect("reopen");
    assert_wide_reads(&db, &latest, "after reopen");
    sim::check_recovered_state(db, path, &opts(), "after reopen");
}

/// A retired table whose write-backs are all that is left in the active memtable is released
/// without another write: with writes paused (a writer waiting for disk space, a phase of
/// reads), nothing else would ever seal that memtable, and the victims' bytes would stay on disk
/// however long. A background GC worker seals it once it has held the release for a while.
#[test]
fn a_retired_table_is_released_while_no_write_comes() {
    let fs = FaultFs::new(9);
    let path = Path::new("/titan-idle-release");
    let opts = || {
        options(&fs)
            .with_inline_background_work(false)
            .with_gc_threads(1)
    };
    let db = Db::open(path, opts()).expect("open");
    let latest = build(&db);
    // No write from here on: the background worker collects, writes back, retires, and must
    // then release by itself. Bounded wait; it fails only if the release never comes.
    wait_until("the worker's victims are released", || {
        let s = db.stats();
        s.gc.written_back > 0 && s.gc.claimed == 0 && s.values.retired_tables == 0
    });
    let s = db.stats();
    assert!(
        s.values.tables_released > 0,
        "{:?}",
        s.values.tables_released
    );
    assert!(
        s.values.memtables_sealed_for_release > 0,
        "the write-backs' memtable was sealed for the release"
    );
    assert_reads(&db, &latest, "after release");
    assert_recount(&db, "after release");
    db.close().expect("close");
    let db = Db::open(path, opts()).expect("reopen");
    assert_reads(&db, &latest, "after reopen");
}

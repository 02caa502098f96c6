//! A memtable switch syncs nothing: the log it closes stays unsynced until a later sync needs
//! it durable or its memtable is flushed (`db/sealed_logs.rs`). These tests pin the three
//! sides of that: no sync on the writer's path at a switch; a power loss that takes the closed
//! log's tail but keeps a later log's bytes recovers a prefix of the writes (recovery sees the
//! gap in the sequence numbers and replays nothing after it); and a synced write makes every
//! earlier write durable, so losing one of those is corruption.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gleaner::io::{FaultFs, FaultGate, FaultOp, FaultRule, TornMode};
use gleaner::{Db, Options, SeparateAt, WriteBatch, WriteOptions};

const MEMTABLE: u64 = 64 << 10;
/// Writes: about 1.5 memtables of them, so one switch.
const WRITES: u32 = 100;

fn options(fs: &FaultFs, separate_at: SeparateAt) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(MEMTABLE)
        .with_min_separated_value_size(512)
        .with_separate_at(separate_at)
        .with_gc_threads(0)
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value {i} ").into_bytes();
    v.resize(1000, b'v');
    v
}

fn put(db: &Db, i: u32, sync: bool) {
    let mut b = WriteBatch::new();
    b.put(key(i), value(i));
    db.write(b, &WriteOptions { sync }).expect("write");
}

fn wals(fs: &FaultFs) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = fs
        .list_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

/// Opens a database and writes keys `0..WRITES` (the last one synced if `sync_last`), with the
/// flush of the first memtable held at its first key table, so both logs are still needed.
fn two_logs(
    fs: &FaultFs,
    path: &Path,
    separate_at: SeparateAt,
    sync_last: bool,
) -> (Db, FaultGate) {
    let db = Db::open(path, options(fs, separate_at)).expect("open");
    let flush = fs.add_gate(FaultOp::Create, Some(".sst"), 0);
    for i in 0..WRITES {
        put(&db, i, sync_last && i + 1 == WRITES);
    }
    assert!(
        flush.wait_until_reached(Duration::from_secs(60)),
        "the first memtable was sealed and its flush started"
    );
    assert_eq!(
        wals(fs).len(),
        2,
        "the sealed memtable's log and the active one"
    );
    (db, flush)
}

/// Power is lost: the file system freezes, `damage` changes what is on the device, and the
/// crash drops every unsynced byte; then the held flush fails and the handle goes.
fn lose_power(fs: &FaultFs, db: Db, flush: FaultGate, damage: impl FnOnce(&[PathBuf])) {
    fs.set_crash_after(0);
    damage(&wals(fs));
    fs.crash(TornMode::None);
    flush.open();
    drop(db);
}

/// Keeps the first half of the older log and all of the newer one, durably, with every value
/// segment the logs name (`separate_at=write`) whole.
fn lose_the_older_logs_tail(fs: &FaultFs, logs: &[PathBuf]) {
    for file in fs.list_files() {
        if file.extension().is_some_and(|e| e == "vst") {
            let bytes = fs.file_bytes(&file).expect("value file");
            fs.set_file_bytes(&file, bytes).expect("keep");
        }
    }
    let older = fs.file_bytes(&logs[0]).expect("older log");
    fs.set_file_bytes(&logs[0], older[..older.len() / 2].to_vec())
        .expect("cut");
    let newer = fs.file_bytes(&logs[1]).expect("newer log");
    fs.set_file_bytes(&logs[1], newer).expect("keep");
}

/// The keys present, which must be `0..n` for some `n` (a prefix of the writes): returns `n`.
fn recovered_prefix(db: &Db) -> u32 {
    let present: Vec<u32> = (0..WRITES)
        .filter(|&i| {
            let got = db.get(key(i)).expect("get");
            if let Some(v) = &got {
                assert_eq!(v, &value(i), "{}", key(i));
            }
            got.is_some()
        })
        .collect();
    let n = present.len() as u32;
    assert_eq!(
        present,
        (0..n).collect::<Vec<_>>(),
        "not a prefix of the writes"
    );
    n
}

#[test]
fn a_memtable_switch_syncs_no_log() {
    let fs = FaultFs::new(1);
    let path = Path::new("/db");
    let opts = || options(&fs, SeparateAt::Flush).with_inline_background_work(true);
    let db = Db::open(path, opts()).expect("open");
    fs.add_fault(FaultRule::counter(FaultOp::Sync, Some(".log".to_string())));
    for i in 0..3 * WRITES {
        let mut b = WriteBatch::new();
        b.put(format!("{}-{i}", key(i % WRITES)), value(i));
        db.write(b, &WriteOptions { sync: false }).expect("write");
    }
    assert!(
        db.stats().compaction.flushes >= 3,
        "memtables were switched"
    );
    assert_eq!(fs.fault_rule_matches()[0], 0, "log syncs before close");
    db.close().expect("close");
    assert!(fs.fault_rule_matches()[0] > 0, "close syncs the log");
}

#[test]
fn a_log_that_lost_its_tail_ends_the_replay() {
    for separate_at in [SeparateAt::Flush, SeparateAt::Write] {
        let fs = FaultFs::new(2);
        let path = Path::new("/db");
        let (db, flush) = two_logs(&fs, path, separate_at, false);
        lose_power(&fs, db, flush, |logs| lose_the_older_logs_tail(&fs, logs));
        // `gleaner check` tells what recovery will drop, and finds nothing wrong.
        let report = gleaner::tools::check_db(path, &options(&fs, separate_at)).expect("check");
        assert!(report.problems.is_empty(), "{:#?}", report.problems);
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.detail.contains("unsynced tail")),
            "{:#?}",
            report.warnings
        );
        let db = Db::open(path, options(&fs, separate_at)).expect("reopen");
        let n = recovered_prefix(&db);
        let lost = db.stats().recovery.lost_log_records;
        assert!(
            n > 0 && n < WRITES / 2,
            "{separate_at:?}: {n} keys recovered"
        );
        assert!(
            lost > 0,
            "{separate_at:?}: the newer log's records were dropped"
        );
        db.close().expect("close");
        let db = Db::open(path, options(&fs, separate_at)).expect("clean reopen");
        assert_eq!(recovered_prefix(&db), n);
    }
}

#[test]
fn a_synced_write_makes_the_sealed_logs_durable() {
    for separate_at in [SeparateAt::Flush, SeparateAt::Write] {
        let fs = FaultFs::new(3);
        let path = Path::new("/db");
        let (db, flush) = two_logs(&fs, path, separate_at, true);
        lose_power(&fs, db, flush, |_| {});
        let db = Db::open(path, options(&fs, separate_at)).expect("reopen");
        assert_eq!(recovered_prefix(&db), WRITES, "{separate_at:?}");
        assert_eq!(db.stats().recovery.lost_log_records, 0);
    }
}

#[test]
fn losing_writes_a_later_sync_made_durable_is_corruption() {
    let fs = FaultFs::new(4);
    let path = Path::new("/db");
    let (db, flush) = two_logs(&fs, path, SeparateAt::Flush, true);
    // A record after the sync: its sync point shows the newer log, and so every log before
    // it, had been synced.
    put(&db, WRITES, false);
    lose_power(&fs, db, flush, |logs| lose_the_older_logs_tail(&fs, logs));
    let report = gleaner::tools::check_db(path, &options(&fs, SeparateAt::Flush)).expect("check");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.detail.contains("had been synced")),
        "{:#?}",
        report.problems
    );
    match Db::open(path, options(&fs, SeparateAt::Flush)) {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(_) => panic!("losing synced writes must fail the open"),
    }
}

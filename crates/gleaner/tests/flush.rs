//! What a flush costs the thread writers wait on: its outputs are made durable with one
//! directory sync, and the files it and compactions make obsolete (the flushed memtable's WAL,
//! compacted tables) are deleted by the purge thread, with no foreground call to trigger it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gleaner::io::{FaultFs, FaultOp, FaultRule};
use gleaner::{Db, GcPolicyKind, Options};

/// Bound on the wait for the purge thread (a hang is a failure, not a stuck CI job).
const WAIT: Duration = Duration::from_secs(60);

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_memtable_size(1 << 20)
        .with_min_separated_value_size(100)
        .with_gc_threads(0)
}

fn put_round(db: &Db, round: u32) {
    for i in 0..200u32 {
        let mut v = format!("{i} {round} ").into_bytes();
        v.resize(600, b'v');
        db.put(format!("key{i:04}"), v).expect("put");
    }
}

/// Counts one kind of operation from now on (a rule that never fires).
fn count(fs: &FaultFs, op: FaultOp) -> usize {
    fs.add_fault(FaultRule::counter(op, None));
    fs.fault_rule_matches().len() - 1
}

#[test]
fn a_flush_syncs_the_directory_once_for_all_its_tables() {
    let fs = FaultFs::new(1);
    let db = Db::open(
        Path::new("/db"),
        options(&fs).with_inline_background_work(true),
    )
    .expect("open");
    put_round(&db, 0);
    let syncs = count(&fs, FaultOp::SyncDir);
    let creates = count(&fs, FaultOp::Create);
    db.flush().expect("flush");
    let matched = fs.fault_rule_matches();
    let stats = db.stats();
    assert_eq!(stats.compaction.flushes, 1);
    assert!(
        stats.values.tables >= 1 && stats.levels[0].files == 1,
        "one key table and its value tables: {stats:?}"
    );
    // The memtable switch creates a WAL without syncing the directory; the flush creates its
    // key and value tables and syncs the directory once for all of them, which makes the new
    // WAL's entry durable too before its edit names that WAL.
    assert_eq!(
        matched[creates],
        1 + 1 + stats.values.tables as u64,
        "files created"
    );
    assert_eq!(
        matched[syncs],
        1,
        "directory syncs: one for the flush's {} tables and the new WAL",
        1 + stats.values.tables
    );
}

fn wal_and_table_files(fs: &FaultFs) -> (usize, usize) {
    let files = fs.list_files();
    let ends = |ext: &str| {
        files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .count()
    };
    (ends("log"), ends("sst"))
}

#[test]
fn the_purge_thread_deletes_flushed_wals_and_compacted_tables() {
    let fs = FaultFs::new(2);
    let db = Db::open(Path::new("/db"), options(&fs).with_l0_compaction_trigger(2)).expect("open");
    for round in 0..4 {
        put_round(&db, round);
        db.flush().expect("flush");
    }
    // Nothing on this thread deletes files from here on: the workers compact, the purge thread
    // deletes what they leave behind.
    let start = Instant::now();
    loop {
        let stats = db.stats();
        let live_tables: usize = stats.levels.iter().map(|l| l.files).sum();
        let (wals, tables) = wal_and_table_files(&fs);
        let quiet = stats.compaction.running == 0 && stats.immutable_memtables == 0;
        if quiet && stats.compaction.compactions > 0 && wals == 1 && tables == live_tables {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "obsolete files left after {WAIT:?}: {wals} WALs (1 live), {tables} key tables \
             ({live_tables} live), {} compactions",
            stats.compaction.compactions
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    db.close().expect("close");
}

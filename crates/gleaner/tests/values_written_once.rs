//! Values written once (`separate_at=write`): a separated value is appended to a value segment
//! of its memtable as it is written, the log and the memtable hold its handle, and the flush
//! seals the segment into a value table. Reads find every value before and after the flush and
//! across reopens and crashes; the garbage of values overwritten before the flush is counted;
//! the option switches on reopen both ways.

use std::path::Path;
use std::sync::Arc;

use gleaner::io::{FaultFs, TornMode};
use gleaner::{Db, Options, SeparateAt, WriteBatch, WriteOptions};

fn options(fs: &FaultFs) -> Options {
    unset_options(fs).with_separate_at(SeparateAt::Write)
}

/// [`options`] without `separate_at`: the OPTIONS file's value applies.
fn unset_options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(256 << 10)
        .with_key_table_size(16 << 10)
        .with_level_base_size(64 << 10)
        .with_value_table_size(64 << 10)
        .with_min_separated_value_size(256)
        .with_gc_garbage_ratio(0.2)
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    // Some stay inline (below 256 bytes), most are separated.
    v.resize(100 + (i as usize % 9) * 200, b'a' + (round % 26) as u8);
    v
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn check_all(db: &Db, n: u32, round: u32, ctx: &str) {
    for i in 0..n {
        let got = db.get(key(i)).expect("get");
        assert_eq!(got, Some(value(i, round)), "{ctx}: key {i}");
    }
}

fn assert_recount_clean(db: &Db) {
    let r = db.recount_garbage().expect("recount");
    assert!(
        r.mismatches.is_empty(),
        "garbage accounting drifted: {:#?}",
        r.mismatches
    );
}

#[test]
fn values_are_written_once_and_read_before_and_after_the_flush() {
    let fs = FaultFs::new(1);
    let path = Path::new("/db");
    let db = Db::open(path, options(&fs).with_gc_threads(0)).expect("open");
    let n = 200;
    for i in 0..n {
        db.put(key(i), value(i, 0)).expect("put");
    }
    check_all(&db, n, 0, "in the memtable");
    let stats = db.stats();
    let segment = &stats.io["segment"];
    let separated: u64 = (0..n)
        .map(|i| value(i, 0).len() as u64)
        .filter(|&l| l >= 256)
        .sum();
    assert!(
        segment.write_bytes >= separated,
        "segments hold every separated value: {} < {separated}",
        segment.write_bytes
    );
    let wal = stats.io["wal"].write_bytes;
    assert!(
        wal < separated / 4,
        "the log holds handles, not values: {wal}"
    );
    // Every put's key and value are the user's bytes, whether its value became a handle.
    let user: u64 = (0..n)
        .map(|i| (key(i).len() + value(i, 0).len()) as u64)
        .sum();
    assert_eq!(stats.operations.user_bytes_written, user);
    db.flush().expect("flush");
    check_all(&db, n, 0, "after the flush");
    let stats = db.stats();
    assert!(
        stats.io["flush"].write_bytes < separated / 4,
        "the flush writes key tables only: {}",
        stats.io["flush"].write_bytes
    );
    // Overwrite half in one memtable, then again: the first overwrites are garbage of the
    // segment they were written to.
    for round in 1..=2 {
        for i in (0..n).filter(|i| i % 2 == 0) {
            db.put(key(i), value(i, round)).expect("put");
        }
    }
    for i in (0..n).filter(|i| i % 2 == 1) {
        db.put(key(i), value(i, 2)).expect("put");
    }
    check_all(&db, n, 2, "overwritten, in the memtable");
    db.flush().expect("flush");
    check_all(&db, n, 2, "overwritten, flushed");
    assert_recount_clean(&db);
    db.compact_range(None, None).expect("compact");
    db.run_gc().expect("gc");
    check_all(&db, n, 2, "after compaction and GC");
    assert_recount_clean(&db);
    db.close().expect("close");
    // Files created ahead for later segments are deleted at close: nothing is left orphaned.
    let report = gleaner::tools::check_db(path, &options(&fs)).expect("check");
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert!(
        !report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("orphan")),
        "{:#?}",
        report.warnings
    );
    let db = Db::open(path, options(&fs)).expect("reopen");
    check_all(&db, n, 2, "reopened");
    assert_recount_clean(&db);
}

#[test]
fn a_crash_keeps_every_synced_value_and_seals_the_open_segments() {
    for torn in [
        TornMode::None,
        TornMode::KeepPrefixWithGarbage,
        TornMode::KeepRandomPrefix,
    ] {
        let fs = FaultFs::new(7);
        let path = Path::new("/db");
        let db = Db::open(path, options(&fs).with_gc_threads(0)).expect("open");
        let n = 150;
        for i in 0..n {
            let mut b = WriteBatch::new();
            b.put(key(i), value(i, 0));
            db.write(b, &WriteOptions { sync: true }).expect("write");
        }
        // A round of unsynced writes, made durable by one synced write after it.
        for i in 0..n {
            db.put(key(i), value(i, 1)).expect("put");
        }
        db.write(
            {
                let mut b = WriteBatch::new();
                b.put(key(n), value(n, 1));
                b
            },
            &WriteOptions { sync: true },
        )
        .expect("write");
        // Unsynced writes after the last synced one may be lost, as a prefix.
        for i in 0..n {
            db.put(key(i), value(i, 2)).expect("put");
        }
        fs.crash(torn);
        drop(db);
        // A torn value is no damage: check only warns of it.
        let report = gleaner::tools::check_db(path, &options(&fs)).expect("check");
        assert!(report.is_clean(), "{torn:?}: {:#?}", report.problems);
        let warned = report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("torn write"));
        let db = Db::open(path, options(&fs)).expect("reopen after the crash");
        assert_eq!(
            warned,
            db.stats().recovery.torn_writes > 0,
            "{torn:?}: check and recovery agree"
        );
        // A prefix of the unsynced round survived.
        let mut seen_old = false;
        for i in 0..n {
            let got = db
                .get(key(i))
                .expect("get")
                .expect("every synced key is there");
            if got == value(i, 1) {
                seen_old = true;
            } else {
                assert_eq!(got, value(i, 2), "{torn:?}: key {i}");
                assert!(!seen_old, "{torn:?}: key {i} is newer than a key before it");
            }
        }
        assert_eq!(db.get(key(n)).expect("get"), Some(value(n, 1)));
        let stats = db.stats();
        assert!(
            stats.recovery.segments_sealed > 0,
            "{torn:?}: {:#?}",
            stats.recovery
        );
        assert_recount_clean(&db);
        db.close().expect("close");
    }
}

#[test]
fn close_makes_the_values_of_unsynced_writes_durable() {
    let fs = FaultFs::new(3);
    let path = Path::new("/db");
    let db = Db::open(path, options(&fs).with_gc_threads(0)).expect("open");
    let n = 100;
    for i in 0..n {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.close().expect("close");
    // Power is lost after the close: what it synced stays, values included.
    fs.crash(TornMode::None);
    drop(db);
    let db = Db::open(path, options(&fs)).expect("reopen");
    check_all(&db, n, 0, "after close and a crash");
    assert_eq!(db.stats().recovery.torn_writes, 0);
}

/// The options of the tests on a real directory (the offline tools read it).
fn posix_options() -> Options {
    Options::default()
        .with_min_separated_value_size(256)
        .with_separate_at(SeparateAt::Write)
}

/// The value-table files (`.vst`) in `dir`: open segments, until an open seals them.
fn value_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "vst"))
        .collect()
}

/// The largest of `files`.
fn largest(files: &[std::path::PathBuf]) -> &std::path::PathBuf {
    files
        .iter()
        .max_by_key(|p| std::fs::metadata(p).expect("stat").len())
        .expect("a file")
}

/// Puts `n` keys (round `round`) through a database opened with `opts` in `dir`, and closes
/// it without a flush: its values stay in the segments of its memtable.
fn write_and_close(dir: &Path, opts: Options, n: u32, round: u32) {
    let db = Db::open(dir, opts).expect("open");
    for i in 0..n {
        db.put(key(i), value(i, round)).expect("put");
    }
    db.close().expect("close");
}

#[test]
fn open_segments_are_checked_dumped_and_read_by_a_read_only_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = posix_options;
    let n = 120;
    write_and_close(dir.path(), opts(), n, 0);
    let segments = value_files(dir.path());
    assert!(!segments.is_empty(), "the memtable's segments are on disk");
    let separated = (0..n).filter(|&i| value(i, 0).len() >= 256).count() as u64;

    let report = gleaner::tools::check_db(dir.path(), &opts()).expect("check");
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert_eq!(report.open_segment_values, separated);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("value segment left open")),
        "{:#?}",
        report.warnings
    );

    let mut text = Vec::new();
    gleaner::tools::dump_file(&segments[0], &mut text, false).expect("dump");
    let text = String::from_utf8(text).expect("utf8");
    assert!(text.starts_with("open value segment"), "{text}");
    assert!(text.contains("seq="), "{text}");

    let sizes = |paths: &[std::path::PathBuf]| -> Vec<u64> {
        paths
            .iter()
            .map(|p| std::fs::metadata(p).expect("stat").len())
            .collect()
    };
    let before = sizes(&segments);
    {
        let db = Db::open_read_only(dir.path(), opts()).expect("read-only open");
        check_all(&db, n, 0, "read-only");
    }
    assert_eq!(sizes(&segments), before, "a read-only open seals nothing");

    // The last record of a segment loses its tail after the close synced it: damage, not a
    // torn write. Check reports it, the open refuses it, and an open that skips damage loses
    // that write alone.
    let last = largest(&segments);
    let len = std::fs::metadata(last).expect("stat").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .expect("open segment");
    f.set_len(len - 10).expect("truncate");
    drop(f);
    let report = gleaner::tools::check_db(dir.path(), &opts()).expect("check");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.to_string().contains("the segment is damaged")),
        "{:#?}",
        report.problems
    );
    match Db::open(dir.path(), opts()) {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(_) => panic!("a damaged synced value must fail the open"),
    }
    let skip = || opts().with_wal_recovery_mode(gleaner::WalRecoveryMode::SkipAnyCorruptedRecords);
    let db = Db::open(dir.path(), skip()).expect("reopen skipping damage");
    assert_eq!(db.stats().recovery.torn_writes, 1);
    let present = (0..n)
        .filter(|&i| db.get(key(i)).expect("get") == Some(value(i, 0)))
        .count();
    assert_eq!(present, n as usize - 1, "the damaged write alone is lost");
    db.close().expect("close");
    let report = gleaner::tools::check_db(dir.path(), &skip()).expect("check");
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert_eq!(report.open_segment_values, 0, "sealed by the open");
}

#[test]
fn switching_separate_at_on_reopen_keeps_every_value() {
    let fs = FaultFs::new(5);
    let path = Path::new("/db");
    let n = 150;
    let at = |s| options(&fs).with_separate_at(s);
    // Written once, left in open segments; reopened to separate at flush, and back.
    write_and_close(path, at(SeparateAt::Write), n, 0);
    let db = Db::open(path, at(SeparateAt::Flush)).expect("reopen at flush");
    check_all(&db, n, 0, "written at write, reopened at flush");
    assert!(db.stats().recovery.segments_sealed > 0);
    assert_recount_clean(&db);
    db.close().expect("close");
    write_and_close(path, at(SeparateAt::Flush), n, 1);
    let db = Db::open(path, at(SeparateAt::Write)).expect("reopen at write");
    check_all(&db, n, 1, "written at flush, reopened at write");
    assert_eq!(db.options().separate_at(), SeparateAt::Write);
    for i in 0..n {
        db.put(key(i), value(i, 2)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    db.run_gc().expect("gc");
    check_all(&db, n, 2, "after a flush, compaction and GC");
    assert_recount_clean(&db);
    db.close().expect("close");
    // Left unset, the setting is the one saved by the last open.
    let db = Db::open(path, unset_options(&fs)).expect("reopen");
    assert_eq!(db.options().separate_at(), SeparateAt::Write);
    check_all(&db, n, 2, "reopened");
    db.close().expect("close");
    let db = Db::open(path, at(SeparateAt::Flush)).expect("reopen at flush");
    db.close().expect("close");
    let db = Db::open(path, unset_options(&fs)).expect("reopen");
    assert_eq!(db.options().separate_at(), SeparateAt::Flush);
    db.close().expect("close");
}

#[test]
fn damage_to_a_synced_value_is_corruption_not_a_torn_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = posix_options;
    let n = 60;
    {
        let db = Db::open(dir.path(), opts()).expect("open");
        for i in 0..n {
            let mut b = WriteBatch::new();
            b.put(key(i), value(i, 0));
            db.write(b, &WriteOptions { sync: true }).expect("write");
        }
        db.close().expect("close");
    }
    // A byte of the largest segment's first record flips: its value was synced.
    let segment = largest(&value_files(dir.path())).clone();
    let mut bytes = std::fs::read(&segment).expect("read");
    bytes[30] ^= 0x40;
    std::fs::write(&segment, &bytes).expect("write");
    match Db::open(dir.path(), opts()) {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(_) => panic!("a damaged synced value must fail the open"),
    }
    // Skipping damage loses the damaged writes (and every later one in that segment), keeps
    // the others.
    let db = Db::open(
        dir.path(),
        opts().with_wal_recovery_mode(gleaner::WalRecoveryMode::SkipAnyCorruptedRecords),
    )
    .expect("open skipping damage");
    assert!(db.stats().recovery.torn_writes > 0);
    let present = (0..n)
        .filter(|&i| db.get(key(i)).expect("get") == Some(value(i, 0)))
        .count();
    assert!(present > 0 && present < n as usize, "{present} of {n}");
    drop(db);
}

#[test]
fn a_read_only_open_skipping_damage_reads_past_a_missing_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = || {
        posix_options().with_wal_recovery_mode(gleaner::WalRecoveryMode::SkipAnyCorruptedRecords)
    };
    let n = 60;
    write_and_close(dir.path(), opts(), n, 0);
    let segments = value_files(dir.path());
    // Scavenger writes a hot and a cold segment; the cold one (every key here) goes.
    let biggest = largest(&segments);
    std::fs::remove_file(biggest).expect("remove");
    let db = Db::open_read_only(dir.path(), opts()).expect("read-only open");
    assert!(db.stats().recovery.torn_writes > 0);
    let inline = (0..n).filter(|&i| value(i, 0).len() < 256).count();
    let present = (0..n)
        .filter(|&i| db.get(key(i)).expect("get") == Some(value(i, 0)))
        .count();
    assert!(
        present >= inline && present < n as usize,
        "{present} of {n}"
    );
}

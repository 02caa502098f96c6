//! Damaged files are detected: a flipped byte in a WAL, a key table, the manifest or CURRENT
//! yields `Error::Corruption` naming the file (and offset), never a wrong value or a panic; a
//! truncated manifest or CURRENT either opens with every acknowledged write or is refused with an
//! error naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gleaner::io::{
    CountedReader, FaultFs, FaultKind, FaultOp, FaultRule, FileSystem, IoClass, IoStats,
    ReadFileOptions,
};
use gleaner::wal::{BLOCK_SIZE, decode_wal_record, wal_reader};
use gleaner::{Db, Error, Options, ReadOptions, WalRecoveryMode, WriteBatch, WriteOptions};

mod common;

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(1 << 20)
        .with_block_size(512)
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:05}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

fn files_with(fs: &FaultFs, dir: &Path, suffix: &str) -> Vec<PathBuf> {
    fs.list_files()
        .into_iter()
        .filter(|p| p.parent() == Some(dir) && p.to_string_lossy().ends_with(suffix))
        .collect()
}

/// The manifest in `dir` (there is one once the database is closed).
fn manifest_of(fs: &FaultFs, dir: &Path) -> PathBuf {
    files_with(fs, dir, "")
        .into_iter()
        .find(|p| name_of(p).starts_with("MANIFEST-"))
        .expect("a manifest")
}

/// The file name of `path`, as the engine's errors and `gleaner check` name files.
fn name_of(path: &Path) -> String {
    path.file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

fn write_keys(db: &Db, n: u32, sync: bool) {
    for i in 0..n {
        let mut b = WriteBatch::new();
        b.put(format!("key{i:05}"), value(i));
        db.write(b, &WriteOptions { sync }).expect("write");
    }
}

#[test]
fn a_flipped_byte_in_a_key_table_is_corruption_never_a_wrong_value() {
    let fs = FaultFs::new(1);
    let dir = Path::new("/corrupt-sst");
    let db = Db::open(dir, options(&fs)).expect("open");
    write_keys(&db, 400, false);
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let tables = files_with(&fs, dir, ".sst");
    assert_eq!(tables.len(), 1, "{tables:?}");
    let table = &tables[0];
    let name = name_of(table);
    let size = fs.file_bytes(table).expect("bytes").len() as u64;
    let mut detected = 0;
    for offset in (0..size).step_by((size / 40).max(1) as usize) {
        fs.corrupt_byte(table, offset, 0x10).expect("corrupt");
        let db = Db::open(dir, options(&fs)).expect("open does not read tables");
        let saw_corruption = read_all_or_corruption(&db, 400, &name, &format!("flip at {offset}"));
        if saw_corruption {
            detected += 1;
        }
        drop(db);
        fs.corrupt_byte(table, offset, 0x10).expect("restore");
    }
    // Every byte of a table is covered by a checksum: each flip must be noticed.
    assert_eq!(
        detected,
        (0..size).step_by((size / 40).max(1) as usize).count(),
        "undetected flips"
    );
}

#[test]
fn a_flipped_byte_in_the_wal_fails_the_open_or_is_skipped_by_request() {
    let fs = FaultFs::new(2);
    let dir = Path::new("/corrupt-wal");
    let db = Db::open(dir, options(&fs)).expect("open");
    write_keys(&db, 300, true);
    db.close().expect("close");
    drop(db);
    let wals = files_with(&fs, dir, ".log");
    let wal = wals
        .iter()
        .max_by_key(|p| fs.file_bytes(p).map_or(0, |b| b.len()))
        .expect("a WAL with data");
    let name = name_of(wal);
    let size = fs.file_bytes(wal).expect("bytes").len() as u64;
    let records = wal_records(&fs, wal);
    assert_eq!(
        records.iter().map(|(_, keys)| keys.len()).sum::<usize>(),
        300,
        "the WAL holds every write"
    );
    // One block: no record is split across blocks, so the damaged record is the only loss.
    assert!(size < BLOCK_SIZE as u64, "{size}");
    fs.corrupt_byte(wal, size / 3, 0x01).expect("corrupt");
    match Db::open(dir, options(&fs)) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, name);
            assert!(
                offset <= size / 3,
                "offset {offset} points at or before the damage"
            );
        }
        other => panic!("expected corruption naming {name}, got {other:?}"),
    }
    // Asking to skip damaged records recovers everything else: exactly the writes outside the
    // record the flipped byte is in, whose bytes are exactly what is dropped.
    let (start, end, lost) = record_holding(&records, size / 3);
    assert_eq!(lost.len(), 1, "the damaged record is one write: {lost:?}");
    let db = Db::open(
        dir,
        options(&fs).with_wal_recovery_mode(WalRecoveryMode::SkipAnyCorruptedRecords),
    )
    .expect("open skipping damage");
    let stats = db.stats();
    assert_eq!(
        stats.recovery.wal_dropped_bytes,
        end - start,
        "the damaged record's bytes [{start}, {end}) are dropped: {stats:?}"
    );
    for i in 0..300u32 {
        let k = format!("key{i:05}").into_bytes();
        let want = (k != lost[0]).then(|| value(i));
        assert_eq!(
            db.get(&k).expect("get"),
            want,
            "key{i:05} (the damaged record, at [{start}, {end}), holds {:?})",
            String::from_utf8_lossy(&lost[0])
        );
    }
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("scan item"))
        .collect();
    let expect: BTreeMap<Vec<u8>, Vec<u8>> = (0..300u32)
        .map(|i| (format!("key{i:05}").into_bytes(), value(i)))
        .filter(|(k, _)| *k != lost[0])
        .collect();
    assert_eq!(scanned.len(), 299);
    assert!(
        scanned == expect,
        "a scan returns every write but the damaged one"
    );
}

/// The records of a WAL, read before it is damaged: each record's offset and the keys its write
/// batch writes (none for a sync marker).
fn wal_records(fs: &FaultFs, wal: &Path) -> Vec<(u64, Vec<Vec<u8>>)> {
    let name = name_of(wal);
    let file = fs
        .open_readable(wal, ReadFileOptions::default())
        .expect("open the WAL");
    let mut reader = wal_reader(
        CountedReader::new(file, Arc::new(IoStats::default())),
        name.clone(),
        IoClass::Other,
        WalRecoveryMode::TolerateCorruptedTail,
    )
    .expect("WAL reader");
    let mut records = Vec::new();
    while let Some((offset, payload)) = reader.read_record().expect("the WAL is intact") {
        let keys = decode_wal_record(payload, &name, offset)
            .expect("the WAL record decodes")
            .map(|batch| {
                batch
                    .iter()
                    .map(|op| op.expect("a batch entry").key().to_vec())
                    .collect()
            })
            .unwrap_or_default();
        records.push((offset, keys));
    }
    assert!(reader.dropped().is_empty(), "{:?}", reader.dropped());
    records
}

/// The record whose bytes hold offset `at`: its start, its end (the next record's start, or the
/// end of the file) and the keys it writes.
fn record_holding(records: &[(u64, Vec<Vec<u8>>)], at: u64) -> (u64, u64, Vec<Vec<u8>>) {
    let i = records.partition_point(|(offset, _)| *offset <= at) - 1;
    let end = records.get(i + 1).map_or(u64::MAX, |(offset, _)| *offset);
    (records[i].0, end, records[i].1.clone())
}

#[test]
fn a_flipped_byte_in_the_manifest_or_current_fails_the_open() {
    let fs = FaultFs::new(3);
    let dir = Path::new("/corrupt-manifest");
    let db = Db::open(dir, options(&fs)).expect("open");
    write_keys(&db, 100, false);
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let manifest = manifest_of(&fs, dir);
    let name = name_of(&manifest);
    let size = fs.file_bytes(&manifest).expect("bytes").len() as u64;
    for offset in [0, 4, 7, size / 2, size - 1] {
        fs.corrupt_byte(&manifest, offset, 0x20).expect("corrupt");
        match Db::open(dir, options(&fs)) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, name, "flip at {offset}"),
            other => panic!("flip at {offset}: expected corruption, got {other:?}"),
        }
        fs.corrupt_byte(&manifest, offset, 0x20).expect("restore");
    }
    let current = dir.join("CURRENT");
    fs.corrupt_byte(&current, 3, 0x02).expect("corrupt");
    match Db::open(dir, options(&fs)) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, "CURRENT"),
        other => panic!("expected corruption of CURRENT, got {other:?}"),
    }
    fs.corrupt_byte(&current, 3, 0x02).expect("restore");
    let db = Db::open(dir, options(&fs)).expect("intact again");
    assert_eq!(db.get("key00042").expect("get"), Some(value(42)));
}

#[test]
fn a_missing_or_truncated_key_table_is_reported() {
    let fs = FaultFs::new(4);
    let dir = Path::new("/truncated-sst");
    let db = Db::open(dir, options(&fs)).expect("open");
    write_keys(&db, 200, false);
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let table = files_with(&fs, dir, ".sst").pop().expect("table");
    let size = fs.file_bytes(&table).expect("bytes").len() as u64;
    fs.truncate(&table, size - 10).expect("truncate");
    let db = Db::open(dir, options(&fs)).expect("open");
    let err = db.get("key00001").expect_err("truncated table");
    assert!(err.is_corruption(), "{err}");
}

/// What reading every key of [`write_keys`] shows after damage: the keys read right, and
/// whether some read failed with `Error::Corruption` naming `file`. Any other error, or a wrong
/// value, fails the test.
fn read_all_or_corruption(db: &Db, n: u32, file: &str, ctx: &str) -> bool {
    let mut saw_corruption = false;
    for i in 0..n {
        match db.get(format!("key{i:05}")) {
            Ok(v) => assert_eq!(
                v,
                Some(value(i)),
                "{ctx}: key{i:05} must read right or fail"
            ),
            Err(Error::Corruption { file: f, .. }) => {
                assert_eq!(f, file, "{ctx}: the error names the damaged file");
                saw_corruption = true;
            }
            Err(e) => panic!("{ctx}: unexpected error {e}"),
        }
    }
    let scan: Result<Vec<_>, _> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .collect();
    match scan {
        Ok(items) => {
            assert_eq!(items.len(), n as usize, "{ctx}");
            for (i, (k, v)) in items.iter().enumerate() {
                assert_eq!(k, format!("key{i:05}").as_bytes(), "{ctx}");
                assert_eq!(v, &value(i as u32), "{ctx}");
            }
        }
        Err(e) => {
            assert!(e.is_corruption(), "{ctx}: {e}");
            saw_corruption = true;
        }
    }
    saw_corruption
}

/// Flips bytes at 40 positions across a value table (records, dense index, top index,
/// properties, footer) and truncates it at 8: every read either returns the right value or
/// fails with `Error::Corruption` naming the table, and `gleaner check` reports the damaged
/// table with an offset at or before the damage each time.
#[test]
fn a_flipped_byte_or_truncation_in_a_value_table_is_corruption_never_a_wrong_value() {
    let fs = FaultFs::new(5);
    let dir = Path::new("/corrupt-vst");
    // Every value is separated (the smallest is 20 bytes), into one value table.
    let opts = || {
        options(&fs)
            .with_min_separated_value_size(16)
            .with_value_table_size(64 << 20)
    };
    let n = 300;
    let db = Db::open(dir, opts()).expect("open");
    write_keys(&db, n, false);
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let tables = files_with(&fs, dir, ".vst");
    assert_eq!(tables.len(), 1, "{tables:?}");
    let table = &tables[0];
    let name = name_of(table);
    let intact = fs.file_bytes(table).expect("bytes");
    let size = intact.len() as u64;
    let step = (size / 40).max(1) as usize;
    let mut noticed_by_reads = 0;
    for offset in (0..size).step_by(step) {
        fs.corrupt_byte(table, offset, 0x04).expect("corrupt");
        let ctx = format!("flip at {offset} of {size}");
        // A value table is opened on first use, so the open itself succeeds.
        let db = Db::open(dir, opts()).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
        // Reads need not notice every flip: a handle leads straight to its record, so damage
        // to the dense index (which GC and inheritance read) does not touch them. `gleaner
        // check` reads every byte, below.
        if read_all_or_corruption(&db, n, &name, &ctx) {
            noticed_by_reads += 1;
        }
        db.close().expect("close");
        drop(db);
        let report = gleaner::tools::check_db(dir, &opts()).expect("check");
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.file == name && p.offset.is_some_and(|o| o <= offset)),
            "{ctx}: gleaner check does not name {name} with an offset at or before the damage: \
             {:#?}",
            report.problems
        );
        fs.corrupt_byte(table, offset, 0x04).expect("restore");
    }
    // Most of the table is records, and reads check every record they read.
    assert!(
        noticed_by_reads * 2 > (0..size).step_by(step).count(),
        "reads noticed only {noticed_by_reads} flips"
    );
    for cut in (1..=8u64).map(|k| size * k / 9) {
        fs.set_file_bytes(table, intact[..cut as usize].to_vec())
            .expect("truncate");
        let ctx = format!("truncated to {cut} of {size}");
        match Db::open(dir, opts()) {
            Ok(db) => {
                read_all_or_corruption(&db, n, &name, &ctx);
                db.close().expect("close");
            }
            Err(e) => assert!(
                e.to_string().contains(&name),
                "{ctx}: the open error names the table: {e}"
            ),
        }
        let report = gleaner::tools::check_db(dir, &opts()).expect("check");
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.file == name && p.offset.is_some_and(|o| o <= cut)),
            "{ctx}: gleaner check does not name {name} with an offset at or before the cut: \
             {:#?}",
            report.problems
        );
    }
    fs.set_file_bytes(table, intact).expect("restore");
    let db = Db::open(dir, opts()).expect("open intact");
    assert!(!read_all_or_corruption(&db, n, &name, "intact"));
}

/// A damaged OPTIONS file either leaves the data readable exactly or makes the open fail with
/// an error that names the file; it never panics and never changes what reads return.
#[test]
fn a_flipped_byte_or_truncation_in_options_is_refused_or_harmless() {
    let fs = FaultFs::new(6);
    let dir = Path::new("/corrupt-options");
    let n = 100;
    let db = Db::open(dir, options(&fs)).expect("open");
    write_keys(&db, n, true);
    db.close().expect("close");
    drop(db);
    let path = dir.join("OPTIONS");
    let intact = fs.file_bytes(&path).expect("OPTIONS exists");
    let size = intact.len() as u64;
    let mut refused = 0;
    let mut damages: Vec<(String, Vec<u8>)> = (0..size)
        .step_by((size / 30).max(1) as usize)
        .map(|at| {
            let mut d = intact.clone();
            d[at as usize] ^= 0x01;
            (format!("flip at {at} of {size}"), d)
        })
        .collect();
    damages.extend((1..=5u64).map(|k| {
        let cut = (size * k / 6) as usize;
        (
            format!("truncated to {cut} of {size}"),
            intact[..cut].to_vec(),
        )
    }));
    for (ctx, damaged) in damages {
        fs.set_file_bytes(&path, damaged).expect("damage");
        match Db::open(dir, options(&fs)) {
            Ok(db) => {
                assert!(!read_all_or_corruption(&db, n, "OPTIONS", &ctx), "{ctx}");
                db.close().expect("close");
            }
            Err(e) => {
                assert!(e.to_string().contains("OPTIONS"), "{ctx}: {e}");
                refused += 1;
            }
        }
        fs.set_file_bytes(&path, intact.clone()).expect("restore");
    }
    // The file is checksummed: damage is refused rather than silently reinterpreted.
    assert!(refused > 0, "no damage to OPTIONS was ever noticed");
}

/// A WAL cut short anywhere is a torn tail: the open recovers exactly the writes before the cut
/// (a prefix, never a hole) and every value it returns is right.
#[test]
fn a_truncated_wal_recovers_a_prefix_of_the_writes() {
    let fs = FaultFs::new(7);
    let n = 200;
    for k in 1..=9 {
        // A fresh database per cut: an open that recovers a cut WAL rewrites the database.
        let dir = PathBuf::from(format!("/truncated-wal-{k}"));
        let db = Db::open(&dir, options(&fs)).expect("open");
        write_keys(&db, n, true);
        db.close().expect("close");
        drop(db);
        let wal = files_with(&fs, &dir, ".log")
            .into_iter()
            .max_by_key(|p| fs.file_bytes(p).map_or(0, |b| b.len()))
            .expect("a WAL with data");
        let intact = fs.file_bytes(&wal).expect("bytes");
        let cut = intact.len() * k / 10;
        fs.set_file_bytes(&wal, intact[..cut].to_vec())
            .expect("cut");
        let ctx = format!("WAL cut to {cut} of {}", intact.len());
        let db = Db::open(&dir, options(&fs)).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let mut present = 0;
        for i in 0..n {
            if let Some(v) = db.get(format!("key{i:05}")).expect("get") {
                assert_eq!(v, value(i), "{ctx}");
                assert_eq!(present, i, "{ctx}: key{i:05} present after a missing key");
                present += 1;
            }
        }
        assert!(present < n, "{ctx}: nothing was cut");
        assert!(present > 0 || k == 1, "{ctx}: nothing recovered");
    }
}

/// Everything in `dir` (name and content), to put a damaged database back as it was.
type Image = Vec<(PathBuf, Vec<u8>)>;

fn image(fs: &FaultFs, dir: &Path) -> Image {
    files_with(fs, dir, "")
        .into_iter()
        .map(|p| {
            let bytes = fs.file_bytes(&p).expect("bytes");
            (p, bytes)
        })
        .collect()
}

/// Makes `dir` hold exactly the files of `img` (an open of a damaged database may have written
/// a new manifest and WAL and removed files).
fn restore(fs: &FaultFs, dir: &Path, img: &Image) {
    for p in files_with(fs, dir, "") {
        if !img.iter().any(|(q, _)| q == &p) {
            fs.remove_file(&p).expect("remove");
        }
    }
    for (p, bytes) in img {
        fs.set_file_bytes(p, bytes.clone()).expect("restore");
    }
}

/// Offsets at which the records of a log file (WAL or manifest) end, from its fragment headers
/// (`crc: u32 | len: u16 | type: u8`, in 32 KiB blocks). Only FULL and LAST fragments end a
/// record.
fn record_ends(log: &[u8]) -> Vec<usize> {
    const BLOCK: usize = 32 << 10;
    let mut ends = Vec::new();
    let mut at = 0;
    while at < log.len() {
        let left_in_block = BLOCK - at % BLOCK;
        if left_in_block < 7 {
            at += left_in_block;
            continue;
        }
        let len = u16::from_le_bytes([log[at + 4], log[at + 5]]) as usize;
        let kind = log[at + 6];
        at += 7 + len;
        if kind == 1 || kind == 4 {
            ends.push(at);
        }
    }
    assert_eq!(at, log.len(), "the log parses to its end");
    ends
}

/// The state of [`manifest_workload`]: key number to value.
type Expect = BTreeMap<u32, Vec<u8>>;

fn gc_options(fs: &FaultFs) -> Options {
    options(fs)
        .with_min_separated_value_size(32)
        .with_value_table_size(8 << 10)
        .with_gc_garbage_ratio(0.1)
        .with_gc_threads(0)
}

/// A manifest with many edits after the snapshot of the open: flushes (each moving the log
/// number past a WAL that is then deleted), compactions that delete their inputs, GC jobs that
/// delete their victims, and last a flush whose manifest sync failed, so that its synced writes
/// are still in the WAL. Returns the manifest's path and the expected state; the database is
/// read-only after the failed sync, and the caller drops it.
fn manifest_workload(db: &Db, fs: &FaultFs, dir: &Path) -> (PathBuf, Expect) {
    let mut expect = Expect::new();
    let mut put = |i: u32, v: Vec<u8>, sync: bool| {
        let mut b = WriteBatch::new();
        b.put(format!("key{i:05}"), v.clone());
        db.write(b, &WriteOptions { sync }).expect("write");
        expect.insert(i, v);
    };
    for i in 0..100 {
        put(i, value(i), false);
    }
    db.flush().expect("flush");
    for i in 100..200 {
        put(i, value(i), false);
    }
    db.flush().expect("flush");
    for i in (0..200).step_by(2) {
        put(
            i,
            format!("second {i} {}", "y".repeat(40)).into_bytes(),
            false,
        );
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let gc = db.run_gc().expect("gc");
    assert!(
        gc.jobs > 0 || db.stats().gc.relocated_values > 0,
        "GC had garbage to collect (or, under `blobdb`, the compaction relocated values)"
    );
    // Keys after all others, flushed and compacted: the compaction can move the table down
    // without rewriting it, an edit that deletes nothing.
    for i in 300..330 {
        put(i, value(i), false);
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in 200..230 {
        put(i, value(i), true);
    }
    // A flush whose manifest sync fails: its edit is the manifest's last record, but nothing
    // acted on it (the WAL with its writes stays), so a cut that loses it loses nothing.
    fs.add_fault(FaultRule {
        op: FaultOp::Sync,
        path_contains: Some("MANIFEST".into()),
        skip: 0,
        times: Some(1),
        kind: FaultKind::Eio,
    });
    let err = db.flush().expect_err("the manifest sync fails");
    assert!(
        matches!(err, Error::Io { .. } | Error::ReadOnly(_)),
        "{err}"
    );
    fs.clear_faults();
    let manifest = manifest_of(fs, dir);
    (manifest, expect)
}

/// Every key of `expect` reads its value (by `get` and by a full scan), and nothing else is
/// there.
fn assert_exactly(db: &Db, expect: &Expect, ctx: &str) {
    for (i, v) in expect {
        let got = db
            .get(format!("key{i:05}"))
            .unwrap_or_else(|e| panic!("{ctx}: key{i:05}: {e}"));
        assert_eq!(got.as_ref(), Some(v), "{ctx}: key{i:05}");
    }
    let scan: Vec<_> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    let want: Vec<_> = expect
        .iter()
        .map(|(i, v)| (format!("key{i:05}").into_bytes(), v.clone()))
        .collect();
    assert!(scan == want, "{ctx}: the scan differs from the writes");
}

/// A manifest cut at its start, inside the header of its first record, at and around every record
/// boundary, at a tenth, a fifth, ... of its length and one byte short of its end, under every GC
/// variant. A cut that loses a flush, compaction or GC edit that was acted upon (its WAL
/// deleted, its inputs or victims deleted) is refused with `Error::Corruption` naming the
/// manifest — opening would silently lose acknowledged writes — and `gleaner check` then
/// reports the manifest or the file the open misses. A cut that loses only the last edit, of a
/// flush whose manifest sync failed (so its writes are still in the WAL), opens with every
/// acknowledged write readable exactly, `gleaner check` warns of the torn tail, and the
/// database the open rewrites checks clean. Never a wrong value, a missing key or a panic.
#[test]
fn a_truncated_manifest_opens_with_every_write_or_is_refused_naming_it() {
    for (n, (variant, tune)) in common::gc_variants().into_iter().enumerate() {
        let fs = FaultFs::new(20 + n as u64);
        let dir = Path::new("/truncated-manifest");
        let opts = || tune(gc_options(&fs));
        let db = Db::open(dir, opts()).expect("open");
        let (manifest, expect) = manifest_workload(&db, &fs, dir);
        drop(db);
        let name = name_of(&manifest);
        let intact = image(&fs, dir);
        let bytes = fs.file_bytes(&manifest).expect("bytes");
        let len = bytes.len();
        let ends = record_ends(&bytes);
        assert!(ends.len() >= 6, "{variant}: few manifest records: {ends:?}");
        let mut cuts: Vec<usize> = vec![0, 1, 6, 7, 8, len - 1];
        for &e in &ends {
            cuts.extend([e - 1, e, e + 1]);
        }
        cuts.extend((1..10).map(|k| len * k / 10));
        cuts.retain(|&c| c < len);
        cuts.sort_unstable();
        cuts.dedup();
        // The last record is the edit of the flush whose manifest sync failed.
        let last_start = ends[ends.len() - 2];
        for cut in cuts {
            restore(&fs, dir, &intact);
            fs.truncate(&manifest, cut as u64).expect("truncate");
            let ctx = format!("{variant}: {name} cut to {cut} of {len} (records end at {ends:?})");
            let report = gleaner::tools::check_db(dir, &opts())
                .unwrap_or_else(|e| panic!("{ctx}: check: {e}"));
            let check_warns = report.warnings.iter().any(|p| p.file == name);
            match Db::open(dir, opts()) {
                Ok(db) => {
                    assert!(
                        cut >= last_start,
                        "{ctx}: opened although the cut lost an edit that was acted upon"
                    );
                    assert_exactly(&db, &expect, &ctx);
                    db.close().expect("close");
                    drop(db);
                    // A cut inside a record is a torn tail, which check reports (as a warning:
                    // recovery may ignore it) and which did not matter here.
                    assert!(
                        report.problems.is_empty() && (check_warns || ends.contains(&cut)),
                        "{ctx}: check: {report:#?}"
                    );
                    // What the open made of the cut manifest is a sound database.
                    let after = gleaner::tools::check_db(dir, &opts()).expect("check");
                    assert!(after.problems.is_empty(), "{ctx}: {:#?}", after.problems);
                }
                Err(Error::Corruption { file, detail, .. }) => {
                    assert_eq!(file, name, "{ctx}: the error names the manifest");
                    // Check agrees with the open about what is wrong: it names the manifest, or
                    // the file whose absence the open reports.
                    assert!(
                        report
                            .problems
                            .iter()
                            .any(|p| p.file == name || detail.contains(&p.file)),
                        "{ctx}: the open is refused ({detail}), but gleaner check does not \
                         name {name} or what it misses: {:#?}",
                        report.problems
                    );
                    // Losing only the failed flush's edit loses nothing: its writes are in
                    // the WAL, and nothing acted on it. Refusing such a cut is a false alarm.
                    assert!(
                        cut < last_start,
                        "{ctx}: refused although only the unacted edit was lost"
                    );
                }
                Err(e) => panic!("{ctx}: expected corruption naming {name}, got {e}"),
            }
        }
        restore(&fs, dir, &intact);
        let db = Db::open(dir, opts()).expect("open intact");
        assert_exactly(&db, &expect, &format!("{variant}: intact"));
    }
}

/// CURRENT cut to every length from 0 to one byte short (it is one short line): each open fails
/// with `Error::Corruption` naming CURRENT, never opening an empty or wrong database, and
/// `gleaner check` names CURRENT each time; restored, the database opens with every write.
#[test]
fn a_truncated_current_is_refused_naming_it() {
    let fs = FaultFs::new(30);
    let dir = Path::new("/truncated-current");
    let db = Db::open(dir, gc_options(&fs)).expect("open");
    let (_, expect) = manifest_workload(&db, &fs, dir);
    drop(db);
    let intact = image(&fs, dir);
    let current = dir.join("CURRENT");
    let len = fs.file_bytes(&current).expect("CURRENT").len();
    assert!(len > 16, "CURRENT is {len} bytes");
    for cut in 0..len {
        restore(&fs, dir, &intact);
        fs.truncate(&current, cut as u64).expect("truncate");
        let ctx = format!("CURRENT cut to {cut} of {len}");
        match Db::open(dir, gc_options(&fs)) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, "CURRENT", "{ctx}"),
            other => panic!("{ctx}: expected corruption of CURRENT, got {other:?}"),
        }
        let report = gleaner::tools::check_db(dir, &gc_options(&fs)).expect("check");
        assert!(
            report.problems.iter().any(|p| p.file == "CURRENT"),
            "{ctx}: {:#?}",
            report.problems
        );
    }
    restore(&fs, dir, &intact);
    let db = Db::open(dir, gc_options(&fs)).expect("open intact");
    assert_exactly(&db, &expect, "intact");
}

/// Regression (found by `a_truncated_manifest_opens_with_every_write_or_is_refused_naming_it`):
/// a manifest cut at a record boundary that loses a flush's edit names as its log number a WAL
/// the flush had deleted. The open refuses it, but `gleaner check` reported no problem (the
/// flushed table only showed as an orphan warning). Check now requires the WAL the log number
/// names, as the open does, and reports the manifest.
#[test]
fn gleaner_check_reports_a_manifest_whose_log_number_wal_is_missing() {
    let fs = FaultFs::new(31);
    let dir = Path::new("/lost-flush-edit");
    let db = Db::open(dir, options(&fs)).expect("open");
    write_keys(&db, 50, false);
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let manifest = manifest_of(&fs, dir);
    let name = name_of(&manifest);
    let bytes = fs.file_bytes(&manifest).expect("bytes");
    let ends = record_ends(&bytes);
    assert_eq!(ends.len(), 2, "the open's snapshot and the flush's edit");
    fs.truncate(&manifest, ends[0] as u64).expect("truncate");
    let report = gleaner::tools::check_db(dir, &options(&fs)).expect("check");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.file == name && p.detail.contains(".log is missing")),
        "{:#?}",
        report.problems
    );
    match Db::open(dir, options(&fs)) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, name),
        other => panic!("expected corruption naming {name}, got {other:?}"),
    }
}

/// Key tables of both layouts (index-decoupled under `scavenger`, mixed under `terarkdb`), flipped
/// at 40 positions across the file (data blocks, handle blocks, filter, indexes, properties,
/// footer) and truncated at 8: every read returns the right value or `Error::Corruption` naming
/// the table, and `gleaner check` reports the table with the offset of the damaged part, at or
/// before the damage, every time.
#[test]
fn key_table_damage_anywhere_is_reported_by_reads_and_check_with_file_and_offset() {
    for (layout, policy) in [
        ("index-decoupled", gleaner::GcPolicyKind::Scavenger),
        ("mixed", gleaner::GcPolicyKind::Terarkdb),
    ] {
        let fs = FaultFs::new(40);
        let dir = Path::new("/sst-damage");
        let opts = || options(&fs).with_gc_policy(policy);
        let db = Db::open(dir, opts()).expect("open");
        // Some values separated, so index-decoupled tables have handle blocks.
        for i in 0..400u32 {
            let v = if i % 7 == 0 {
                vec![b'0' + (i % 10) as u8; 2000]
            } else {
                value(i)
            };
            db.put(format!("key{i:05}"), &v).expect("put");
        }
        db.flush().expect("flush");
        db.close().expect("close");
        drop(db);
        let table = files_with(&fs, dir, ".sst").pop().expect("table");
        let name = name_of(&table);
        let intact = fs.file_bytes(&table).expect("bytes");
        let size = intact.len() as u64;
        let reads_right_or_corruption = |ctx: &str| {
            let db = Db::open(dir, opts()).expect("open does not read tables");
            for i in 0..400u32 {
                match db.get(format!("key{i:05}")) {
                    Ok(Some(v)) if i % 7 == 0 => {
                        assert_eq!(v, vec![b'0' + (i % 10) as u8; 2000], "{ctx}: key{i:05}")
                    }
                    Ok(v) if i % 7 != 0 => assert_eq!(v, Some(value(i)), "{ctx}: key{i:05}"),
                    Ok(v) => panic!("{ctx}: key{i:05} read {v:?}"),
                    Err(Error::Corruption { file, .. }) => assert_eq!(file, name, "{ctx}"),
                    Err(e) => panic!("{ctx}: unexpected error {e}"),
                }
            }
        };
        let check_names_it = |ctx: &str, damage_at: u64| {
            let report = gleaner::tools::check_db(dir, &opts()).expect("check runs");
            let p = report
                .problems
                .iter()
                .find(|p| p.file == name)
                .unwrap_or_else(|| panic!("{ctx}: check misses {name}: {report:#?}"));
            let offset = p
                .offset
                .unwrap_or_else(|| panic!("{ctx}: check gives no offset: {p:?}"));
            assert!(
                offset <= damage_at,
                "{ctx}: check points at {offset}, after the damage at {damage_at}: {p:?}"
            );
        };
        for offset in (0..size).step_by((size / 40).max(1) as usize) {
            let ctx = format!("{layout}: flip at {offset} of {size}");
            fs.corrupt_byte(&table, offset, 0x10).expect("corrupt");
            reads_right_or_corruption(&ctx);
            check_names_it(&ctx, offset);
            fs.corrupt_byte(&table, offset, 0x10).expect("restore");
        }
        for k in 0..8u64 {
            let cut = size * k / 8 + size / 16;
            let ctx = format!("{layout}: cut to {cut} of {size}");
            fs.truncate(&table, cut).expect("truncate");
            reads_right_or_corruption(&ctx);
            check_names_it(&ctx, cut);
            fs.set_file_bytes(&table, intact.clone()).expect("restore");
        }
    }
}

/// A closed WAL (synced, ending in a sync marker) flipped at 24 positions across the file: the
/// open either fails with `Error::Corruption` naming the WAL at or before the damage, or (for a
/// byte no record covers, such as block padding) opens with every write; never a wrong value.
/// `gleaner check` reports the WAL and the offset whenever the open refuses it.
#[test]
fn wal_damage_anywhere_fails_the_open_naming_file_and_offset_or_is_harmless() {
    let fs = FaultFs::new(41);
    let dir = Path::new("/wal-damage");
    let db = Db::open(dir, options(&fs)).expect("open");
    write_keys(&db, 600, false);
    db.close().expect("close");
    drop(db);
    let wal = files_with(&fs, dir, ".log")
        .into_iter()
        .max_by_key(|p| fs.file_bytes(p).map_or(0, |b| b.len()))
        .expect("a WAL with data");
    let name = name_of(&wal);
    let intact = fs.file_bytes(&wal).expect("bytes");
    let size = intact.len() as u64;
    assert!(size > 32 << 10, "the WAL spans more than one block: {size}");
    let mut refused = 0;
    let positions: Vec<u64> = (0..24u64)
        .map(|k| size * k / 24)
        .chain([size - 1])
        .collect();
    for &offset in &positions {
        let ctx = format!("flip at {offset} of {size}");
        fs.corrupt_byte(&wal, offset, 0x04).expect("corrupt");
        match Db::open(dir, options(&fs)) {
            Err(Error::Corruption {
                file, offset: at, ..
            }) => {
                refused += 1;
                assert_eq!(file, name, "{ctx}");
                assert!(at <= offset, "{ctx}: the error points at {at}");
                let report = gleaner::tools::check_db(dir, &options(&fs)).expect("check");
                assert!(
                    report
                        .problems
                        .iter()
                        .any(|p| p.file == name && p.offset.is_some_and(|o| o <= offset)),
                    "{ctx}: check: {:#?}",
                    report.problems
                );
            }
            Ok(db) => {
                for i in 0..600u32 {
                    assert_eq!(
                        db.get(format!("key{i:05}")).expect("get"),
                        Some(value(i)),
                        "{ctx}: key{i:05}"
                    );
                }
                drop(db);
            }
            Err(e) => panic!("{ctx}: unexpected error {e}"),
        }
        // An open that succeeded may have rewritten the directory: put the WAL back as it was.
        fs.set_file_bytes(&wal, intact.clone()).expect("restore");
    }
    assert!(
        refused * 10 >= positions.len() * 9,
        "only {refused} of {} flips were refused",
        positions.len()
    );
}

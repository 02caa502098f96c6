//! Tests of `check` and `dump` on real databases in temporary directories.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{CheckReport, check_db, dump_file};
use crate::error::Error;
use crate::filename::{FileType, parse_file_name};
use crate::{Db, Options};

fn key(i: usize) -> String {
    format!("key{i:05}")
}

fn value(i: usize) -> String {
    format!("value-{i}-{}", "x".repeat(i % 7))
}

/// A database holding keys 0..n, written to key tables and closed. Small memtables and tables
/// make several tables; compression off keeps byte offsets meaningful for the tests that flip
/// bytes.
fn table_db(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(
        dir.path(),
        Options::default()
            .with_memtable_size(4096)
            .with_key_table_size(4096)
            .with_compression(crate::Compression::None),
    )
    .expect("open");
    for i in 0..n {
        db.put(key(i), value(i)).expect("put");
    }
    db.delete(key(0)).expect("delete");
    db.flush().expect("flush");
    db.close().expect("close");
    dir
}

/// A database whose writes are only in the WAL (the memtable is never flushed).
fn wal_db(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    for i in 0..n {
        db.put(key(i), value(i)).expect("put");
    }
    db.close().expect("close");
    dir
}

fn files_of(dir: &Path, want: fn(FileType) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_file_name)
                .is_some_and(want)
        })
        .collect();
    v.sort();
    v
}

fn tables(dir: &Path) -> Vec<PathBuf> {
    files_of(dir, |t| matches!(t, FileType::KeyTable(_)))
}

fn wals(dir: &Path) -> Vec<PathBuf> {
    files_of(dir, |t| matches!(t, FileType::Wal(_)))
}

fn manifest(dir: &Path) -> PathBuf {
    let m = files_of(dir, |t| matches!(t, FileType::Manifest(_)));
    assert_eq!(m.len(), 1, "{m:?}");
    m[0].clone()
}

fn name(p: &Path) -> String {
    p.file_name()
        .expect("file name")
        .to_string_lossy()
        .into_owned()
}

fn flip_byte(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset] ^= 0x40;
    std::fs::write(path, bytes).expect("write");
}

fn check(dir: &Path) -> CheckReport {
    check_db(dir, &Options::default()).expect("check runs")
}

/// Every file's name and contents.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let p = e.expect("entry").path();
            (name(&p), std::fs::read(&p).expect("read"))
        })
        .collect()
}

#[test]
fn clean_database_checks_clean_and_is_left_untouched() {
    let dir = table_db(600);
    assert!(tables(dir.path()).len() > 1, "small memtables make tables");
    let before = snapshot(dir.path());
    let report = check(dir.path());
    assert!(report.is_clean(), "{report:#?}");
    assert!(report.warnings.is_empty(), "{report:#?}");
    assert_eq!(report.tables_checked, tables(dir.path()).len());
    // At least every live key; background compaction may already have dropped the deleted
    // key's versions.
    assert!(report.entries_checked >= 599, "{report:#?}");
    assert_eq!(
        snapshot(dir.path()),
        before,
        "check must not modify anything"
    );
}

#[test]
fn flipped_byte_in_a_data_block_names_the_table() {
    let dir = table_db(600);
    let victim = tables(dir.path())[0].clone();
    // Offset 10 lies in the first data block (blocks come first in a key table).
    flip_byte(&victim, 10);
    let report = check(dir.path());
    assert!(!report.is_clean());
    let p = report
        .problems
        .iter()
        .find(|p| p.file == name(&victim))
        .unwrap_or_else(|| panic!("no problem names {}: {report:#?}", name(&victim)));
    assert_eq!(p.offset, Some(0), "the first block starts at 0: {p}");
    assert!(p.detail.contains("checksum"), "{p}");
    assert_eq!(report.problems.len(), 1, "{report:#?}");
}

#[test]
fn flipped_byte_in_the_manifest_is_reported() {
    let dir = table_db(600);
    let m = manifest(dir.path());
    // Inside the payload of the first record, which intact records follow.
    flip_byte(&m, 10);
    let report = check(dir.path());
    assert!(
        report.problems.iter().any(|p| p.file == name(&m)),
        "{report:#?}"
    );
}

#[test]
fn missing_and_resized_tables_are_problems() {
    let dir = table_db(600);
    let t = tables(dir.path());
    std::fs::remove_file(&t[0]).expect("remove");
    let mut bytes = std::fs::read(&t[1]).expect("read");
    bytes.push(0);
    std::fs::write(&t[1], bytes).expect("write");
    let report = check(dir.path());
    let details: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        details
            .iter()
            .any(|d| d.starts_with(&name(&t[0])) && d.contains("missing")),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d.starts_with(&name(&t[1])) && d.contains("bytes")),
        "{details:?}"
    );
}

#[test]
fn truncated_wal_tail_is_only_a_warning() {
    let dir = wal_db(50);
    let w = wals(dir.path());
    assert_eq!(w.len(), 1, "{w:?}");
    let len = std::fs::metadata(&w[0]).expect("metadata").len();
    assert!(len > 100, "the WAL holds the writes");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&w[0])
        .expect("open");
    file.set_len(len - 3).expect("truncate");
    drop(file);
    let report = check(dir.path());
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(
        report.wal_records_checked, 50,
        "every write; the torn record is the sync marker written at close"
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|p| p.file == name(&w[0]) && p.detail.contains("torn tail")),
        "{report:#?}"
    );
}

#[test]
fn damage_before_intact_wal_records_is_a_problem() {
    let dir = wal_db(50);
    let w = wals(dir.path())[0].clone();
    flip_byte(&w, 10);
    let report = check(dir.path());
    let p = report
        .problems
        .iter()
        .find(|p| p.file == name(&w))
        .unwrap_or_else(|| panic!("{report:#?}"));
    assert_eq!(p.offset, Some(0), "{p}");
}

#[test]
fn orphans_are_warnings() {
    let dir = table_db(600);
    let t = tables(dir.path());
    std::fs::copy(&t[0], dir.path().join("999999.sst")).expect("copy");
    std::fs::write(dir.path().join("notes.txt"), "not ours").expect("write");
    let report = check(dir.path());
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.warnings.len(), 1, "{report:#?}");
    assert_eq!(report.warnings[0].file, "999999.sst");
    assert!(report.warnings[0].detail.contains("orphan"));
}

#[test]
fn refuses_locked_and_non_database_directories() {
    let dir = wal_db(1);
    let db = Db::open(dir.path(), Options::default()).expect("open");
    match check_db(dir.path(), &Options::default()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close().expect("close");
    assert!(check(dir.path()).is_clean());

    let empty = tempfile::tempdir().expect("tempdir");
    let err = check_db(empty.path(), &Options::default()).expect_err("not a database");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(
        snapshot(empty.path()).is_empty(),
        "no LOCK file is left behind"
    );
    let missing = empty.path().join("nope");
    assert!(check_db(&missing, &Options::default()).is_err());
}

fn dump(path: &Path, hex: bool) -> String {
    let mut out = Vec::new();
    dump_file(path, &mut out, hex).expect("dump");
    String::from_utf8(out).expect("utf-8 dump")
}

#[test]
fn dump_of_a_key_table_lists_its_entries() {
    let dir = table_db(600);
    let mut all = String::new();
    for t in tables(dir.path()) {
        all.push_str(&dump(&t, false));
    }
    assert!(all.contains("num_entries: "), "{all}");
    assert!(all.contains("compression: none"), "{all}");
    for i in [1, 17, 599] {
        let line = format!("{}\tseq={}\tkind=put\t{}\n", key(i), i + 1, value(i));
        assert!(all.contains(&line), "missing {line:?}");
    }
    let hex = dump(&tables(dir.path())[0], true);
    assert!(hex.contains(&super::text::hex(key(1).as_bytes())), "{hex}");
}

#[test]
fn dump_of_wal_manifest_current_and_options() {
    let dir = wal_db(3);
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let mut batch = crate::WriteBatch::new();
    batch.put(b"bin\x00\xff", b"v\tw");
    batch.delete(key(1));
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    db.close().expect("close");
    // The reopen replayed the first three writes into a table; the batch is in the new WAL.
    let wal = dump(&wals(dir.path())[0], false);
    // Fragment header, sync point, batch header, then each op: kind, key length, key[, value
    // length, value].
    let marker_at = 7 + 8 + 12 + (1 + 1 + 5 + 1 + 3) + (1 + 1 + key(1).len());
    assert_eq!(
        wal,
        format!(
            "# record at offset 0: sequence 4, 2 ops\n\
             bin\\u{{0}}\\xff\tseq=4\tkind=put\tv\\tw\n\
             {}\tseq=5\tkind=del\t\n\
             # record at offset {marker_at}: sync marker\n",
            key(1)
        )
    );
    let wal_hex = dump(&wals(dir.path())[0], true);
    assert!(
        wal_hex.contains("62696e00ff\tseq=4\tkind=put\t760977\n"),
        "{wal_hex}"
    );

    let dir = table_db(600);
    let m = dump(&manifest(dir.path()), false);
    assert!(m.contains("# edit at offset 0\nformat_version: 1\n"), "{m}");
    assert!(m.contains("new_table: level=0"), "{m}");
    let current = dump(&dir.path().join("CURRENT"), false);
    assert_eq!(
        current,
        format!("manifest: {}\n", name(&manifest(dir.path())))
    );
    assert!(dump(&dir.path().join("OPTIONS"), false).contains("memtable_size=4096\n"));

    let err = dump_file(&dir.path().join("LOCK"), &mut Vec::new(), false).expect_err("lock");
    assert!(matches!(err, Error::InvalidArgument(_)));
    let err =
        dump_file(&dir.path().join("notes.txt"), &mut Vec::new(), false).expect_err("unknown kind");
    assert!(err.to_string().contains("notes.txt"), "{err}");
}

#[test]
fn dump_propagates_corruption() {
    let dir = table_db(600);
    let t = tables(dir.path())[0].clone();
    flip_byte(&t, 10);
    let err = dump_file(&t, &mut Vec::new(), false).expect_err("corrupt");
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains(&name(&t)), "{err}");
}

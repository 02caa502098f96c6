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

#[test]
fn check_shares_the_lock_with_readers_and_creates_no_lock_file() {
    let dir = wal_db(50);
    // Beside a read-only handle: both hold the lock shared.
    let reader = Db::open_read_only(dir.path(), Options::default()).expect("read-only open");
    assert!(check(dir.path()).is_clean());
    // The check released its share; the reader's keeps a writer out.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    reader.close().expect("close");
    // Without a LOCK file the check runs unlocked and leaves none behind.
    std::fs::remove_file(dir.path().join("LOCK")).expect("remove LOCK");
    let before = snapshot(dir.path());
    assert!(check(dir.path()).is_clean());
    assert_eq!(snapshot(dir.path()), before, "nothing created");
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
    // Which table holds key 1 depends on how background compactions ran: look in all.
    let hex: String = tables(dir.path()).iter().map(|t| dump(t, true)).collect();
    assert!(hex.contains(&super::text::hex(key(1).as_bytes())), "{hex}");
}

#[test]
fn dump_of_an_index_decoupled_key_table_shows_both_parts() {
    use crate::io::{FileSystem, PosixFs, WriteFileOptions};
    use crate::key::{ValueKind, make_internal_key};
    use crate::table::{KeyTableLayout, TableBuilder, TableBuilderOptions};
    use crate::value::ValueHandle;

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000007.sst");
    let file = PosixFs::new()
        .new_writable(&path, WriteFileOptions::default())
        .expect("create");
    let opts = TableBuilderOptions {
        layout: KeyTableLayout::IndexDecoupled,
        ..TableBuilderOptions::default()
    };
    let mut b = TableBuilder::new(file, opts).expect("builder");
    let handle = crate::value::StoredHandle::alias(
        ValueHandle {
            file_number: 3,
            offset: 0,
            len: 10,
        },
        4,
    )
    .with_payload(Some(
        crate::value::HandlePayload::new(b"\x01\xfe").expect("payload"),
    ))
    .encode();
    b.add(&make_internal_key(b"a", 9, ValueKind::Value), b"small")
        .expect("add");
    b.add(&make_internal_key(b"a", 8, ValueKind::ValueHandle), &handle)
        .expect("add");
    b.add(&make_internal_key(b"b", 7, ValueKind::Deletion), b"")
        .expect("add");
    b.finish().expect("finish");

    let out = dump(&path, false);
    assert!(out.starts_with("layout: index-decoupled\n"), "{out}");
    assert!(out.contains("num_handle_entries: 1\n"), "{out}");
    let data = out
        .find("# data part: 1 blocks, 2 entries")
        .expect("data part");
    let handles = out
        .find("# handle part: 1 blocks, 1 entries")
        .expect("handle part");
    assert!(data < handles, "{out}");
    let a9 = out.find("a\tseq=9\tkind=put\tsmall\n").expect("a@9");
    let b7 = out.find("b\tseq=7\tkind=del\t\n").expect("b@7");
    let a8 = out
        .find("a\tseq=8\tkind=handle\tfile=3 offset=0 len=10 record_seq=4 alias payload=01fe\n")
        .expect("a@8");
    assert!(
        data < a9 && a9 < b7 && b7 < handles && handles < a8,
        "{out}"
    );
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
    assert!(m.contains("# edit at offset 0\nformat_version: 2\n"), "{m}");
    assert!(m.contains("new_table: level=0 run=own"), "{m}");
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

/// Options that separate every value of [`big_value`] into small value tables, with GC only when
/// asked (`run_gc`) and a low garbage threshold, so a third of the keys overwritten is enough;
/// stale handles stay until a compaction the tree's shape asks for (`stale_handle_share` 0), so
/// the checks meet inheritance records.
fn value_options() -> Options {
    Options::default()
        .with_memtable_size(64 << 10)
        .with_min_separated_value_size(100)
        .with_value_table_size(32 << 10)
        .with_gc_threads(0)
        .with_gc_garbage_ratio(0.1)
        .with_stale_handle_share(0.0)
}

/// A value of about 500 bytes, different per key and round.
fn big_value(i: usize, round: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-round-{round}-").into_bytes();
    v.resize(500, b'a' + (i % 26) as u8);
    v
}

const VALUE_KEYS: usize = 400;

/// A closed database whose values live in value tables, some of them written by GC, with
/// inheritance records: keys 0..400 written, every third overwritten, compacted (so the
/// overwritten records are garbage), then GC. No compaction follows the GC, so the key tables
/// still hold handles naming the collected tables, which only inheritance resolves.
fn value_db() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), value_options()).expect("open");
    for i in 0..VALUE_KEYS {
        db.put(key(i), big_value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for i in (0..VALUE_KEYS).step_by(3) {
        db.put(key(i), big_value(i, 1)).expect("overwrite");
    }
    db.compact_range(None, None).expect("compact");
    let run = db.run_gc().expect("gc");
    assert!(
        run.jobs > 0,
        "GC collected something: {run:?}; levels {:?}",
        db.stats().levels
    );
    let stats = db.stats();
    assert!(
        stats.values.inheritance_records > 0,
        "the key tables still name collected tables: {:?}",
        stats.values
    );
    db.close().expect("close");
    dir
}

fn value_tables(dir: &Path) -> Vec<PathBuf> {
    files_of(dir, |t| matches!(t, FileType::ValueTable(_)))
}

#[test]
fn database_with_value_tables_and_inheritance_checks_clean() {
    let dir = value_db();
    let before = snapshot(dir.path());
    let report = check(dir.path());
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.value_tables_checked, value_tables(dir.path()).len());
    assert!(report.value_tables_checked > 1, "{report:#?}");
    assert!(
        report.records_checked >= VALUE_KEYS as u64,
        "every live value, and garbage not yet collected: {report:#?}"
    );
    assert_eq!(
        report.handles_checked, VALUE_KEYS as u64,
        "one handle per key after the compaction: {report:#?}"
    );
    assert!(
        report.warnings.iter().all(|w| !w.detail.contains("orphan")),
        "{report:#?}"
    );
    assert_eq!(
        snapshot(dir.path()),
        before,
        "check must not modify anything"
    );
    // What the checker verified offline, the database reads back.
    let db = Db::open(dir.path(), value_options()).expect("reopen");
    for i in 0..VALUE_KEYS {
        let round = usize::from(i % 3 == 0);
        assert_eq!(db.get(key(i)).expect("get"), Some(big_value(i, round)));
    }
    assert!(db.recount_garbage().expect("recount").mismatches.is_empty());
}

#[test]
fn flipped_byte_in_a_value_record_names_the_value_table() {
    let dir = value_db();
    let victim = value_tables(dir.path())[0].clone();
    // Records start at offset 0; byte 20 is in the first record's header or key.
    flip_byte(&victim, 20);
    let report = check(dir.path());
    assert!(!report.is_clean());
    let p = report
        .problems
        .iter()
        .find(|p| p.file == name(&victim))
        .unwrap_or_else(|| panic!("no problem names {}: {report:#?}", name(&victim)));
    assert_eq!(p.offset, Some(0), "the first record: {p}");
    assert!(
        p.detail.contains("checksum") || p.detail.contains("CRC"),
        "{p}"
    );
}

#[test]
fn missing_value_table_is_a_problem_and_its_handles_do_not_resolve() {
    let dir = value_db();
    // The newest table is a GC output: handles naming the collected tables reach it only
    // through inheritance, so this also covers resolution failing on the inherited path.
    let victim = value_tables(dir.path())
        .last()
        .expect("value tables")
        .clone();
    std::fs::remove_file(&victim).expect("remove");
    let report = check(dir.path());
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.file == name(&victim) && p.detail.contains("missing")),
        "{report:#?}"
    );
    // The handles into it fail in the key tables that hold them, naming the value table.
    let unresolved: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.file.ends_with(".sst") && p.detail.contains("does not resolve"))
        .collect();
    assert!(!unresolved.is_empty(), "{report:#?}");
    assert!(
        unresolved.iter().all(|p| p.detail.contains(&name(&victim))),
        "{unresolved:#?}"
    );
    assert!(
        report.problems.len() <= 30,
        "failures are capped per key table: {report:#?}"
    );
}

#[test]
fn orphan_value_table_is_a_warning() {
    let dir = value_db();
    let t = value_tables(dir.path())[0].clone();
    std::fs::copy(&t, dir.path().join("999999.vst")).expect("copy");
    let report = check(dir.path());
    assert!(report.is_clean(), "{report:#?}");
    let w: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.file == "999999.vst")
        .collect();
    assert_eq!(w.len(), 1, "{report:#?}");
    assert!(w[0].detail.contains("orphan"), "{w:?}");
}

#[test]
fn value_table_resized_is_a_problem() {
    let dir = value_db();
    let t = value_tables(dir.path())[0].clone();
    let mut bytes = std::fs::read(&t).expect("read");
    bytes.push(0);
    std::fs::write(&t, bytes).expect("write");
    let report = check(dir.path());
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.file == name(&t) && p.detail.contains("bytes")),
        "{report:#?}"
    );
}

#[test]
fn without_a_manifest_value_tables_are_still_read() {
    let dir = value_db();
    let t = value_tables(dir.path())[0].clone();
    flip_byte(&t, 20);
    std::fs::remove_file(manifest(dir.path())).expect("remove manifest");
    let report = check(dir.path());
    assert!(
        report.problems.iter().any(|p| p.file == name(&t)),
        "{report:#?}"
    );
    assert!(report.value_tables_checked > 0, "{report:#?}");
}

#[test]
fn dump_of_a_value_table_lists_its_records() {
    let dir = value_db();
    let mut all = String::new();
    for t in value_tables(dir.path()) {
        let text = dump(&t, false);
        assert!(text.starts_with("num_records: "), "{text}");
        all.push_str(&text);
    }
    for i in 0..VALUE_KEYS {
        let round = usize::from(i % 3 == 0);
        let value = String::from_utf8(big_value(i, round)).expect("text value");
        let line = format!("{}\tseq=", key(i));
        assert!(all.contains(&line), "missing {line:?}");
        assert!(all.contains(&format!("\t{value}\n")), "value of {}", key(i));
    }
    let t = &value_tables(dir.path())[0];
    let hex = dump(t, true);
    assert!(hex.contains("\tseq="), "{hex}");
    let smallest = hex
        .lines()
        .find_map(|l| l.strip_prefix("smallest_key: "))
        .expect("smallest_key line");
    assert!(
        smallest.bytes().all(|b| b.is_ascii_hexdigit()) && smallest.starts_with("6b6579"),
        "keys in hex: {smallest}"
    );
    let m = dump(&manifest(dir.path()), false);
    assert!(m.contains("new_value_table: number="), "{m}");
    assert!(m.contains("inheritance: number="), "{m}");
    assert!(m.contains("  dependence: value_table="), "{m}");

    flip_byte(t, 20);
    let err = dump_file(t, &mut Vec::new(), false).expect_err("corrupt record");
    assert!(err.to_string().contains(&name(t)), "{err}");
}

/// Appends `edit` to the live manifest, as the engine would have logged it.
fn append_edit(dir: &Path, edit: &crate::version::VersionEdit) {
    use crate::io::{FileSystem, PosixFs, WriteFileOptions};
    let path = manifest(dir);
    let old = std::fs::read(&path).expect("read manifest");
    let fs = PosixFs::new();
    let mut file = fs
        .new_writable(&path, WriteFileOptions::default())
        .expect("rewrite manifest");
    file.append(&old).expect("copy");
    let mut log = crate::wal::LogWriter::new(file);
    log.add_record(&edit.encode()).expect("append edit");
    log.sync().expect("sync");
}

#[test]
fn garbage_that_disagrees_with_the_handles_names_the_value_table() {
    let dir = value_db();
    let t = value_tables(dir.path())[0].clone();
    let number = match parse_file_name(&name(&t)) {
        Some(FileType::ValueTable(n)) => n,
        other => panic!("{other:?}"),
    };
    // One record counted as garbage that a key table still references.
    append_edit(
        dir.path(),
        &crate::version::VersionEdit {
            value_garbage: vec![(
                number,
                crate::version::Garbage {
                    records: 1,
                    bytes: 500,
                },
            )],
            ..Default::default()
        },
    );
    let report = check(dir.path());
    assert_eq!(report.problems.len(), 1, "{report:#?}");
    let p = &report.problems[0];
    assert_eq!(p.file, name(&t), "{p}");
    assert!(p.detail.contains("garbage"), "{p}");
}

/// A `titan` GC job's edits: the outputs marked awaiting their write-back, then unmarked, and
/// the victims retired; the dump shows each field, and the WAL dump the handle puts.
#[test]
fn dump_shows_write_back_marks_retired_tables_and_handle_puts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options::default()
        .with_gc_policy(crate::GcPolicyKind::Titan)
        .with_titan_discardable_ratio(0.1)
        .with_gc_threads(0)
        .with_min_separated_value_size(100);
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    for i in 0..50 {
        db.put(key(i), value(i).repeat(40)).expect("put");
    }
    db.flush().expect("flush");
    for i in 0..25 {
        db.put(key(i), value(i).repeat(41)).expect("overwrite");
    }
    db.compact_range(None, None).expect("compact");
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    let m = dump(&manifest(dir.path()), false);
    for field in [
        "write_back: number=",
        "awaiting=true",
        "awaiting=false",
        "retired_value_table: number=",
    ] {
        assert!(m.contains(field), "{field} in {m}");
    }
    db.close().expect("close");
    let handle_puts: usize = wals(dir.path())
        .iter()
        .map(|w| dump(w, false).matches("kind=handle").count())
        .sum();
    assert_eq!(
        handle_puts as u64, run.totals.records_written,
        "one per moved record"
    );
}

/// A tiered database whose last level holds two runs, the newer of which rewrote keys the
/// older holds: they overlap in keys, not in sequence numbers. Returns the directory and its
/// options.
fn tiered_db() -> (tempfile::TempDir, Options) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options::default()
        .with_inline_background_work(true)
        .with_compaction_style(crate::CompactionStyle::Tiered)
        .with_tiered_run_trigger(2)
        .with_tiered_size_ratio(1.0)
        .with_tiered_max_space_amplification(100.0)
        .with_key_table_size(4096)
        .with_compression(crate::Compression::None);
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    for (keys, round) in [(0..300, 0), (300..600, 0), (100..120, 1), (120..141, 1)] {
        for i in keys {
            db.put(key(i), format!("{round}-{}", value(i)))
                .expect("put");
        }
        db.flush().expect("flush");
    }
    let last = db.stats().levels.len() - 1;
    assert_eq!(db.stats().levels[last].runs, 2, "{:?}", db.stats().levels);
    db.close().expect("close");
    (dir, opts)
}

/// The version the manifest of `dir` describes.
fn live_version(dir: &Path) -> crate::version::Version {
    let path = manifest(dir);
    let file = crate::io::PosixFs::new();
    let reader = crate::io::FileSystem::open_readable(&file, &path, Default::default())
        .expect("open manifest");
    let mut log = crate::wal::LogReader::new(
        crate::io::CountedReader::new(reader, Default::default()),
        name(&path),
        crate::io::IoClass::Other,
        crate::options::WalRecoveryMode::TolerateCorruptedTail,
        crate::version::set::MAX_MANIFEST_RECORD,
    )
    .expect("reader");
    let mut v = crate::version::Version::new(crate::version::MAX_LEVELS);
    while let Some((offset, record)) = log.read_record().expect("record") {
        let edit = crate::version::VersionEdit::decode(&record, "M", offset).expect("edit");
        v = v.apply(&edit, "M", offset).expect("apply");
    }
    v
}

/// `gleaner check` accepts runs of a level that overlap each other in keys, and `gleaner dump`
/// shows each table's run; two tables of one run that overlap are a problem.
#[test]
fn several_runs_per_level_check_clean_but_overlap_within_a_run_is_a_problem() {
    let (dir, opts) = tiered_db();
    let report = check_db(dir.path(), &opts).expect("check runs");
    assert!(report.problems.is_empty(), "{report:#?}");
    let v = live_version(dir.path());
    let level = v.deepest_nonempty_level().expect("tables");
    let runs = v.runs(level);
    assert_eq!(runs.len(), 2);
    let (newer, older) = (&runs[0], &runs[1]);
    let m = dump(&manifest(dir.path()), false);
    for r in [newer, older] {
        let line = format!("new_table: level={level} run={} ", r.id());
        assert!(m.contains(&line), "{line} in {m}");
    }
    // Move the newer run's table into the older run, whose tables hold the same keys.
    let moved = &newer.files()[0];
    append_edit(
        dir.path(),
        &crate::version::VersionEdit {
            deleted_files: vec![(level as u32, moved.number)],
            new_tables: vec![crate::version::NewTable {
                level: level as u32,
                run: older.id(),
                meta: moved.meta().clone(),
            }],
            ..Default::default()
        },
    );
    let report = check_db(dir.path(), &opts).expect("check runs");
    assert_eq!(report.problems.len(), 1, "{report:#?}");
    let p = &report.problems[0];
    assert!(p.file.starts_with("MANIFEST-"), "{p}");
    assert!(
        p.detail
            .contains(&format!("overlap in run {} of level {level}", older.id())),
        "{p}"
    );
}

#[test]
fn dump_shows_range_tombstones_in_wals_and_key_tables() {
    // A WAL: the op, its end key in the value column.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    db.put("a", "1").expect("put");
    let mut batch = crate::WriteBatch::new();
    batch.delete_range("b", "d");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    db.close().expect("close");
    let wal = dump(&wals(dir.path())[0], false);
    assert!(wal.contains("b\tseq=2\tkind=delrange\td\n"), "{wal}");

    // A key table: its count among the properties, then the fragments.
    let path = dir.path().join("000099.sst");
    let fs = crate::io::PosixFs::new();
    let file = crate::io::FileSystem::new_writable(&fs, &path, Default::default()).expect("create");
    let mut b = crate::table::TableBuilder::new(file, Default::default()).expect("builder");
    b.add(
        &crate::key::make_internal_key(b"k", 3, crate::key::ValueKind::Value),
        b"v",
    )
    .expect("add");
    b.add_range_tombstone(b"a", b"m", 5).expect("tombstone");
    b.add_range_tombstone(b"c", b"e", 9).expect("tombstone");
    b.finish().expect("finish");
    let out = dump(&path, false);
    assert!(out.contains("range_deletions: 2\n"), "{out}");
    assert!(
        out.ends_with(
            "k\tseq=3\tkind=put\tv\n\
             # range tombstones: 3 fragments\n\
             a\tseq=5\tkind=delrange\tc\n\
             c\tseq=9\tkind=delrange\te\n\
             c\tseq=5\tkind=delrange\te\n\
             e\tseq=5\tkind=delrange\tm\n"
        ),
        "{out}"
    );
}

#[test]
fn dump_and_check_show_expiries() {
    use crate::expiry::ManualClock;
    let t0 = 1_000_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = std::sync::Arc::new(ManualClock::new(t0));
    let opts = value_options().with_clock(clock.clone());
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    for i in 0..20 {
        let value = if i % 2 == 0 {
            big_value(i, 0)
        } else {
            b"small".to_vec()
        };
        db.put_with_expiry(key(i), value, t0 + 1_000 + i as u64)
            .expect("put");
    }
    db.close().expect("close");
    drop(db);
    // Only in the WAL: each op shows its expiry.
    let wal = dump(&wals(dir.path())[0], false);
    let line = format!(
        "{}\tseq=2\tkind=put\tsmall\texpiry={}\n",
        key(1),
        t0 + 1_001
    );
    assert!(wal.contains(&line), "{line:?} in {wal}");
    // Flushed at the next open: the key table's inline values and handles, the value table's
    // records and properties, and the manifest's table expiry.
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    db.flush().expect("flush");
    let mut keys = String::new();
    for t in tables(dir.path()) {
        keys.push_str(&dump(&t, false));
    }
    assert!(keys.contains(&line), "{line:?} in {keys}");
    assert!(
        keys.contains(&format!(" expiry={}\n", t0 + 1_000)),
        "{keys}"
    );
    let vst = files_of(dir.path(), |t| matches!(t, FileType::ValueTable(_)));
    let values = dump(&vst[0], false);
    assert!(
        values.contains("format_version: 2\nexpiring_records: 10\n"),
        "{values}"
    );
    assert!(
        values.contains(&format!("\texpiry={}\n", t0 + 1_018)),
        "{values}"
    );
    let m = dump(&manifest(dir.path()), false);
    assert!(
        m.contains(&format!("  max_expiry: {}\n", t0 + 1_018)),
        "{m}"
    );
    // Expired and deleted whole: the manifest records the time; check passes the handles of
    // the expired versions whose records went with the table.
    clock.set(t0 + 2_000);
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.tables_expired, 1);
    db.close().expect("close");
    drop(db);
    let m = dump(&manifest(dir.path()), false);
    assert!(m.contains(&format!("time_floor: {}\n", t0 + 2_000)), "{m}");
    let report = check(dir.path());
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert_eq!(report.handles_expired, 10, "{report:#?}");
}

#[test]
fn dump_of_hotness_files_shows_the_hot_prefixes() {
    use crate::partition::persist::HotnessStore;
    use crate::partition::trie::{HotnessConfig, HotnessTrie};
    let dir = tempfile::tempdir().expect("dir");
    let fs: std::sync::Arc<dyn crate::io::FileSystem> =
        std::sync::Arc::new(crate::io::PosixFs::new());
    let mut trie = HotnessTrie::new(HotnessConfig::default());
    trie.restore_hot(vec![(b"user\x013".to_vec(), 40.0)]);
    let mut store =
        HotnessStore::start(fs, dir.path(), Default::default(), &trie, 0).expect("start");
    trie.restore_hot(vec![(b"user7".to_vec(), 9.5)]);
    store.save_tick(&trie).expect("tick");
    let snapshot = dump(&dir.path().join("HOTNESS"), false);
    assert!(snapshot.starts_with("generation: 1\n"), "{snapshot}");
    assert!(snapshot.contains("hot: user\\u{1}3=40\n"), "{snapshot}");
    let log = dump(&dir.path().join("HOTNESS.log"), false);
    assert_eq!(log, "generation 1: user7=9.5\n");
    // Damage is an error naming the file, not a partial dump.
    flip_byte(&dir.path().join("HOTNESS"), 3);
    let err = dump_file(&dir.path().join("HOTNESS"), &mut Vec::new(), false).expect_err("bad");
    assert!(
        err.is_corruption() && err.to_string().contains("HOTNESS"),
        "{err}"
    );
}

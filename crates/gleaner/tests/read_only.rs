//! `Db::open_read_only`: it sees the recovered state (every table and the WAL's unflushed
//! writes), refuses every operation that would write, changes nothing in the directory (names,
//! sizes, modification times and contents of every file are the same after close), shares the
//! lock with other readers and excludes writers.
//!
//! The databases are prepared so that a read-write open *would* change the directory: their
//! WAL holds unflushed writes, L0 holds more tables than `l0_compaction_trigger`, and value
//! tables hold more garbage than `gc_garbage_ratio`. They are written with compaction and GC
//! held off (a high trigger, no GC threads), then the OPTIONS file is replaced by one with the
//! triggering settings, which every later open merges. Each test shows the read-write open
//! changing a copy of the directory, so the read-only open's "unchanged" means something.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use gleaner::io::FaultFs;
use gleaner::options::render_options_file;
use gleaner::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// What the test compares: every file's size, modification time and a digest of its contents,
/// by name.
type Listing = BTreeMap<String, (u64, SystemTime, u64)>;

const L0_TRIGGER: u32 = 4;

/// The settings saved in the prepared database's OPTIONS file: compaction and GC are due.
fn triggering() -> Options {
    Options::default()
        .with_memtable_size(16 << 10)
        .with_key_table_size(8 << 10)
        .with_level_base_size(16 << 20)
        .with_min_separated_value_size(200)
        .with_value_table_size(32 << 10)
        .with_l0_compaction_trigger(L0_TRIGGER)
        .with_gc_threads(1)
        .with_gc_garbage_ratio(0.1)
}

/// The settings the database is written with: no compaction or GC unless asked for.
fn holding_off() -> Options {
    triggering()
        .with_l0_compaction_trigger(100)
        .with_l0_slowdown_trigger(200)
        .with_l0_stop_trigger(300)
        .with_gc_threads(0)
        .with_inline_background_work(true)
}

fn big(i: usize, round: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-round-{round}-").into_bytes();
    v.resize(1000, b'a' + (i % 26) as u8);
    v
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// Writes the database described in the module comment into `dir` with `opts` (which supply
/// the file system) and returns its contents.
fn prepare(dir: &Path, opts: Options) -> Map {
    let mut model = Map::new();
    let db = Db::open(
        dir,
        holding_off().with_file_system(Arc::clone(opts.file_system())),
    )
    .expect("open");
    let mut put = |db: &Db, k: Vec<u8>, v: Vec<u8>| {
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    };
    for i in 0..200 {
        put(&db, key(i), big(i, 0));
    }
    db.flush().expect("flush");
    // Every other value is overwritten, so each first-round value table holds garbage.
    for i in (0..200).step_by(2) {
        put(&db, key(i), big(i, 1));
    }
    db.flush().expect("flush");
    // The overwritten values become garbage when compaction drops their handles.
    db.compact_range(None, None).expect("compact");
    for round in 0..L0_TRIGGER as usize + 1 {
        for i in 0..20 {
            put(
                &db,
                format!("s{round}-{i:02}").into_bytes(),
                format!("small {round} {i}").into_bytes(),
            );
        }
        db.flush().expect("flush");
    }
    // Left in the WAL only: puts (inline and separated), a batch, and deletes of flushed keys.
    for i in 0..30 {
        put(&db, format!("wal-{i:02}").into_bytes(), big(i, 7));
    }
    let mut batch = WriteBatch::new();
    batch.put("wal-batch", "in a batch");
    batch.delete(key(150));
    db.write(batch, &WriteOptions::sync()).expect("batch");
    model.insert(b"wal-batch".to_vec(), b"in a batch".to_vec());
    model.remove(&key(150));
    db.delete(key(3)).expect("delete");
    model.remove(&key(3));
    let s = db.stats();
    assert!(s.levels[0].files > L0_TRIGGER as usize, "{:?}", s.levels);
    assert!(gc_due(&s), "{:?}", s.values);
    assert!(s.memtable_bytes > 0, "writes left in the WAL");
    db.close().expect("close");
    drop(db);
    // The next open of any kind merges these settings: compaction and GC are due.
    let fs = opts.file_system();
    let text = render_options_file(&triggering());
    let tmp = dir.join("OPTIONS.tmp");
    let mut w = fs
        .new_writable(&tmp, gleaner::io::WriteFileOptions::default())
        .expect("create");
    w.append(text.as_bytes()).expect("append");
    w.sync().expect("sync");
    drop(w);
    fs.rename(&tmp, &dir.join("OPTIONS")).expect("rename");
    fs.sync_dir(dir).expect("sync dir");
    model
}

/// Whether some value table's garbage ratio reaches [`triggering`]'s `gc_garbage_ratio` (0.1).
fn gc_due(s: &gleaner::DbStats) -> bool {
    s.values
        .per_table
        .iter()
        .any(|t| t.garbage_bytes * 10 >= t.record_bytes && t.garbage_bytes > 0)
}

/// A digest of a file's contents (FNV-1a), so a changed listing prints briefly.
fn content_digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn listing(dir: &Path) -> Listing {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            let meta = e.metadata().expect("metadata");
            let name = e.file_name().into_string().expect("utf-8 name");
            let digest = content_digest(&std::fs::read(e.path()).expect("read"));
            (name, (meta.len(), meta.modified().expect("mtime"), digest))
        })
        .collect()
}

fn names(l: &Listing) -> Vec<&str> {
    l.keys().map(String::as_str).collect()
}

fn contents(db: &Db) -> Map {
    db.range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("entry"))
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

/// Asserts that `e` is the read-only refusal of `operation`.
fn refused(e: Error, operation: &str) {
    let text = e.to_string();
    match e {
        Error::OpenedReadOnly { operation: op, .. } => assert_eq!(op, operation),
        other => panic!("expected OpenedReadOnly for {operation}, got {other:?}"),
    }
    assert!(text.contains("read-only"), "{text}");
}

/// A read-write open of a copy of `dir` (background work inline, so it runs to its fixed point
/// during the open) changes the directory: the WAL is flushed, L0 compacted, garbage collected.
fn read_write_open_changes_a_copy(dir: &Path, model: &Map) {
    let copy = tempfile::tempdir().expect("tempdir");
    let copy = copy.path().join("db");
    copy_dir(dir, &copy);
    let before = listing(&copy);
    let db = Db::open(&copy, Options::default().with_inline_background_work(true)).expect("open");
    let s = db.stats();
    assert!(
        s.levels[0].files < L0_TRIGGER as usize,
        "the open compacted L0: {:?}",
        s.levels
    );
    assert!(s.gc.jobs > 0, "the open ran GC: {:?}", s.gc);
    assert_eq!(s.memtable_bytes, 0, "the WAL was flushed");
    assert_eq!(&contents(&db), model);
    db.close().expect("close");
    let after = listing(&copy);
    assert_ne!(
        names(&before),
        names(&after),
        "a read-write open rewrites files"
    );
}

#[test]
fn a_read_only_open_sees_everything_refuses_writes_and_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let model = prepare(&dir, Options::default());
    let before = listing(&dir);

    // Explicitly inline background work: a read-only open must not run it either.
    let db = Db::open_read_only(&dir, Options::default().with_inline_background_work(true))
        .expect("read-only open");
    // The saved options were merged.
    assert_eq!(db.options().l0_compaction_trigger(), L0_TRIGGER);
    assert_eq!(db.options().gc_threads(), 1);
    assert_eq!(db.options().memtable_size(), 16 << 10);
    let s = db.stats();
    assert!(s.levels[0].files > L0_TRIGGER as usize, "{:?}", s.levels);
    assert!(gc_due(&s), "{:?}", s.values);
    assert!(s.memtable_bytes > 0, "the WAL was replayed into memory");
    assert!(s.recovery.wal_records > 0);
    assert_eq!(s.gc.jobs, 0);
    assert_eq!(s.compaction.compactions + s.compaction.flushes, 0);

    // Every table and every WAL write, through each read path.
    assert_eq!(contents(&db), model);
    for (k, v) in &model {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v));
    }
    assert_eq!(db.get(key(3)).expect("get"), None, "deleted in the WAL");
    assert_eq!(
        db.get(key(150)).expect("get"),
        None,
        "deleted in a WAL batch"
    );
    let snap = db.snapshot();
    let at_snap = db
        .range(.., &ReadOptions::default().at(&snap))
        .expect("range")
        .map(|r| r.expect("entry"))
        .collect::<Map>();
    assert_eq!(at_snap, model);
    drop(snap);
    let backwards: Vec<Vec<u8>> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .rev()
        .map(|r| r.expect("entry").0)
        .collect();
    assert_eq!(backwards, model.keys().rev().cloned().collect::<Vec<_>>());
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek(b"wal-").expect("seek");
    assert!(it.valid());
    assert_eq!(it.key(), b"wal-00");
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{recount:?}");

    // Every operation that would write is refused, naming itself.
    refused(db.put("x", "y").expect_err("put"), "write");
    refused(db.delete(key(0)).expect_err("delete"), "write");
    let mut batch = WriteBatch::new();
    batch.put("x", "y");
    refused(
        db.write(batch, &WriteOptions::sync()).expect_err("write"),
        "write",
    );
    refused(db.flush().expect_err("flush"), "flush");
    refused(
        db.compact_range(None, None).expect_err("compact"),
        "compact_range",
    );
    refused(db.run_gc().expect_err("gc"), "run_gc");
    assert_eq!(contents(&db), model, "nothing was applied");
    db.close().expect("close");
    drop(db);

    assert_eq!(
        listing(&dir),
        before,
        "names, sizes, mtimes and contents unchanged"
    );
    read_write_open_changes_a_copy(&dir, &model);
}

#[test]
fn readers_share_the_lock_and_exclude_writers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let model = prepare(&dir, Options::default());
    let before = listing(&dir);
    let a = Db::open_read_only(&dir, Options::default()).expect("first reader");
    let b = Db::open_read_only(&dir, Options::default()).expect("second reader");
    assert_eq!(contents(&a), model);
    assert_eq!(contents(&b), model);
    match Db::open(&dir, Options::default()) {
        Err(Error::Locked { path }) => assert!(path.contains("db"), "{path}"),
        other => panic!("expected Locked while readers hold it, got {other:?}"),
    }
    a.close().expect("close");
    assert!(
        matches!(
            Db::open(&dir, Options::default()),
            Err(Error::Locked { .. })
        ),
        "one reader still holds it"
    );
    b.close().expect("close");
    assert_eq!(listing(&dir), before);

    let writer = Db::open(&dir, Options::default()).expect("writer once readers are gone");
    match Db::open_read_only(&dir, Options::default()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Locked while a writer holds it, got {other:?}"),
    }
    writer.close().expect("close");
    let c = Db::open_read_only(&dir, Options::default()).expect("reader after the writer");
    assert_eq!(contents(&c), model);
}

#[test]
fn a_torn_wal_tail_is_skipped_and_left_as_it_is() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let model = prepare(&dir, Options::default());
    let wal = std::fs::read_dir(&dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .expect("a WAL");
    // What a crash in the middle of a write leaves after the last record.
    let mut bytes = std::fs::read(&wal).expect("read");
    let mut x: u32 = 7;
    for _ in 0..3000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        bytes.push((x >> 16) as u8);
    }
    std::fs::write(&wal, &bytes).expect("write");
    let before = listing(&dir);

    let db = Db::open_read_only(&dir, Options::default()).expect("read-only open");
    let s = db.stats();
    assert!(s.recovery.wal_dropped_bytes > 0, "{:?}", s.recovery);
    assert_eq!(contents(&db), model);
    db.close().expect("close");
    drop(db);
    assert_eq!(listing(&dir), before, "the torn tail is still there");
    read_write_open_changes_a_copy(&dir, &model);
}

#[test]
fn a_wal_larger_than_a_memtable_becomes_several_immutable_memtables() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, holding_off().with_memtable_size(4 << 20)).expect("open");
    let mut model = Map::new();
    for i in 0..300 {
        db.put(key(i), big(i, 0)).expect("put");
        model.insert(key(i), big(i, 0));
    }
    for i in (0..300).step_by(3) {
        db.put(key(i), big(i, 1)).expect("put");
        model.insert(key(i), big(i, 1));
    }
    db.close().expect("close");
    drop(db);
    let before = listing(&dir);
    let db = Db::open_read_only(&dir, Options::default().with_memtable_size(16 << 10))
        .expect("read-only open");
    let s = db.stats();
    assert!(s.immutable_memtables > 1, "{}", s.immutable_memtables);
    assert_eq!(s.levels.iter().map(|l| l.files).sum::<usize>(), 0);
    assert_eq!(contents(&db), model);
    for i in (0..300).step_by(7) {
        assert_eq!(db.get(key(i)).expect("get"), model.get(&key(i)).cloned());
    }
    db.close().expect("close");
    drop(db);
    assert_eq!(listing(&dir), before);
}

#[test]
fn a_read_only_open_never_creates_a_database_or_a_lock_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("missing");
    let err = Db::open_read_only(&missing, Options::default()).expect_err("missing");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("read-only"), "{err}");
    assert!(!missing.exists());

    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let err = Db::open_read_only(&empty, Options::default()).expect_err("no CURRENT");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("CURRENT"), "{err}");
    assert_eq!(std::fs::read_dir(&empty).expect("read_dir").count(), 0);

    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").expect("write");
    let err = Db::open_read_only(&file, Options::default()).expect_err("a file");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");

    // A database without its LOCK file opens unlocked and gets none.
    let dir = tmp.path().join("db");
    let model = prepare(&dir, Options::default());
    std::fs::remove_file(dir.join("LOCK")).expect("remove LOCK");
    let before = listing(&dir);
    let db = Db::open_read_only(&dir, Options::default()).expect("open without LOCK");
    assert_eq!(contents(&db), model);
    db.close().expect("close");
    drop(db);
    assert_eq!(listing(&dir), before);

    let err = Db::open_read_only(&dir, Options::default().with_error_if_exists(true))
        .expect_err("error_if_exists");
    assert!(err.to_string().contains("error_if_exists"), "{err}");
}

/// On the fault-injecting file system, frozen so that any mutating operation would fail: the
/// read-only open, reads and close attempt no mutating operation at all.
#[test]
fn a_read_only_open_attempts_no_mutating_operation() {
    let fs = FaultFs::new(3);
    let opts = || Options::default().with_file_system(Arc::new(fs.clone()));
    let model = prepare(Path::new("/ro/db"), opts());
    let files = |fs: &FaultFs| -> Vec<_> {
        fs.list_files()
            .into_iter()
            .map(|p| {
                let bytes = fs.file_bytes(&p);
                (p, bytes)
            })
            .collect()
    };
    let image = files(&fs);
    let digest = (fs.mutating_ops(), fs.operation_digest());
    fs.set_crash_after(0);
    let db = Db::open_read_only("/ro/db", opts().with_inline_background_work(true))
        .expect("read-only open on a frozen file system");
    assert_eq!(contents(&db), model);
    refused(db.flush().expect_err("flush"), "flush");
    db.close().expect("close");
    drop(db);
    assert_eq!(
        (fs.mutating_ops(), fs.operation_digest()),
        digest,
        "no mutating operation was attempted"
    );
    assert_eq!(files(&fs), image);
}

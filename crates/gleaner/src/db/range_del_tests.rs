//! Range deletes through `Db` (issue 25): validated before anything is written, and honoured
//! by point reads and iterators in both directions, snapshots included. (Crate tests: no public
//! API writes a range tombstone until flushes, key tables and compaction keep them.)

use std::path::Path;
use std::sync::Arc;

use crate::io::FaultFs;
use crate::options::MAX_KEY_SIZE;
use crate::{Db, Options, WriteBatch};

fn open() -> Db {
    let opts = Options::default().with_file_system(Arc::new(FaultFs::new(1)));
    Db::open(Path::new("/rd"), opts).expect("open")
}

#[test]
fn an_empty_or_oversized_range_delete_is_refused_and_writes_nothing() {
    let db = open();
    db.put("b", "1").expect("put");
    let before = db.stats().last_sequence;
    for (start, end) in [
        (b"c".to_vec(), b"a".to_vec()),
        (b"b".to_vec(), b"b".to_vec()),
        (b"a".to_vec(), vec![b'z'; MAX_KEY_SIZE + 1]),
        (vec![b'a'; MAX_KEY_SIZE + 1], b"z".to_vec()),
    ] {
        let mut batch = WriteBatch::new();
        batch.put("x", "y");
        batch.delete_range(&start, &end);
        let err = db
            .write(batch, &crate::WriteOptions::default())
            .expect_err("refused");
        assert!(
            matches!(err, crate::Error::InvalidArgument(_)),
            "{}..{} bytes: {err}",
            start.len(),
            end.len()
        );
    }
    assert_eq!(
        db.stats().last_sequence,
        before,
        "no sequence number was used"
    );
    assert_eq!(
        db.get("x").expect("get"),
        None,
        "nothing of the batch was written"
    );
    assert_eq!(db.get("b").expect("get"), Some(b"1".to_vec()));
}

#[test]
fn a_range_delete_in_a_batch_hides_the_memtables_older_versions() {
    let db = open();
    for k in ["a", "b", "c"] {
        db.put(k, "old").expect("put");
    }
    let snap = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.delete_range("a", "c");
    batch.put("b", "new");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    assert_eq!(db.get("a").expect("get"), None);
    assert_eq!(
        db.get("b").expect("get"),
        Some(b"new".to_vec()),
        "written after"
    );
    assert_eq!(
        db.get("c").expect("get"),
        Some(b"old".to_vec()),
        "end is exclusive"
    );
    let at = crate::ReadOptions {
        snapshot: Some(&snap),
        ..Default::default()
    };
    assert_eq!(db.get_with("a", &at).expect("get"), Some(b"old".to_vec()));
}

/// User keys and values, in key order.
type Pairs = Vec<(String, String)>;

/// Every user key and value an iterator sees, forward then backward.
fn scan(db: &Db, opts: &crate::ReadOptions<'_>) -> (Pairs, Pairs) {
    let mut it = db.iter(opts).expect("iter");
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    let mut fwd = Vec::new();
    it.seek_to_first().expect("seek");
    while it.valid() {
        fwd.push((text(it.key()), text(it.value())));
        it.next().expect("next");
    }
    let mut back = Vec::new();
    it.seek_to_last().expect("seek");
    while it.valid() {
        back.push((text(it.key()), text(it.value())));
        it.prev().expect("prev");
    }
    back.reverse();
    (fwd, back)
}

#[test]
fn iterators_skip_what_a_range_delete_hides_in_both_directions() {
    let db = open();
    for k in ["a", "b", "c", "d", "e"] {
        db.put(k, format!("{k}1")).expect("put");
    }
    let snap = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.delete_range("b", "e");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    db.put("c", "c2").expect("put");
    let pairs = |v: &[(&str, &str)]| -> Pairs {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let now = pairs(&[("a", "a1"), ("c", "c2"), ("e", "e1")]);
    let (fwd, back) = scan(&db, &crate::ReadOptions::default());
    assert_eq!(fwd, now);
    assert_eq!(back, now);
    // Seeks land past the deleted keys, in both directions.
    let mut it = db.iter(&crate::ReadOptions::default()).expect("iter");
    it.seek(b"b").expect("seek");
    assert_eq!(it.key(), b"c");
    it.seek(b"d").expect("seek");
    assert_eq!(it.key(), b"e");
    it.seek_for_prev(b"b").expect("seek");
    assert_eq!(it.key(), b"a");
    it.seek_for_prev(b"d").expect("seek");
    assert_eq!(it.key(), b"c");
    // A snapshot older than the delete sees every key.
    let at = crate::ReadOptions {
        snapshot: Some(&snap),
        ..Default::default()
    };
    let then = pairs(&[
        ("a", "a1"),
        ("b", "b1"),
        ("c", "c1"),
        ("d", "d1"),
        ("e", "e1"),
    ]);
    let (fwd, back) = scan(&db, &at);
    assert_eq!(fwd, then);
    assert_eq!(back, then);
}

/// A memtable holding only range tombstones is not empty: the write path switches it, and a
/// reopen replays and flushes it, without error.
#[test]
fn a_memtable_of_range_tombstones_alone_flushes_and_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let mut batch = WriteBatch::new();
    batch.delete_range("a", "b");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    assert!(db.stats().memtable_bytes > 0);
    db.flush().expect("flush");
    db.close().expect("close");
    let mut batch = WriteBatch::new();
    batch.delete_range("c", "d");
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    db.close().expect("close");
    Db::open(dir.path(), Options::default())
        .expect("reopen, replaying a WAL of one range delete")
        .close()
        .expect("close");
}

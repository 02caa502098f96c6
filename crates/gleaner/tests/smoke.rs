//! Basic behaviour of the public API on the real file system.

use gleaner::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

fn small_options() -> Options {
    Options::default()
        .with_memtable_size(64 << 10)
        .with_key_table_size(32 << 10)
        .with_level_base_size(128 << 10)
        .with_block_cache_size(1 << 20)
}

#[test]
fn put_get_delete_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let db = Db::open(&path, small_options()).expect("open");
        db.put("a", "1").expect("put");
        db.put("b", "2").expect("put");
        db.delete("a").expect("delete");
        assert_eq!(db.get("a").expect("get"), None);
        assert_eq!(db.get("b").expect("get"), Some(b"2".to_vec()));
        let mut batch = WriteBatch::new();
        for i in 0..5000u32 {
            batch.put(format!("key{i:06}"), vec![b'x'; 100]);
            if batch.count() == 100 {
                db.write(std::mem::take(&mut batch), &WriteOptions::default())
                    .expect("write");
            }
        }
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
        assert_eq!(db.get("key004999").expect("get"), Some(vec![b'x'; 100]));
        let stats = db.stats();
        assert!(stats.compaction.flushes > 0, "{stats:?}");
        db.close().expect("close");
    }
    let db = Db::open(&path, small_options()).expect("reopen");
    assert_eq!(db.get("a").expect("get"), None);
    assert_eq!(db.get("b").expect("get"), Some(b"2".to_vec()));
    assert_eq!(db.get("key000000").expect("get"), Some(vec![b'x'; 100]));
    let keys: Vec<Vec<u8>> = db
        .range(
            &b"key000010"[..]..&b"key000015"[..],
            &ReadOptions::default(),
        )
        .expect("range")
        .map(|r| r.expect("item").0)
        .collect();
    assert_eq!(keys.len(), 5);
    let back: Vec<Vec<u8>> = db
        .range(
            &b"key000010"[..]..&b"key000015"[..],
            &ReadOptions::default(),
        )
        .expect("range")
        .rev()
        .map(|r| r.expect("item").0)
        .collect();
    assert_eq!(back, keys.iter().rev().cloned().collect::<Vec<_>>());
}

#[test]
fn compact_range_keeps_data_near_the_top_when_the_tree_is_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small_options()).expect("open");
    for i in 0..300u32 {
        db.put(format!("key{i:04}"), [7u8; 30]).expect("put");
    }
    // Only L0 holds data: it is compacted in place, not pushed down.
    db.compact_range(None, None).expect("compact");
    let files: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
    assert_eq!(files, vec![1, 0, 0, 0, 0, 0, 0]);
    for i in 0..300u32 {
        db.put(format!("key{i:04}"), [8u8; 30]).expect("put");
    }
    // New L0 data joins the deepest level, which is then rewritten in place.
    db.compact_range(None, None).expect("compact");
    let files: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
    assert_eq!(
        files,
        vec![1, 0, 0, 0, 0, 0, 0],
        "L0 is the deepest populated level again"
    );
    db.put("extra", "x").expect("put");
    db.flush().expect("flush");
    let before: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
    assert_eq!(before[0], 2);
    db.compact_range(None, None).expect("compact");
    let files: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
    assert_eq!(files, vec![1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(db.get("key0001").expect("get"), Some(vec![8u8; 30]));
}

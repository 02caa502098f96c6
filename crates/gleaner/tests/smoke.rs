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

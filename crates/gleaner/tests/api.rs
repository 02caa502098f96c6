//! The public API's contracts: limits and bad input, options persistence, locking, snapshots,
//! iterator stability under concurrent writes, concurrency, and clean close on drop.

use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::options::MAX_KEY_SIZE;
use gleaner::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

fn mem_options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(8 << 10)
        .with_key_table_size(8 << 10)
        .with_level_base_size(32 << 10)
}

fn invalid_message(e: Error) -> String {
    match e {
        Error::InvalidArgument(m) => m,
        other => panic!("expected InvalidArgument, got {other}"),
    }
}

#[test]
fn db_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<gleaner::Snapshot>();
    fn assert_send<T: Send>() {}
    assert_send::<gleaner::DbIterator>();
    assert_send::<gleaner::RangeIter>();
}

#[test]
fn oversized_keys_values_and_batches_are_rejected_and_nothing_is_written() {
    let fs = FaultFs::new(1);
    let db = Db::open("/limits", mem_options(&fs).with_max_value_size(1000)).expect("open");
    let before = db.stats().last_sequence;
    let long_key = vec![b'k'; MAX_KEY_SIZE + 1];
    let m = invalid_message(db.put(&long_key, "v").expect_err("key too long"));
    assert!(m.contains(&MAX_KEY_SIZE.to_string()), "{m}");
    db.put(vec![b'k'; MAX_KEY_SIZE], "v")
        .expect("a key of exactly the limit is fine");
    let m = invalid_message(db.put("k", vec![0u8; 1001]).expect_err("value too long"));
    assert!(m.contains("max_value_size"), "{m}");
    // One bad op poisons the whole batch: its good ops are not written either.
    let mut batch = WriteBatch::new();
    batch.put("good", "1");
    batch.put("bad", vec![0u8; 1001]);
    invalid_message(
        db.write(batch, &WriteOptions::default())
            .expect_err("bad batch"),
    );
    assert_eq!(db.get("good").expect("get"), None);
    assert_eq!(
        db.stats().last_sequence,
        before + 1,
        "only the exact-limit key was written"
    );
    let m = invalid_message(db.get(&long_key).expect_err("get with an impossible key"));
    assert!(m.contains("key"), "{m}");
    drop(db);
    let db = Db::open(
        "/limits2",
        mem_options(&fs)
            .with_max_value_size(1000)
            .with_max_batch_size(1000 + MAX_KEY_SIZE as u64 + 64),
    )
    .expect("open");
    let mut batch = WriteBatch::new();
    for i in 0..200 {
        batch.put(format!("key{i}"), vec![0u8; 900]);
    }
    let m = invalid_message(
        db.write(batch, &WriteOptions::default())
            .expect_err("batch too large"),
    );
    assert!(m.contains("max_batch_size"), "{m}");
    assert_eq!(db.get("key0").expect("get"), None);
}

#[test]
fn invalid_options_and_paths_are_named() {
    let fs = FaultFs::new(2);
    let e = invalid_message(
        Db::open("/opts", mem_options(&fs).with_l0_stop_trigger(3)).expect_err("bad"),
    );
    assert!(e.contains("l0_stop_trigger"), "{e}");
    let mut o = mem_options(&fs);
    let e = invalid_message(o.set("memtable_sise", "1").expect_err("typo"));
    assert!(e.contains("memtable_sise"), "{e}");
    let e = invalid_message(
        Db::open("/missing", mem_options(&fs).with_create_if_missing(false)).expect_err("missing"),
    );
    assert!(e.contains("create_if_missing"), "{e}");
    fs.set_file_bytes(std::path::Path::new("/a-file"), b"not a directory".to_vec())
        .expect("file");
    let e = invalid_message(Db::open("/a-file", mem_options(&fs)).expect_err("file"));
    assert!(e.contains("is a file"), "{e}");
    drop(Db::open("/exists", mem_options(&fs)).expect("create"));
    let e = invalid_message(
        Db::open("/exists", mem_options(&fs).with_error_if_exists(true)).expect_err("exists"),
    );
    assert!(e.contains("error_if_exists"), "{e}");
}

#[test]
fn options_are_saved_reused_and_overridable() {
    let fs = FaultFs::new(3);
    let db = Db::open(
        "/saved",
        mem_options(&fs)
            .with_memtable_size(12345)
            .with_num_levels(5),
    )
    .expect("create");
    for i in 0..2000u32 {
        db.put(format!("key{i:05}"), [7u8; 50]).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let deepest = db
        .stats()
        .levels
        .iter()
        .rposition(|l| l.files > 0)
        .expect("tables exist");
    drop(db);
    let plain = Options::default().with_file_system(Arc::new(fs.clone()));
    let db = Db::open("/saved", plain.clone()).expect("reopen with defaults");
    assert_eq!(db.options().memtable_size(), 12345, "saved value reused");
    assert_eq!(db.options().num_levels(), 5);
    drop(db);
    let db = Db::open("/saved", plain.clone().with_memtable_size(20000)).expect("override");
    assert_eq!(db.options().memtable_size(), 20000, "explicit setting wins");
    drop(db);
    let text = String::from_utf8(
        fs.file_bytes(std::path::Path::new("/saved/OPTIONS"))
            .expect("OPTIONS"),
    )
    .expect("utf8");
    assert!(text.contains("memtable_size=20000"), "{text}");
    let e = invalid_message(
        Db::open("/saved", plain.with_num_levels(deepest as u32)).expect_err("too few levels"),
    );
    assert!(e.contains("num_levels"), "{e}");
}

#[test]
fn a_second_open_gets_the_lock_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Locked { path }) => {
            assert!(path.contains(&dir.path().display().to_string()), "{path}")
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close().expect("close");
    assert!(matches!(db.put("k", "v"), Err(Error::Closed)));
    let again = Db::open(dir.path(), Options::default()).expect("lock released by close");
    drop(again);
}

#[test]
fn snapshots_see_their_state_through_flushes_and_compactions() {
    let fs = FaultFs::new(4);
    let db = Db::open("/snap", mem_options(&fs)).expect("open");
    for i in 0..500u32 {
        db.put(format!("key{i:04}"), b"old").expect("put");
    }
    let snap = db.snapshot();
    for i in 0..500u32 {
        if i % 2 == 0 {
            db.put(format!("key{i:04}"), b"new").expect("put");
        } else {
            db.delete(format!("key{i:04}")).expect("delete");
        }
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let at = ReadOptions::default().at(&snap);
    for i in 0..500u32 {
        let k = format!("key{i:04}");
        assert_eq!(
            db.get_with(&k, &at).expect("get"),
            Some(b"old".to_vec()),
            "{k} at snapshot"
        );
        let now = db.get(&k).expect("get");
        assert_eq!(now, (i % 2 == 0).then(|| b"new".to_vec()), "{k} now");
    }
    assert_eq!(db.range(.., &at).expect("range").count(), 500);
    drop(snap);
    db.compact_range(None, None)
        .expect("compact without the snapshot");
    assert_eq!(
        db.range(.., &ReadOptions::default())
            .expect("range")
            .count(),
        250
    );
    assert!(
        db.stats().compaction.dropped_tombstones > 0,
        "tombstones dropped at the bottom"
    );
}

#[test]
fn iterators_are_stable_under_concurrent_writes() {
    let fs = FaultFs::new(5);
    let db = Arc::new(Db::open("/stable", mem_options(&fs)).expect("open"));
    for i in 0..1000u32 {
        db.put(format!("key{i:04}"), i.to_le_bytes()).expect("put");
    }
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for round in 1..=5u32 {
                for i in 0..1000u32 {
                    db.put(format!("key{i:04}"), (i + round * 10_000).to_le_bytes())
                        .expect("put");
                    if i % 7 == 0 {
                        db.delete(format!("key{i:04}")).expect("delete");
                    }
                }
            }
        })
    };
    for _ in 0..20 {
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first().expect("seek");
        // Whatever state the iterator captured, it must be one consistent version of each key,
        // in order, without duplicates.
        let mut prev: Option<Vec<u8>> = None;
        while it.valid() {
            if let Some(p) = &prev {
                assert!(p.as_slice() < it.key(), "keys strictly increase");
            }
            assert_eq!(it.value().len(), 4);
            prev = Some(it.key().to_vec());
            it.next().expect("next");
        }
    }
    writer.join().expect("writer");
    let final_count = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .count();
    assert_eq!(final_count, 1000 - 1000usize.div_ceil(7));
}

#[test]
fn concurrent_writers_and_readers_lose_nothing() {
    let fs = FaultFs::new(6);
    let db = Arc::new(
        Db::open("/concurrent", mem_options(&fs).with_compaction_threads(2)).expect("open"),
    );
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..1500u32 {
                    let k = format!("t{t}-{i:05}");
                    db.write(
                        {
                            let mut b = WriteBatch::new();
                            b.put(&k, k.as_bytes());
                            b
                        },
                        &WriteOptions { sync: i % 100 == 0 },
                    )
                    .expect("write");
                    if i % 10 == 0 {
                        assert_eq!(
                            db.get(&k).expect("get"),
                            Some(k.clone().into_bytes()),
                            "read your write"
                        );
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let stats = db.stats();
    assert!(stats.operations.write_groups <= stats.operations.batches);
    for t in 0..4u32 {
        for i in (0..1500u32).step_by(37) {
            let k = format!("t{t}-{i:05}");
            assert_eq!(db.get(&k).expect("get"), Some(k.into_bytes()));
        }
    }
    assert_eq!(
        db.range(.., &ReadOptions::default())
            .expect("range")
            .count(),
        6000
    );
}

#[test]
fn drop_closes_cleanly_and_direct_io_works_on_a_real_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = || {
        Options::default()
            .with_memtable_size(64 << 10)
            .with_key_table_size(64 << 10)
            .with_use_direct_io_for_reads(true)
            .with_use_direct_io_for_background_writes(true)
    };
    let db = match Db::open(dir.path(), opts()) {
        Ok(db) => db,
        // Some file systems (tmpfs) refuse O_DIRECT: then the open must say which option to turn
        // off, and there is nothing more to test here.
        Err(Error::InvalidArgument(m)) if m.contains("does not support direct I/O") => {
            assert!(m.contains("use_direct_io_for_reads"), "{m}");
            return;
        }
        Err(e) => panic!("open with direct I/O: {e}"),
    };
    for i in 0..3000u32 {
        db.put(format!("key{i:05}"), format!("value{i}"))
            .expect("put");
    }
    db.compact_range(None, None).expect("compact");
    // Dropped without close: Drop closes (and releases the lock).
    drop(db);
    let db = Db::open(dir.path(), opts()).expect("reopen");
    for i in (0..3000u32).step_by(101) {
        assert_eq!(
            db.get(format!("key{i:05}")).expect("get"),
            Some(format!("value{i}").into_bytes())
        );
    }
}

#[test]
fn writes_slow_down_and_stop_when_background_work_falls_behind() {
    let fs = FaultFs::new(7);
    // Triggers at their minimum: any L0 table delays writes, two stop them, and one sealed
    // memtable waiting for flush stops them too. Writing fast from several threads must hit the
    // limits, and every write must still land.
    let opts = mem_options(&fs)
        .with_memtable_size(2 << 10)
        .with_l0_compaction_trigger(1)
        .with_l0_slowdown_trigger(1)
        .with_l0_stop_trigger(2)
        .with_max_immutable_memtables(1);
    let db = Arc::new(Db::open("/stalls", opts).expect("open"));
    let threads: Vec<_> = (0..3u32)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..600u32 {
                    db.put(format!("t{t}-{i:04}"), [b'v'; 64]).expect("put");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    let stats = db.stats();
    assert!(stats.stalls.slowdown_count > 0, "{:?}", stats.stalls);
    assert!(stats.stalls.stop_count > 0, "{:?}", stats.stalls);
    assert!(
        stats.stalls.stop_l0_micros <= stats.stalls.stop_micros,
        "the L0 share is part of the stop time: {:?}",
        stats.stalls
    );
    // The stop trigger blocks new memtables, so L0 can exceed it only by the sealed memtables
    // already waiting for flush.
    assert!(
        stats.levels[0].files <= 3,
        "L0 stays bounded: {:?}",
        stats.levels
    );
    assert_eq!(
        db.range(.., &ReadOptions::default())
            .expect("range")
            .count(),
        1800
    );
}

#[test]
fn compacted_tables_are_deleted_only_after_their_last_reader_is_gone() {
    let fs = FaultFs::new(8);
    let dir = std::path::Path::new("/obsolete");
    let db = Db::open(dir, mem_options(&fs)).expect("open");
    let tables_on_disk = || {
        fs.list_files()
            .iter()
            .filter(|p| p.parent() == Some(dir) && p.to_string_lossy().ends_with(".sst"))
            .count()
    };
    for i in 0..3000u32 {
        db.put(format!("key{i:05}"), [1u8; 40]).expect("put");
    }
    db.flush().expect("flush");
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    let before: usize = db.stats().levels.iter().map(|l| l.files).sum();
    for i in 0..3000u32 {
        db.put(format!("key{i:05}"), [2u8; 40]).expect("overwrite");
    }
    db.compact_range(None, None).expect("compact");
    let live: usize = db.stats().levels.iter().map(|l| l.files).sum();
    assert!(
        tables_on_disk() >= before + live,
        "the iterator's tables are still on disk"
    );
    // The old tables are gone from the version but the iterator still reads the old values.
    it.seek_to_first().expect("seek");
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.value(), [1u8; 40], "old state");
        n += 1;
        it.next().expect("next");
    }
    assert_eq!(n, 3000);
    drop(it);
    // Deletion happens on the next background pass; close runs one.
    db.close().expect("close");
    assert_eq!(tables_on_disk(), live, "only live tables remain");
}

#[test]
fn the_largest_allowed_value_round_trips_through_flush_and_compaction() {
    let fs = FaultFs::new(9);
    let max = gleaner::options::MAX_VALUE_SIZE_LIMIT;
    let db = Db::open("/big", mem_options(&fs).with_max_value_size(max)).expect("open");
    let big: Vec<u8> = (0..max).map(|i| (i % 251) as u8).collect();
    db.put("big", &big).expect("largest value");
    db.put("small", "s").expect("put");
    db.flush().expect("flush holds the value inline");
    db.compact_range(None, None).expect("compact");
    assert!(db.get("big").expect("get") == Some(big), "value intact");
    let e = invalid_message(
        Db::open("/big2", mem_options(&fs).with_max_value_size(max + 1)).expect_err("over the cap"),
    );
    assert!(e.contains("max_value_size"), "{e}");
}

/// `sync_wal` makes the unsynced writes before it survive a power loss; without it they are
/// lost (the control run shows the power loss really drops unsynced data).
#[test]
fn sync_wal_makes_earlier_unsynced_writes_durable() {
    use gleaner::io::TornMode;
    for sync in [false, true] {
        let fs = FaultFs::new(7);
        let db = Db::open("/sync_wal", mem_options(&fs)).expect("open");
        db.put("before", "1").expect("put");
        db.put("also", "2").expect("put");
        if sync {
            db.sync_wal().expect("sync_wal");
        }
        // Power is lost now: close cannot sync, and the crash keeps only synced bytes.
        fs.set_crash_after(0);
        drop(db);
        fs.crash(TornMode::None);
        let db = Db::open("/sync_wal", mem_options(&fs)).expect("reopen");
        let expect = |v: &str| sync.then(|| v.as_bytes().to_vec());
        assert_eq!(db.get("before").expect("get"), expect("1"), "sync {sync}");
        assert_eq!(db.get("also").expect("get"), expect("2"), "sync {sync}");
    }
}

#[test]
fn sync_wal_is_refused_read_only_and_after_close() {
    let fs = FaultFs::new(8);
    let db = Db::open("/sync_wal_ro", mem_options(&fs)).expect("open");
    db.put("k", "v").expect("put");
    db.close().expect("close");
    assert!(matches!(db.sync_wal(), Err(Error::Closed)));
    drop(db);
    let ro = Db::open_read_only("/sync_wal_ro", mem_options(&fs)).expect("open read-only");
    match ro.sync_wal() {
        Err(Error::OpenedReadOnly { operation, .. }) => assert_eq!(operation, "sync_wal"),
        other => panic!("expected OpenedReadOnly, got {other:?}"),
    }
}

/// The entry counts of `stats()` (what a server's key-count estimate uses) count memtable
/// entries and, after a flush, key-table entries: every version and tombstone they hold.
#[test]
fn stats_count_memtable_and_table_entries() {
    let fs = FaultFs::new(9);
    let db = Db::open("/entries", mem_options(&fs).with_memtable_size(1 << 20)).expect("open");
    for i in 0..100 {
        db.put(format!("key{i:03}"), "v").expect("put");
    }
    db.delete("key000").expect("delete");
    let s = db.stats();
    assert_eq!(s.memtable_entries, 101);
    assert_eq!(s.levels.iter().map(|l| l.entries).sum::<u64>(), 0);
    db.flush().expect("flush");
    let s = db.stats();
    assert_eq!(s.memtable_entries, 0);
    // No snapshot needs key000's put, so the flush keeps only its tombstone.
    assert_eq!(s.levels.iter().map(|l| l.entries).sum::<u64>(), 100);
}

//! Whole-table tests: build → open → get / iterate, against a sorted model, plus corruption and
//! truncation.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::FOOTER_LEN;
use super::test_util::MemFile;
use super::*;
use crate::cache::BlockCache;
use crate::error::Error;
use crate::io::{IoClass, IoStats};
use crate::iter::InternalIterator;
use crate::key::{
    ValueKind, compare_internal, make_internal_key, make_lookup_key, pack_trailer, user_key,
};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn build(entries: &Entries, opts: TableBuilderOptions) -> (MemFile, FinishedTable) {
    let file = MemFile::default();
    let mut b = TableBuilder::new(Box::new(file.writer()), opts).unwrap();
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    let done = b.finish().unwrap();
    assert_eq!(done.file_size, file.len());
    assert_eq!(*file.syncs.lock(), 1);
    (file, done)
}

fn open(file: &MemFile, cache: Option<Arc<BlockCache>>) -> crate::Result<Arc<Table>> {
    Table::open(
        file.reader(),
        "000012.sst".into(),
        12,
        file.len(),
        cache,
        IoClass::Other,
    )
    .map(Arc::new)
}

/// User keys `user{i}` for i in 0..n (even i only, so odd ones are absent), each with 1–3
/// versions; some versions are deletions.
fn model(rng: &mut StdRng, n: usize, max_value: usize) -> Entries {
    let mut out = Vec::new();
    for i in (0..n).step_by(2) {
        let user = format!("user{i:06}");
        let versions = rng.random_range(1..=3);
        let mut seq = 1000 + rng.random_range(0..100u64);
        for _ in 0..versions {
            let kind = if rng.random_bool(0.15) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let value = if kind == ValueKind::Deletion {
                Vec::new()
            } else {
                let len = rng.random_range(0..=max_value);
                format!("value-{i}-{seq}-")
                    .into_bytes()
                    .into_iter()
                    .cycle()
                    .take(len)
                    .collect()
            };
            out.push((make_internal_key(user.as_bytes(), seq, kind), value));
            seq -= rng.random_range(1..50);
        }
    }
    out.sort_by(|a, b| compare_internal(&a.0, &b.0));
    out
}

/// What `Table::get` must return for a lookup, computed from the model.
fn expected_get(entries: &Entries, lookup: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let i = entries.partition_point(|(k, _)| compare_internal(k, lookup).is_lt());
    entries
        .get(i)
        .filter(|(k, _)| user_key(k) == user_key(lookup))
        .cloned()
}

fn scan_forward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn scan_backward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

fn opts(block_size: usize, compression: Compression) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size,
        compression,
        ..TableBuilderOptions::default()
    }
}

fn check_table(entries: &Entries, o: TableBuilderOptions, seed: u64) {
    let (file, done) = build(entries, o);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = open(&file, Some(cache.clone())).unwrap();
    let p = table.properties();
    assert_eq!(p, &done.properties);
    assert_eq!(p.num_entries, entries.len() as u64);
    assert_eq!(
        p.num_deletions,
        entries
            .iter()
            .filter(|(k, _)| k[k.len() - 8] == ValueKind::Deletion as u8)
            .count() as u64
    );
    assert_eq!(p.compression, o.compression.name());
    assert_eq!(p.format_version, FORMAT_VERSION);
    if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
        assert_eq!(p.smallest_key, first.0);
        assert_eq!(p.largest_key, last.0);
    }
    let ctx = ReadCtx::new(IoClass::UserRead);

    // Full scans both ways.
    let mut it = table.iter(ctx);
    assert_eq!(scan_forward(&mut it).unwrap(), *entries);
    assert_eq!(scan_backward(&mut it).unwrap(), *entries);

    // Point lookups at every stored key's sequence, just above and just below, and absent keys.
    let mut rng = StdRng::seed_from_u64(seed);
    for (k, _) in entries {
        let u = user_key(k);
        let seq = crate::key::seq_of(k);
        for s in [
            seq,
            seq + 1,
            seq.saturating_sub(1),
            0,
            crate::key::MAX_SEQUENCE,
        ] {
            let lookup = make_lookup_key(u, s);
            assert_eq!(
                table.get(&lookup, ctx).unwrap(),
                expected_get(entries, &lookup)
            );
        }
    }
    for i in 0..200 {
        let user = format!("user{:06}", 2 * rng.random_range(0..2000) + 1);
        let lookup = make_lookup_key(user.as_bytes(), 5000);
        assert_eq!(table.get(&lookup, ctx).unwrap(), None, "{i}");
    }

    // Random seeks against the model, with a few steps either way.
    let mut it = table.iter(ReadCtx {
        class: IoClass::CompactionRead,
        fill_cache: false,
    });
    for _ in 0..300 {
        let user = format!("user{:06}", rng.random_range(0..4100));
        let target = make_lookup_key(user.as_bytes(), rng.random_range(900..1200));
        let mut pos = if rng.random_bool(0.5) {
            it.seek(&target).unwrap();
            let i = entries.partition_point(|(k, _)| compare_internal(k, &target).is_lt());
            (i < entries.len()).then_some(i)
        } else {
            it.seek_for_prev(&target).unwrap();
            let i = entries.partition_point(|(k, _)| compare_internal(k, &target).is_le());
            i.checked_sub(1)
        };
        for _ in 0..4 {
            match pos {
                Some(p) => {
                    assert!(it.valid());
                    assert_eq!(
                        (it.key(), it.value()),
                        (&entries[p].0[..], &entries[p].1[..])
                    );
                }
                None => {
                    assert!(!it.valid());
                    break;
                }
            }
            if rng.random_bool(0.5) {
                it.next().unwrap();
                pos = pos.and_then(|p| (p + 1 < entries.len()).then_some(p + 1));
            } else {
                it.prev().unwrap();
                pos = pos.and_then(|p| p.checked_sub(1));
            }
        }
    }
}

#[test]
fn round_trip_default_options() {
    let mut rng = StdRng::seed_from_u64(1);
    let entries = model(&mut rng, 4000, 100);
    for c in [Compression::None, Compression::Lz4] {
        check_table(&entries, opts(4096, c), 11);
    }
}

#[test]
fn round_trip_tiny_blocks() {
    let mut rng = StdRng::seed_from_u64(2);
    let entries = model(&mut rng, 1000, 40);
    for c in [Compression::None, Compression::Lz4] {
        for restart_interval in [1, 16] {
            let o = TableBuilderOptions {
                restart_interval,
                ..opts(64, c)
            };
            check_table(&entries, o, 12);
        }
    }
    // block_size 1: one entry per block.
    check_table(&entries, opts(1, Compression::Lz4), 13);
}

#[test]
fn round_trip_large_value_and_no_filter() {
    let mut rng = StdRng::seed_from_u64(3);
    let mut entries = model(&mut rng, 200, 30);
    let big: Vec<u8> = (0..(1u32 << 20)).map(|i| (i * 7 % 251) as u8).collect();
    let k = make_internal_key(b"user000100", 1, ValueKind::Value);
    entries.push((k, big));
    entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
    for c in [Compression::None, Compression::Lz4] {
        check_table(&entries, opts(4096, c), 14);
        let o = TableBuilderOptions {
            bloom_bits_per_key: 0,
            ..opts(256, c)
        };
        check_table(&entries, o, 15);
    }
}

#[test]
fn empty_table() {
    let (file, done) = build(&Vec::new(), TableBuilderOptions::default());
    assert_eq!(done.properties.num_entries, 0);
    let table = open(&file, None).unwrap();
    let mut it = table.iter(ReadCtx::default());
    assert!(scan_forward(&mut it).unwrap().is_empty());
    assert!(scan_backward(&mut it).unwrap().is_empty());
    assert_eq!(
        table
            .get(&make_lookup_key(b"a", 9), ReadCtx::default())
            .unwrap(),
        None
    );
}

#[test]
fn get_returns_newest_visible_version() {
    let entries: Entries = vec![
        (
            make_internal_key(b"k", 30, ValueKind::Value),
            b"v30".to_vec(),
        ),
        (make_internal_key(b"k", 20, ValueKind::Deletion), vec![]),
        (
            make_internal_key(b"k", 10, ValueKind::Value),
            b"v10".to_vec(),
        ),
    ];
    let (file, _) = build(&entries, opts(1, Compression::None));
    let table = open(&file, None).unwrap();
    let ctx = ReadCtx::default();
    let get = |s| table.get(&make_lookup_key(b"k", s), ctx).unwrap();
    assert_eq!(get(100), Some(entries[0].clone()));
    assert_eq!(get(30), Some(entries[0].clone()));
    assert_eq!(get(29), Some(entries[1].clone()));
    assert_eq!(get(20), Some(entries[1].clone()));
    assert_eq!(get(15), Some(entries[2].clone()));
    assert_eq!(get(9), None);
    assert!(
        matches!(table.get(b"short", ctx), Err(Error::InvalidArgument(_))),
        "lookup keys need a trailer"
    );
}

#[test]
fn bloom_filter_skips_io_for_absent_keys() {
    let mut rng = StdRng::seed_from_u64(4);
    let entries = model(&mut rng, 2000, 20);
    let (file, _) = build(&entries, TableBuilderOptions::default());
    let stats = Arc::new(IoStats::default());
    let table = Table::open(
        file.reader_with_stats(stats.clone()),
        "1.sst".into(),
        1,
        file.len(),
        None,
        IoClass::Other,
    )
    .unwrap();
    let ctx = ReadCtx::new(IoClass::UserRead);
    let mut reads = 0;
    for i in 0..1000 {
        let user = format!("user{:06}", 2 * i + 1);
        assert!(
            table
                .get(&make_lookup_key(user.as_bytes(), 5000), ctx)
                .unwrap()
                .is_none()
        );
        reads += u64::from(table.may_contain(user.as_bytes()));
    }
    // Only false positives read a data block.
    assert_eq!(stats.get(IoClass::UserRead).read_ops, reads);
    assert!(reads < 30, "{reads} false positives");
    for (k, _) in &entries {
        assert!(table.may_contain(user_key(k)));
    }
}

#[test]
fn block_cache_is_used_and_fill_cache_respected() {
    let mut rng = StdRng::seed_from_u64(5);
    let entries = model(&mut rng, 2000, 50);
    let (file, done) = build(&entries, TableBuilderOptions::default());
    let cache = Arc::new(BlockCache::new(1 << 20));
    let stats = Arc::new(IoStats::default());
    let table = Arc::new(
        Table::open(
            file.reader_with_stats(stats.clone()),
            "5.sst".into(),
            5,
            file.len(),
            Some(cache.clone()),
            IoClass::Other,
        )
        .unwrap(),
    );
    let no_fill = ReadCtx {
        class: IoClass::CompactionRead,
        fill_cache: false,
    };
    assert_eq!(scan_forward(&mut table.iter(no_fill)).unwrap(), entries);
    assert_eq!(cache.usage_bytes(), 0);
    let blocks = done.properties.num_data_blocks;
    assert_eq!(stats.get(IoClass::CompactionRead).read_ops, blocks);

    let fill = ReadCtx::new(IoClass::UserRead);
    scan_forward(&mut table.iter(fill)).unwrap();
    assert!(cache.usage_bytes() > 0);
    let hits = cache.hits();
    scan_forward(&mut table.iter(fill)).unwrap();
    assert_eq!(cache.hits() - hits, blocks);
    assert_eq!(stats.get(IoClass::UserRead).read_ops, blocks);
}

#[test]
fn builder_rejects_bad_input() {
    let file = MemFile::default();
    let new = |o| TableBuilder::new(Box::new(file.writer()), o);
    for bad in [
        opts(0, Compression::Lz4),
        opts(super::format::MAX_BLOCK_SIZE + 1, Compression::Lz4),
        TableBuilderOptions {
            restart_interval: 0,
            ..Default::default()
        },
        TableBuilderOptions {
            bloom_bits_per_key: 65,
            ..Default::default()
        },
    ] {
        assert!(matches!(new(bad), Err(Error::InvalidArgument(_))));
    }
    let mut b = new(TableBuilderOptions::default()).unwrap();
    let k5 = make_internal_key(b"b", 5, ValueKind::Value);
    b.add(&k5, b"x").unwrap();
    let invalid = |r: crate::Result<()>| assert!(matches!(r, Err(Error::InvalidArgument(_))));
    invalid(b.add(&k5, b"again"));
    invalid(b.add(&make_internal_key(b"a", 9, ValueKind::Value), b""));
    invalid(b.add(&make_internal_key(b"b", 6, ValueKind::Value), b""));
    invalid(b.add(b"short", b""));
    let mut unknown_kind = b"c".to_vec();
    unknown_kind.extend_from_slice(&pack_trailer(1, 0x7f).to_le_bytes());
    invalid(b.add(&unknown_kind, b""));
    invalid(b.add(
        &make_internal_key(&[b'z'; (64 << 10) + 1], 1, ValueKind::Value),
        b"",
    ));
    // Rejected entries were not added.
    b.add(&make_internal_key(b"b", 4, ValueKind::Deletion), b"")
        .unwrap();
    let done = b.finish().unwrap();
    assert_eq!(done.properties.num_entries, 2);
    assert_eq!(done.properties.num_deletions, 1);
    assert_eq!(
        (done.properties.smallest_seq, done.properties.largest_seq),
        (4, 5)
    );
}

/// Flips bytes of a small table one at a time: every outcome must be a corruption error or
/// exactly the right data, and the damage must be noticed.
#[test]
fn flipped_bytes_are_detected_or_harmless() {
    let mut rng = StdRng::seed_from_u64(6);
    let entries = model(&mut rng, 60, 30);
    for c in [Compression::None, Compression::Lz4] {
        let (file, _) = build(&entries, opts(128, c));
        let good = file.bytes();
        for i in 0..good.len() {
            for mask in [0x01u8, 0x80] {
                let bad = MemFile::from_bytes(good.clone());
                bad.flip(i, mask);
                let what = format!("{c:?} byte {i} mask {mask:#x}");
                // Every byte is covered by a checksum, the magic or the version, and the
                // exercise reads every block, so every flip must be noticed.
                assert!(
                    check_damaged(&bad, &entries, &what),
                    "{what} went unnoticed"
                );
            }
        }
    }
}

/// Opens a damaged table and exercises it: anything but a corruption error or correct data
/// fails the test. Returns whether the damage was detected.
fn check_damaged(file: &MemFile, entries: &Entries, what: &str) -> bool {
    let corrupt = |e: Error| assert!(e.is_corruption(), "{what}: {e}");
    let table = match open(file, None) {
        Ok(t) => t,
        Err(e) => {
            corrupt(e);
            return true;
        }
    };
    let mut detected = false;
    let ctx = ReadCtx::default();
    for (k, _) in entries.iter().step_by(3) {
        let lookup = make_lookup_key(user_key(k), crate::key::seq_of(k));
        match table.get(&lookup, ctx) {
            Ok(got) => assert_eq!(got, expected_get(entries, &lookup), "{what}"),
            Err(e) => {
                corrupt(e);
                detected = true;
            }
        }
    }
    // Forward: entries must be a prefix of the model until an error.
    let mut it = table.iter(ctx);
    let mut n = 0;
    let mut r = it.seek_to_first();
    while r.is_ok() && it.valid() {
        assert_eq!(
            (it.key(), it.value()),
            (&entries[n].0[..], &entries[n].1[..]),
            "{what}"
        );
        n += 1;
        r = it.next();
    }
    match r {
        Ok(()) => assert_eq!(n, entries.len(), "{what}"),
        Err(e) => {
            corrupt(e);
            detected = true;
        }
    }
    detected
}

#[test]
fn damaged_data_block_is_caught_by_its_crc() {
    let mut rng = StdRng::seed_from_u64(7);
    let entries = model(&mut rng, 60, 30);
    let (file, done) = build(&entries, opts(128, Compression::None));
    let data_bytes = done.properties.data_bytes as usize;
    for i in (0..data_bytes).step_by(7) {
        let bad = MemFile::from_bytes(file.bytes());
        bad.flip(i, 0x10);
        assert!(
            check_damaged(&bad, &entries, &format!("data byte {i}")),
            "damage at data byte {i} went unnoticed"
        );
    }
}

#[test]
fn truncated_files_are_corruption() {
    let mut rng = StdRng::seed_from_u64(8);
    let entries = model(&mut rng, 100, 30);
    let (file, _) = build(&entries, TableBuilderOptions::default());
    let good = file.bytes();
    for len in (0..good.len()).step_by(13).chain([good.len() - 1]) {
        let short = MemFile::from_bytes(good[..len].to_vec());
        // Declared size = the truncated size: the footer is not where it should be.
        let err = open(&short, None).unwrap_err();
        assert!(err.is_corruption(), "len {len}: {err}");
        // Declared size = the original size: the file is shorter than recorded.
        let err = Table::open(
            short.reader(),
            "t.sst".into(),
            1,
            good.len() as u64,
            None,
            IoClass::Other,
        )
        .unwrap_err();
        assert!(err.is_corruption(), "len {len}: {err}");
    }
    assert!(good.len() > FOOTER_LEN);
}

#[test]
fn corruption_errors_name_file_and_block() {
    let mut rng = StdRng::seed_from_u64(9);
    let entries = model(&mut rng, 100, 30);
    let (file, _) = build(&entries, opts(256, Compression::None));
    let table = open(&file, None).unwrap();
    // Find the second data block's offset through the index.
    let mut index = BlockIter::internal(table.index_block());
    index.seek_to_first().unwrap();
    index.next().unwrap();
    let h = BlockHandle::decode(index.value()).unwrap();
    file.flip(h.offset as usize + 3, 0x20);
    let table = open(&file, None).unwrap();
    let err = scan_forward(&mut table.iter(ReadCtx::default())).unwrap_err();
    match err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!((file.as_str(), offset), ("000012.sst", h.offset));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_version_is_named() {
    let (file, _) = build(&Vec::new(), TableBuilderOptions::default());
    let at = file.len() as usize - 16;
    file.flip(at, 1 ^ 7);
    let err = open(&file, None).unwrap_err().to_string();
    assert!(err.contains("version 7"), "{err}");
}

#[test]
fn table_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    fn assert_send<T: Send>() {}
    assert_send::<TableIter>();
}

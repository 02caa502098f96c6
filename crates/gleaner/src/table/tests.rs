//! Whole-table tests: build → open → get / get_key / iterate, against a sorted model, for both
//! layouts, plus corruption and truncation. Index-decoupled specifics (I/O per lookup, parts,
//! damage to the handle part) are in `decoupled_tests.rs`.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::FOOTER_LEN;
use super::test_util::MemFile;
use super::*;
use crate::cache::{BlockCache, CachePriority};
use crate::error::Error;
use crate::io::{IoClass, IoStats};
use crate::iter::InternalIterator;
use crate::key::{
    ParsedKey, ValueKind, compare_internal, make_internal_key, make_lookup_key, pack_trailer,
    user_key,
};
use crate::value::ValueHandle;

pub(super) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Both layouts, for tests that must hold for each.
pub(super) const LAYOUTS: [KeyTableLayout; 2] =
    [KeyTableLayout::Mixed, KeyTableLayout::IndexDecoupled];

pub(super) fn build(entries: &Entries, opts: TableBuilderOptions) -> (MemFile, FinishedTable) {
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

pub(super) fn open(file: &MemFile, cache: Option<Arc<BlockCache>>) -> crate::Result<Arc<Table>> {
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
/// versions; some versions are deletions, about a third are value handles (so both parts of an
/// index-decoupled table are populated, and some keys have versions in both).
pub(super) fn model(rng: &mut StdRng, n: usize, max_value: usize) -> Entries {
    let mut out = Vec::new();
    for i in (0..n).step_by(2) {
        let user = format!("user{i:06}");
        let versions = rng.random_range(1..=3);
        let mut seq = 1000 + rng.random_range(0..100u64);
        for _ in 0..versions {
            let kind = match rng.random_range(0..100) {
                0..15 => ValueKind::Deletion,
                15..50 => ValueKind::ValueHandle,
                50..60 => ValueKind::ValueWithExpiry,
                _ => ValueKind::Value,
            };
            let value = match kind {
                ValueKind::Deletion => Vec::new(),
                ValueKind::ValueHandle => ValueHandle {
                    file_number: 7 + i as u64 % 5,
                    offset: seq * 100,
                    len: 4096 + i as u64,
                }
                .encode(),
                ValueKind::ValueWithExpiry => {
                    let mut v = Vec::new();
                    crate::expiry::encode_inline(&mut v, 1_000 + seq, format!("v{i}").as_bytes());
                    v
                }
                ValueKind::Value => {
                    let len = rng.random_range(0..=max_value);
                    format!("value-{i}-{seq}-")
                        .into_bytes()
                        .into_iter()
                        .cycle()
                        .take(len)
                        .collect()
                }
            };
            out.push((make_internal_key(user.as_bytes(), seq, kind), value));
            seq -= rng.random_range(1..50);
        }
    }
    out.sort_by(|a, b| compare_internal(&a.0, &b.0));
    out
}

pub(super) fn kind_of(ikey: &[u8]) -> ValueKind {
    ParsedKey::parse(ikey).expect("model keys parse").kind
}

/// What `Table::get_key` must return, derived from what `get` must return.
pub(super) fn expected_get_key(entries: &Entries, lookup: &[u8]) -> Option<(Vec<u8>, KeyEntry)> {
    expected_get(entries, lookup).map(|(k, v)| {
        let e = match kind_of(&k) {
            ValueKind::ValueHandle => KeyEntry::Handle(v),
            kind @ (ValueKind::Value | ValueKind::ValueWithExpiry) => KeyEntry::Inline {
                expiry: crate::expiry::entry_expiry(kind, &v, "model").expect("model expiry"),
            },
            ValueKind::Deletion => KeyEntry::Deletion,
        };
        (k, e)
    })
}

/// What `Table::get` must return for a lookup, computed from the model.
pub(super) fn expected_get(entries: &Entries, lookup: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let i = entries.partition_point(|(k, _)| compare_internal(k, lookup).is_lt());
    entries
        .get(i)
        .filter(|(k, _)| user_key(k) == user_key(lookup))
        .cloned()
}

pub(super) fn scan_forward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

pub(super) fn scan_backward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

pub(super) fn opts(block_size: usize, compression: Compression) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size,
        compression,
        ..TableBuilderOptions::default()
    }
}

/// Builds `entries` in each layout with `o` and checks everything a reader offers against the
/// model.
fn check_table(entries: &Entries, o: TableBuilderOptions, seed: u64) {
    for layout in LAYOUTS {
        check_table_layout(entries, TableBuilderOptions { layout, ..o }, seed);
    }
}

fn check_table_layout(entries: &Entries, o: TableBuilderOptions, seed: u64) {
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
    assert_eq!(p.format_version, o.layout.format_version());
    assert_eq!((p.layout(), table.layout()), (o.layout, o.layout));
    let handles = entries
        .iter()
        .filter(|(k, _)| kind_of(k) == ValueKind::ValueHandle)
        .count() as u64;
    match o.layout {
        KeyTableLayout::Mixed => {
            assert_eq!(p.num_handle_entries, 0);
            assert_eq!((p.num_handle_blocks, p.handle_bytes), (0, 0));
            assert_eq!(p.handle_index_bytes, 0);
        }
        KeyTableLayout::IndexDecoupled => {
            assert_eq!(p.num_handle_entries, handles);
            assert_eq!(p.num_handle_blocks == 0, handles == 0);
            assert!(p.handle_index_bytes > 0);
            assert_eq!(p.num_data_blocks == 0, handles == entries.len() as u64);
        }
    }
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
            assert_eq!(
                table.get_key(&lookup, ctx).unwrap(),
                expected_get_key(entries, &lookup)
            );
        }
    }
    for i in 0..200 {
        let user = format!("user{:06}", 2 * rng.random_range(0..2000) + 1);
        let lookup = make_lookup_key(user.as_bytes(), 5000);
        assert_eq!(table.get(&lookup, ctx).unwrap(), None, "{i}");
        assert_eq!(table.get_key(&lookup, ctx).unwrap(), None, "{i}");
    }

    // Each part alone is sorted and holds exactly the entries its layout routes to it.
    let mut data = scan_forward(&mut table.part_iter(TablePart::Data, ctx).unwrap()).unwrap();
    match table.part_iter(TablePart::Handles, ctx) {
        None => assert_eq!(o.layout, KeyTableLayout::Mixed),
        Some(mut it) => {
            let handle_part = scan_forward(&mut it).unwrap();
            assert!(
                handle_part
                    .iter()
                    .all(|(k, _)| kind_of(k) == ValueKind::ValueHandle)
            );
            assert!(
                data.iter()
                    .all(|(k, _)| kind_of(k) != ValueKind::ValueHandle)
            );
            assert_eq!(handle_part.len() as u64, handles);
            assert_eq!(scan_backward(&mut it).unwrap(), handle_part);
            data.extend(handle_part);
            data.sort_by(|a, b| compare_internal(&a.0, &b.0));
        }
    }
    assert_eq!(data, *entries);

    // Random seeks against the model, with a few steps either way (so the merge of an
    // index-decoupled table changes direction often).
    let mut it = table.iter(ReadCtx {
        class: IoClass::CompactionRead,
        fill_cache: false,
        readahead: 0,
        readahead_ramp: false,
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
        for _ in 0..6 {
            match pos {
                Some(p) => {
                    assert!(it.valid());
                    assert_eq!(
                        (it.key(), it.value()),
                        (&entries[p].0[..], &entries[p].1[..])
                    );
                    let want = match (o.layout, kind_of(&entries[p].0)) {
                        (KeyTableLayout::IndexDecoupled, ValueKind::ValueHandle) => {
                            TablePart::Handles
                        }
                        _ => TablePart::Data,
                    };
                    assert_eq!(it.part(), Some(want));
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
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..TableBuilderOptions::default()
        };
        let (file, done) = build(&Vec::new(), o);
        assert_eq!(done.properties.num_entries, 0);
        let table = open(&file, None).unwrap();
        let mut it = table.iter(ReadCtx::default());
        assert!(scan_forward(&mut it).unwrap().is_empty());
        assert!(scan_backward(&mut it).unwrap().is_empty());
        let lookup = make_lookup_key(b"a", 9);
        assert_eq!(table.get(&lookup, ReadCtx::default()).unwrap(), None);
        assert_eq!(table.get_key(&lookup, ReadCtx::default()).unwrap(), None);
    }
}

#[test]
fn get_returns_newest_visible_version() {
    let handle = ValueHandle {
        file_number: 3,
        offset: 40,
        len: 9,
    }
    .encode();
    let entries: Entries = vec![
        (
            make_internal_key(b"k", 30, ValueKind::Value),
            b"v30".to_vec(),
        ),
        (
            make_internal_key(b"k", 25, ValueKind::ValueHandle),
            handle.clone(),
        ),
        (make_internal_key(b"k", 20, ValueKind::Deletion), vec![]),
        (
            make_internal_key(b"k", 10, ValueKind::Value),
            b"v10".to_vec(),
        ),
        (
            make_internal_key(b"k", 5, ValueKind::ValueHandle),
            handle.clone(),
        ),
    ];
    for layout in LAYOUTS {
        let (file, _) = build(
            &entries,
            TableBuilderOptions {
                layout,
                ..opts(1, Compression::None)
            },
        );
        let table = open(&file, None).unwrap();
        let ctx = ReadCtx::default();
        let get = |s| table.get(&make_lookup_key(b"k", s), ctx).unwrap();
        let get_key = |s| {
            table
                .get_key(&make_lookup_key(b"k", s), ctx)
                .unwrap()
                .map(|(_, e)| e)
        };
        assert_eq!(get(100), Some(entries[0].clone()));
        assert_eq!(get(30), Some(entries[0].clone()));
        assert_eq!(get_key(30), Some(KeyEntry::Inline { expiry: None }));
        assert_eq!(get(29), Some(entries[1].clone()));
        assert_eq!(get(25), Some(entries[1].clone()));
        assert_eq!(get_key(25), Some(KeyEntry::Handle(handle.clone())));
        assert_eq!(get(24), Some(entries[2].clone()));
        assert_eq!(get(20), Some(entries[2].clone()));
        assert_eq!(get_key(20), Some(KeyEntry::Deletion));
        assert_eq!(get(15), Some(entries[3].clone()));
        assert_eq!(get(7), Some(entries[4].clone()));
        assert_eq!(get_key(5), Some(KeyEntry::Handle(handle.clone())));
        assert_eq!(get(4), None);
        assert_eq!(get_key(4), None);
        assert!(
            matches!(table.get(b"short", ctx), Err(Error::InvalidArgument(_))),
            "lookup keys need a trailer"
        );
        assert!(matches!(
            table.get_key(b"short", ctx),
            Err(Error::InvalidArgument(_))
        ));
    }
}

#[test]
fn bloom_filter_skips_io_for_absent_keys() {
    let mut rng = StdRng::seed_from_u64(4);
    let entries = model(&mut rng, 2000, 20);
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..TableBuilderOptions::default()
        };
        let (file, _) = build(&entries, o);
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
        let mut false_positives = 0;
        for i in 0..1000 {
            let user = format!("user{:06}", 2 * i + 1);
            let lookup = make_lookup_key(user.as_bytes(), 5000);
            let before = stats.get(IoClass::UserRead).read_ops;
            assert!(table.get(&lookup, ctx).unwrap().is_none());
            assert!(table.get_key(&lookup, ctx).unwrap().is_none());
            let reads = stats.get(IoClass::UserRead).read_ops - before;
            if table.may_contain(user.as_bytes()) {
                false_positives += 1;
            } else {
                // Ruled out by the filter: no block read at all.
                assert_eq!(reads, 0, "{layout:?} {user}");
            }
        }
        assert!(false_positives < 30, "{false_positives} false positives");
        for (k, _) in &entries {
            assert!(table.may_contain(user_key(k)));
            if kind_of(k) != ValueKind::ValueHandle {
                assert!(table.may_contain_inline(user_key(k)));
            }
        }
    }
}

/// A read-ahead window turns a scan's one read per block into one read per window, and
/// returns the same entries both ways; the parts of an index-decoupled table share the window,
/// so its bytes are read once.
#[test]
fn readahead_reads_windows_not_blocks_and_yields_the_same_entries() {
    let mut rng = StdRng::seed_from_u64(15);
    let entries = model(&mut rng, 2000, 50);
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..opts(256, Compression::Lz4)
        };
        let (file, done) = build(&entries, o);
        let p = &done.properties;
        let blocks = p.num_data_blocks + p.num_handle_blocks;
        let block_bytes = p.data_bytes + p.handle_bytes;
        let ramps = [false, true].into_iter();
        for (readahead, ramp) in [0u64, 8 << 10, 64 << 10, 1 << 20]
            .into_iter()
            .flat_map(|r| ramps.clone().map(move |ramp| (r, ramp)))
        {
            let stats = Arc::new(IoStats::default());
            let table = Arc::new(
                Table::open(
                    file.reader_with_stats(stats.clone()),
                    "6.sst".into(),
                    6,
                    file.len(),
                    None,
                    IoClass::Other,
                )
                .unwrap(),
            );
            let ctx = ReadCtx {
                class: IoClass::CompactionRead,
                fill_cache: false,
                readahead,
                readahead_ramp: ramp,
            };
            let what = format!("{layout:?} readahead {readahead} ramp {ramp}");
            assert_eq!(
                scan_forward(&mut table.iter(ctx)).unwrap(),
                entries,
                "{what}"
            );
            let io = stats.get(IoClass::CompactionRead);
            if readahead == 0 {
                assert_eq!(io.read_ops, blocks, "{what}");
                assert_eq!(io.read_bytes, block_bytes, "{what}");
            } else {
                // Each window holds 32 or more of these 256-byte blocks; a block of the other
                // part that lags behind the window is read alone, so not every read is a
                // window, but reads must fall well below one per block.
                assert!(
                    io.read_ops * 4 <= blocks,
                    "{what}: {} reads for {blocks} blocks",
                    io.read_ops
                );
                if readahead >= block_bytes && !ramp {
                    assert!(io.read_ops <= 2, "{what}: one window holds every block");
                }

                assert!(
                    io.read_bytes <= 2 * block_bytes + readahead,
                    "{what}: {io:?}"
                );
            }
            assert_eq!(
                scan_backward(&mut table.iter(ctx)).unwrap(),
                entries,
                "{what} backward"
            );
            // The first entry alone: a ramping window starts at the block; a fixed one reads
            // `readahead` at once.
            let before = stats.get(IoClass::CompactionRead).read_bytes;
            let mut it = table.iter(ctx);
            it.seek_to_first().unwrap();
            assert_eq!(it.key(), entries[0].0.as_slice(), "{what}");
            let first = stats.get(IoClass::CompactionRead).read_bytes - before;
            if ramp || readahead == 0 {
                assert!(first < 2 << 10, "{what}: {first} bytes for one entry");
            } else {
                assert!(first >= readahead.min(block_bytes) / 2, "{what}: {first} bytes");
            }
        }
    }
}

#[test]
fn block_cache_is_used_and_fill_cache_respected() {
    let mut rng = StdRng::seed_from_u64(5);
    let entries = model(&mut rng, 2000, 50);
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..TableBuilderOptions::default()
        };
        let (file, done) = build(&entries, o);
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
            readahead: 0,
            readahead_ramp: false,
        };
        assert_eq!(scan_forward(&mut table.iter(no_fill)).unwrap(), entries);
        assert_eq!(cache.usage_bytes(), 0);
        let p = &done.properties;
        let blocks = p.num_data_blocks + p.num_handle_blocks;
        assert_eq!(stats.get(IoClass::CompactionRead).read_ops, blocks);
        assert_eq!(
            stats.get(IoClass::CompactionRead).read_bytes,
            p.data_bytes + p.handle_bytes
        );

        let fill = ReadCtx::new(IoClass::UserRead);
        scan_forward(&mut table.iter(fill)).unwrap();
        assert!(cache.usage_bytes() > 0);
        // Handle blocks went to the high-priority pool, data blocks to the low one.
        assert_eq!(
            cache.pool_usage_bytes(CachePriority::High) > 0,
            p.num_handle_blocks > 0
        );
        let hits = cache.hits();
        scan_forward(&mut table.iter(fill)).unwrap();
        assert_eq!(cache.hits() - hits, blocks);
        assert_eq!(
            cache.pool_hits(CachePriority::High),
            p.num_handle_blocks,
            "{layout:?}"
        );
        assert_eq!(stats.get(IoClass::UserRead).read_ops, blocks);
    }
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
    for layout in LAYOUTS {
        for c in [Compression::None, Compression::Lz4] {
            let o = TableBuilderOptions {
                layout,
                ..opts(128, c)
            };
            let (file, _) = build(&entries, o);
            let good = file.bytes();
            for i in 0..good.len() {
                for mask in [0x01u8, 0x80] {
                    let bad = MemFile::from_bytes(good.clone());
                    bad.flip(i, mask);
                    let what = format!("{layout:?} {c:?} byte {i} mask {mask:#x}");
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
}

/// Opens a damaged table and exercises it (point lookups of both kinds, scans both ways):
/// anything but a corruption error or correct data fails the test. Returns whether the damage
/// was detected.
pub(super) fn check_damaged(file: &MemFile, entries: &Entries, what: &str) -> bool {
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
        match table.get_key(&lookup, ctx) {
            Ok(got) => assert_eq!(got, expected_get_key(entries, &lookup), "{what}"),
            Err(e) => {
                corrupt(e);
                detected = true;
            }
        }
    }
    // Scans block by block and with a read-ahead window of a few blocks (a damaged block must
    // be caught whether it is read alone or cut from a window).
    for ctx in [
        ctx,
        ReadCtx {
            readahead: 300,
            readahead_ramp: false,
            ..ctx
        },
    ] {
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
        // Backward: a suffix of the model until an error.
        let mut n = entries.len();
        let mut r = it.seek_to_last();
        while r.is_ok() && it.valid() {
            n -= 1;
            assert_eq!(
                (it.key(), it.value()),
                (&entries[n].0[..], &entries[n].1[..]),
                "{what}"
            );
            r = it.prev();
        }
        match r {
            Ok(()) => assert_eq!(n, 0, "{what}"),
            Err(e) => {
                corrupt(e);
                detected = true;
            }
        }
    }
    detected
}

#[test]
fn damaged_data_and_handle_blocks_are_caught_by_their_crc() {
    let mut rng = StdRng::seed_from_u64(7);
    let entries = model(&mut rng, 60, 30);
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..opts(128, Compression::None)
        };
        let (file, done) = build(&entries, o);
        // Data and handle blocks come first in the file (interleaved in the decoupled layout).
        let block_bytes = (done.properties.data_bytes + done.properties.handle_bytes) as usize;
        for i in (0..block_bytes).step_by(7) {
            let bad = MemFile::from_bytes(file.bytes());
            bad.flip(i, 0x10);
            assert!(
                check_damaged(&bad, &entries, &format!("{layout:?} block byte {i}")),
                "{layout:?}: damage at block byte {i} went unnoticed"
            );
        }
    }
}

#[test]
fn truncated_files_are_corruption() {
    let mut rng = StdRng::seed_from_u64(8);
    let entries = model(&mut rng, 100, 30);
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..TableBuilderOptions::default()
        };
        let (file, _) = build(&entries, o);
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
}

#[test]
fn corruption_errors_name_file_and_block() {
    let mut rng = StdRng::seed_from_u64(9);
    let entries = model(&mut rng, 100, 30);
    for (layout, part) in [
        (KeyTableLayout::Mixed, TablePart::Data),
        (KeyTableLayout::IndexDecoupled, TablePart::Data),
        (KeyTableLayout::IndexDecoupled, TablePart::Handles),
    ] {
        let o = TableBuilderOptions {
            layout,
            ..opts(256, Compression::None)
        };
        let (file, _) = build(&entries, o);
        let table = open(&file, None).unwrap();
        // Find the part's second block's offset through its index.
        let mut index = BlockIter::internal(table.part_index(part).unwrap().clone());
        index.seek_to_first().unwrap();
        index.next().unwrap();
        let h = BlockHandle::decode(index.value()).unwrap();
        file.flip(h.offset as usize + 3, 0x20);
        let table = open(&file, None).unwrap();
        let err = scan_forward(&mut table.iter(ReadCtx::default())).unwrap_err();
        match err {
            Error::Corruption {
                file,
                offset,
                detail,
            } => {
                assert_eq!((file.as_str(), offset), ("000012.sst", h.offset));
                assert!(detail.starts_with(part.name()), "{detail}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn unknown_version_is_named() {
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..TableBuilderOptions::default()
        };
        let (file, _) = build(&Vec::new(), o);
        let at = file.len() as usize - 16;
        // Version 7: unknown to this build, whatever the layout was.
        file.flip(at, layout.format_version() as u8 ^ 7);
        let err = open(&file, None).unwrap_err();
        assert!(err.is_corruption());
        let err = err.to_string();
        assert!(err.contains("version 7"), "{err}");
    }
}

#[test]
fn table_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    fn assert_send<T: Send>() {}
    assert_send::<TableIter>();
}

/// A table of `entries` and range tombstones `(start, end, seq)`.
fn build_with_tombstones(
    entries: &Entries,
    tombstones: &[(&str, &str, u64)],
    opts: TableBuilderOptions,
) -> (MemFile, FinishedTable) {
    let file = MemFile::default();
    let mut b = TableBuilder::new(Box::new(file.writer()), opts).unwrap();
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    for (s, e, seq) in tombstones {
        b.add_range_tombstone(s.as_bytes(), e.as_bytes(), *seq)
            .unwrap();
    }
    let done = b.finish().unwrap();
    (file, done)
}

#[test]
fn range_tombstones_round_trip_in_both_layouts_and_only_when_present() {
    let entries: Entries = vec![
        (make_internal_key(b"b", 3, ValueKind::Value), b"v".to_vec()),
        (make_internal_key(b"m", 9, ValueKind::Value), b"w".to_vec()),
    ];
    for layout in LAYOUTS {
        let o = TableBuilderOptions {
            layout,
            ..opts(4096, Compression::None)
        };
        // Without tombstones, nothing changes: the bytes are those of a plain build.
        let (plain, _) = build(&entries, o);
        let (none, _) = build_with_tombstones(&entries, &[], o);
        assert_eq!(plain.bytes(), none.bytes());
        assert!(open(&plain, None).unwrap().range_tombstones().is_none());
        // Added out of order, overlapping; one duplicate.
        let ts = [("k", "z", 12), ("a", "d", 5), ("c", "n", 20), ("a", "d", 5)];
        let (file, done) = build_with_tombstones(&entries, &ts, o);
        assert_eq!(done.properties.range_deletions, 3);
        assert_eq!(
            (done.properties.smallest_seq, done.properties.largest_seq),
            (3, 20),
            "the tombstones' sequence numbers count in the table's range"
        );
        let table = open(&file, None).unwrap();
        assert_eq!(table.properties().range_deletions, 3);
        let f = table.range_tombstones().expect("tombstones");
        assert_eq!(f.newest_covering(b"c", u64::MAX), Some(20));
        assert_eq!(f.newest_covering(b"b", 10), Some(5));
        assert_eq!(f.newest_covering(b"y", u64::MAX), Some(12));
        assert_eq!(f.newest_covering(b"z", u64::MAX), None);
        // The point entries read as before.
        let got = table
            .get(&make_lookup_key(b"m", 100), ReadCtx::new(IoClass::Other))
            .unwrap()
            .map(|(_, v)| v);
        assert_eq!(got, Some(b"w".to_vec()));
    }
    // A table of tombstones alone.
    let (file, done) = build_with_tombstones(&Vec::new(), &[("a", "b", 7)], opts(4096, Compression::Lz4));
    assert_eq!((done.properties.num_entries, done.properties.range_deletions), (0, 1));
    let table = open(&file, None).unwrap();
    assert_eq!(
        table.range_tombstones().unwrap().newest_covering(b"a", 7),
        Some(7)
    );
}

#[test]
fn bad_range_tombstones_are_refused_by_the_builder() {
    let file = MemFile::default();
    let mut b = TableBuilder::new(Box::new(file.writer()), opts(4096, Compression::None)).unwrap();
    assert!(b.add_range_tombstone(b"b", b"a", 1).is_err(), "reversed");
    assert!(b.add_range_tombstone(b"a", b"a", 1).is_err(), "empty");
    assert!(b.add_range_tombstone(b"a", &vec![b'z'; 65537], 1).is_err(), "long end");
    assert!(b.add_range_tombstone(b"a", b"b", 1 << 56).is_err(), "sequence");
    // Two different ranges at one start and sequence number cannot both be keys of the block.
    b.add_range_tombstone(b"a", b"b", 1).unwrap();
    b.add_range_tombstone(b"a", b"c", 1).unwrap();
    assert!(b.finish().is_err());
}

#[test]
fn a_damaged_range_deletion_block_is_corruption() {
    let (file, done) = build_with_tombstones(
        &Vec::new(),
        &[("a", "c", 4), ("b", "d", 6)],
        opts(4096, Compression::None),
    );
    let h = done.properties.range_del_block.expect("block");
    // Every byte of the block's stored contents and trailer.
    for at in h.offset..h.offset + h.size + 5 {
        let damaged = MemFile::from_bytes(file.bytes());
        damaged.flip(at as usize, 0x40);
        let err = open(&damaged, None).expect_err("damage");
        assert!(matches!(err, Error::Corruption { .. }), "byte {at}: {err}");
    }
}

/// A table the manifest says holds range tombstones but which holds none is corruption, never
/// a table read without them (its deleted keys would come back).
#[test]
fn tombstones_the_manifest_records_but_the_table_lacks_are_corruption() {
    let mut rng = StdRng::seed_from_u64(25);
    let entries = model(&mut rng, 20, 50);
    let (file, done) = build(&entries, TableBuilderOptions::default());
    let table = open(&file, None).expect("open");
    let meta = crate::version::FileMetaData::new(crate::version::TableMeta {
        number: 12,
        file_size: done.file_size,
        smallest: done.properties.smallest_key.clone(),
        largest: done.properties.largest_key.clone(),
        smallest_seq: done.properties.smallest_seq,
        largest_seq: done.properties.largest_seq,
        num_entries: done.properties.num_entries,
        num_deletions: done.properties.num_deletions,
        dependence: Vec::new(),
        aliases: 0,
        range_deletions: 1,
    });
    let err = crate::version::recorded_tombstones(&meta, &table).expect_err("none");
    assert!(err.is_corruption(), "{err}");
}

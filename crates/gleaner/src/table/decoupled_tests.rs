//! Tests specific to the index-decoupled layout: what a lookup reads (proved with the I/O
//! counters), the high-priority caching of handle blocks, tables with one empty part, and
//! damage to the handle part that checksums cannot catch.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::block_io::write_block;
use super::test_util::MemFile;
use super::tests::{
    Entries, build, check_damaged, expected_get, expected_get_key, model, open, scan_backward,
    scan_forward,
};
use super::*;
use crate::cache::{BlockCache, CachePriority};
use crate::io::{IoClass, IoCounters, IoStats};
use crate::iter::InternalIterator;
use crate::key::{ValueKind, compare_internal, make_internal_key, make_lookup_key, user_key};
use crate::value::ValueHandle;

fn decoupled(block_size: usize) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size,
        compression: Compression::None,
        layout: KeyTableLayout::IndexDecoupled,
        ..TableBuilderOptions::default()
    }
}

fn handle_value(i: u64) -> Vec<u8> {
    ValueHandle {
        file_number: 9,
        offset: i * 1000,
        len: 900,
    }
    .encode()
}

/// Keys `h{i}` have only handle versions, `i{i}` only inline ones, `b{i}` both (a newer inline
/// version over an older handle), `d{i}` a tombstone over a handle.
fn gc_model(n: u64) -> Entries {
    let mut out = Vec::new();
    for i in 0..n {
        let k = |p: &str| format!("{p}{i:05}").into_bytes();
        out.push((
            make_internal_key(&k("h"), 100 + i, ValueKind::ValueHandle),
            handle_value(i),
        ));
        out.push((
            make_internal_key(&k("h"), 50 + i, ValueKind::ValueHandle),
            handle_value(i + n),
        ));
        out.push((
            make_internal_key(&k("i"), 100 + i, ValueKind::Value),
            format!("inline value {i} ").repeat(20).into_bytes(),
        ));
        out.push((
            make_internal_key(&k("b"), 100 + i, ValueKind::Value),
            b"new small value".to_vec(),
        ));
        out.push((
            make_internal_key(&k("b"), 60 + i, ValueKind::ValueHandle),
            handle_value(i + 2 * n),
        ));
        out.push((
            make_internal_key(&k("d"), 100 + i, ValueKind::Deletion),
            vec![],
        ));
        out.push((
            make_internal_key(&k("d"), 70 + i, ValueKind::ValueHandle),
            handle_value(i + 3 * n),
        ));
    }
    out.sort_by(|a, b| compare_internal(&a.0, &b.0));
    out
}

/// A table over a counting reader.
fn open_counted(file: &MemFile, cache: Option<Arc<BlockCache>>) -> (Arc<Table>, Arc<IoStats>) {
    let stats = Arc::new(IoStats::default());
    let table = Table::open(
        file.reader_with_stats(stats.clone()),
        "000033.sst".into(),
        33,
        file.len(),
        cache,
        IoClass::Other,
    )
    .unwrap();
    (Arc::new(table), stats)
}

/// The on-disk size (trailer included) of the block of `part` a lookup for `lookup` lands on.
fn landing_block(table: &Table, part: TablePart, lookup: &[u8]) -> Option<u64> {
    let mut index = BlockIter::internal(table.part_index(part)?.clone());
    index.seek(lookup).unwrap();
    index
        .valid()
        .then(|| BlockHandle::decode(index.value()).unwrap().size + 5)
}

fn delta(stats: &IoStats, before: IoCounters) -> (u64, u64) {
    let now = stats.get(IoClass::GcLookup);
    (
        now.read_ops - before.read_ops,
        now.read_bytes - before.read_bytes,
    )
}

const GC: ReadCtx = ReadCtx {
    class: IoClass::GcLookup,
    fill_cache: true,
    readahead: 0,
    readahead_ramp: false,
};

#[test]
fn get_key_on_a_handle_only_key_reads_only_its_handle_block() {
    let entries = gc_model(400);
    let (file, done) = build(&entries, decoupled(512));
    assert!(done.properties.num_handle_blocks > 10);
    for cached in [false, true] {
        let cache = cached.then(|| Arc::new(BlockCache::new(4 << 20)));
        let (table, stats) = open_counted(&file, cache.clone());
        let mut checked = 0;
        let mut inline_false_positives = 0;
        for i in 0..400u64 {
            let key = format!("h{i:05}");
            if table.may_contain_inline(key.as_bytes()) {
                inline_false_positives += 1;
                continue;
            }
            let lookup = make_lookup_key(key.as_bytes(), 1000);
            let handle_block = landing_block(&table, TablePart::Handles, &lookup).unwrap();
            let before = stats.get(IoClass::GcLookup);
            let got = table.get_key(&lookup, GC).unwrap();
            assert_eq!(got, expected_get_key(&entries, &lookup));
            assert_eq!(got.unwrap().1, KeyEntry::Handle(handle_value(i)));
            let (ops, bytes) = delta(&stats, before);
            if cached && checked > 0 && ops == 0 {
                // Its handle block was cached by an earlier lookup in the same block.
                assert_eq!(bytes, 0);
            } else {
                // Exactly the handle block: no data block, nothing else.
                assert_eq!((ops, bytes), (1, handle_block), "{key}");
            }
            // Asked again, a cached table reads nothing at all.
            let before = stats.get(IoClass::GcLookup);
            table.get_key(&lookup, GC).unwrap();
            let again = delta(&stats, before);
            if cached {
                assert_eq!(again, (0, 0), "{key}");
            } else {
                assert_eq!(again, (1, handle_block), "{key}");
            }
            checked += 1;
        }
        assert!(inline_false_positives < 20, "{inline_false_positives}");
        if let Some(cache) = cache {
            // Every block GC lookups read went to the high-priority pool.
            assert_eq!(cache.pool_usage_bytes(CachePriority::Low), 0);
            assert!(cache.pool_hits(CachePriority::High) >= checked);
        }
        // `get` of such a key does not read a data block either.
        let lookup = make_lookup_key(b"h00007", 1000);
        if !table.may_contain_inline(b"h00007") {
            let handle_block = landing_block(&table, TablePart::Handles, &lookup).unwrap();
            let before = stats.get(IoClass::GcLookup);
            let got = table
                .get(
                    &lookup,
                    ReadCtx {
                        fill_cache: false,
                        ..GC
                    },
                )
                .unwrap();
            assert_eq!(got, expected_get(&entries, &lookup));
            let (ops, bytes) = delta(&stats, before);
            assert!(
                ops <= 1 && (ops == 0 || bytes == handle_block),
                "{ops} {bytes}"
            );
        }
    }
}

#[test]
fn get_key_on_an_inline_key_reads_its_data_block() {
    let entries = gc_model(400);
    let (file, _) = build(&entries, decoupled(512));
    for (i, prefix, want) in [
        (3u64, "i", KeyEntry::Inline { expiry: None }),
        (5, "b", KeyEntry::Inline { expiry: None }),
        (8, "d", KeyEntry::Deletion),
    ] {
        // A cold cache for each key, so what is read is exactly what this lookup needs.
        let cache = Arc::new(BlockCache::new(4 << 20));
        let (table, stats) = open_counted(&file, Some(cache.clone()));
        let key = format!("{prefix}{i:05}");
        let lookup = make_lookup_key(key.as_bytes(), 1000);
        let data_block = landing_block(&table, TablePart::Data, &lookup).unwrap();
        let handle_block = landing_block(&table, TablePart::Handles, &lookup);
        let before = stats.get(IoClass::GcLookup);
        let got = table.get_key(&lookup, GC).unwrap();
        assert_eq!(got, expected_get_key(&entries, &lookup));
        assert_eq!(got.unwrap().1, want);
        let (ops, bytes) = delta(&stats, before);
        // The data block is read (the inline probe admits the key); the handle part is
        // consulted too, since an older or newer handle may be there.
        assert!(ops >= 1, "{key}");
        assert!(
            bytes == data_block || handle_block.is_some_and(|h| bytes == data_block + h),
            "{key}: read {bytes} bytes, data block {data_block}, handle block {handle_block:?}"
        );
        assert!(cache.pool_usage_bytes(CachePriority::Low) > 0);
    }
    // Below the inline version of b00005, the handle is the answer.
    let (table, _) = open_counted(&file, None);
    let lookup = make_lookup_key(b"b00005", 99);
    assert_eq!(
        table.get_key(&lookup, GC).unwrap().unwrap().1,
        KeyEntry::Handle(handle_value(5 + 800))
    );
}

#[test]
fn mixed_layout_get_key_reads_the_data_block() {
    let entries = gc_model(400);
    let (file, _) = build(
        &entries,
        TableBuilderOptions {
            layout: KeyTableLayout::Mixed,
            ..decoupled(512)
        },
    );
    let (table, stats) = open_counted(&file, None);
    let lookup = make_lookup_key(b"h00042", 1000);
    let data_block = landing_block(&table, TablePart::Data, &lookup).unwrap();
    assert!(landing_block(&table, TablePart::Handles, &lookup).is_none());
    let before = stats.get(IoClass::GcLookup);
    let got = table.get_key(&lookup, GC).unwrap();
    assert_eq!(got, expected_get_key(&entries, &lookup));
    assert_eq!(delta(&stats, before), (1, data_block));
    assert!(table.may_contain_inline(b"h00042"));
}

#[test]
fn keys_ruled_out_by_the_filter_cost_no_read() {
    let entries = gc_model(400);
    let (file, _) = build(&entries, decoupled(512));
    let (table, stats) = open_counted(&file, None);
    let mut ruled_out = 0;
    for i in 0..1000 {
        let key = format!("x{i:05}");
        if table.may_contain(key.as_bytes()) {
            continue;
        }
        ruled_out += 1;
        let lookup = make_lookup_key(key.as_bytes(), 1000);
        let before = stats.get(IoClass::GcLookup);
        assert_eq!(table.get_key(&lookup, GC).unwrap(), None);
        assert_eq!(table.get(&lookup, GC).unwrap(), None);
        assert_eq!(delta(&stats, before), (0, 0), "{key}");
    }
    assert!(ruled_out > 970, "{ruled_out}");
}

#[test]
fn handle_blocks_stay_cached_while_scans_flood_the_cache() {
    let entries = gc_model(2000);
    let (file, done) = build(&entries, decoupled(512));
    let p = &done.properties;
    // Room for every handle block in the high pool (half the capacity), but far less than the
    // data blocks.
    let capacity = (p.handle_bytes * 5 / 2) as usize;
    assert!(
        p.data_bytes > capacity as u64,
        "{} {}",
        p.data_bytes,
        p.handle_bytes
    );
    let cache = Arc::new(BlockCache::new(capacity));
    let (table, stats) = open_counted(&file, Some(cache.clone()));
    let lookups: Vec<Vec<u8>> = (0..2000)
        .map(|i| make_lookup_key(format!("h{i:05}").as_bytes(), 1 << 20))
        .collect();
    for l in &lookups {
        table.get_key(l, GC).unwrap();
    }
    // User scans fill the cache with data blocks, several times over.
    for _ in 0..3 {
        assert_eq!(
            scan_forward(&mut table.iter(ReadCtx::new(IoClass::UserRead))).unwrap(),
            entries
        );
    }
    assert!(cache.pool_usage_bytes(CachePriority::Low) > 0);
    // GC lookups of handle-only keys now read nothing, except through inline-probe false
    // positives (which read a data block).
    let before = stats.get(IoClass::GcLookup);
    let mut false_positives = 0;
    for (i, l) in lookups.iter().enumerate() {
        false_positives += u64::from(table.may_contain_inline(user_key(l)));
        assert_eq!(
            table.get_key(l, GC).unwrap().unwrap().1,
            KeyEntry::Handle(handle_value(i as u64))
        );
    }
    let (ops, _) = delta(&stats, before);
    assert!(
        ops <= false_positives,
        "{ops} reads, {false_positives} false positives"
    );
}

#[test]
fn tables_with_one_empty_part() {
    let only_handles: Entries = (0..300u64)
        .map(|i| {
            (
                make_internal_key(format!("k{i:04}").as_bytes(), 5, ValueKind::ValueHandle),
                handle_value(i),
            )
        })
        .collect();
    let only_inline: Entries = (0..300u64)
        .map(|i| {
            (
                make_internal_key(format!("k{i:04}").as_bytes(), 5, ValueKind::Value),
                vec![b'v'; i as usize % 50],
            )
        })
        .collect();
    for entries in [only_handles, only_inline] {
        let (file, done) = build(&entries, decoupled(256));
        let p = &done.properties;
        assert!((p.num_data_blocks == 0) != (p.num_handle_blocks == 0));
        let table = open(&file, None).unwrap();
        let ctx = ReadCtx::default();
        assert_eq!(scan_forward(&mut table.iter(ctx)).unwrap(), entries);
        assert_eq!(scan_backward(&mut table.iter(ctx)).unwrap(), entries);
        for (k, _) in entries.iter().step_by(7) {
            let lookup = make_lookup_key(user_key(k), 9);
            assert_eq!(
                table.get(&lookup, ctx).unwrap(),
                expected_get(&entries, &lookup)
            );
            assert_eq!(
                table.get_key(&lookup, ctx).unwrap(),
                expected_get_key(&entries, &lookup)
            );
        }
    }
}

/// Keys with many versions of every kind (as snapshots keep them), in both layouts, with tiny
/// blocks so the versions of one key span blocks of both parts.
#[test]
fn many_versions_per_key_match_the_model() {
    let mut rng = StdRng::seed_from_u64(21);
    let mut entries = Entries::new();
    for i in 0..150u64 {
        let user = format!("key{i:04}");
        let mut seq = 10_000;
        for _ in 0..rng.random_range(1..=12) {
            seq -= rng.random_range(1..100);
            let kind = match rng.random_range(0..4) {
                0 => ValueKind::Deletion,
                1 => ValueKind::ValueHandle,
                2 => ValueKind::ValueWithExpiry,
                _ => ValueKind::Value,
            };
            let value = match kind {
                ValueKind::Deletion => vec![],
                ValueKind::ValueHandle => handle_value(seq),
                ValueKind::ValueWithExpiry => {
                    let mut v = Vec::new();
                    crate::expiry::encode_inline(&mut v, seq, user.as_bytes());
                    v
                }
                ValueKind::Value => format!("{user}@{seq}").into_bytes(),
            };
            entries.push((make_internal_key(user.as_bytes(), seq, kind), value));
        }
    }
    entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
    for layout in super::tests::LAYOUTS {
        for block_size in [1, 64, 4096] {
            let o = TableBuilderOptions {
                layout,
                restart_interval: 3,
                ..decoupled(block_size)
            };
            let (file, _) = build(&entries, o);
            let table = open(&file, Some(Arc::new(BlockCache::new(1 << 20)))).unwrap();
            let ctx = ReadCtx::default();
            for (k, _) in &entries {
                for seq in [crate::key::seq_of(k), crate::key::seq_of(k) - 1] {
                    let lookup = make_lookup_key(user_key(k), seq);
                    assert_eq!(
                        table.get(&lookup, ctx).unwrap(),
                        expected_get(&entries, &lookup)
                    );
                    assert_eq!(
                        table.get_key(&lookup, ctx).unwrap(),
                        expected_get_key(&entries, &lookup)
                    );
                }
            }
            let mut it = table.iter(ctx);
            assert_eq!(scan_forward(&mut it).unwrap(), entries);
            assert_eq!(scan_backward(&mut it).unwrap(), entries);
            // Walk forward and back from every seek target in turn.
            for (n, (k, _)) in entries.iter().enumerate().step_by(5) {
                it.seek(k).unwrap();
                assert_eq!(it.key(), &k[..]);
                it.prev().unwrap();
                if n == 0 {
                    assert!(!it.valid());
                    continue;
                }
                assert_eq!(it.key(), &entries[n - 1].0[..]);
                it.next().unwrap();
                it.next().unwrap();
                match entries.get(n + 1) {
                    Some((next, _)) => assert_eq!(it.key(), &next[..]),
                    None => assert!(!it.valid()),
                }
                it.seek_for_prev(k).unwrap();
                assert_eq!(it.key(), &k[..]);
                assert_eq!(it.part().is_some(), it.valid());
            }
        }
    }
}

#[test]
fn flipped_handle_part_bytes_are_corruption() {
    let mut rng = StdRng::seed_from_u64(22);
    let entries = model(&mut rng, 200, 30);
    let (file, done) = build(&entries, decoupled(128));
    let table = open(&file, None).unwrap();
    // Every byte of every handle block, and of the handle index block.
    let mut regions = Vec::new();
    let mut index = BlockIter::internal(table.part_index(TablePart::Handles).unwrap().clone());
    index.seek_to_first().unwrap();
    while index.valid() {
        let h = BlockHandle::decode(index.value()).unwrap();
        regions.push((h.offset, h.size + 5));
        index.next().unwrap();
    }
    assert_eq!(regions.len() as u64, done.properties.num_handle_blocks);
    let handle_index = table.part_index(TablePart::Handles).unwrap().offset();
    regions.push((handle_index, done.properties.handle_index_bytes));
    for (offset, len) in regions {
        for i in (offset..offset + len).step_by(3) {
            let bad = MemFile::from_bytes(file.bytes());
            bad.flip(i as usize, 0x04);
            assert!(
                check_damaged(&bad, &entries, &format!("byte {i}")),
                "damage at byte {i} went unnoticed"
            );
        }
    }
}

/// Writes an index-decoupled table from explicit blocks, letting a test tamper with the handle
/// index entries (given the data blocks' handles) before they are written; no filter. Every
/// checksum is valid, so only the reader's structural checks can catch the tampering.
fn assemble(
    data_blocks: &[Entries],
    handle_blocks: &[Entries],
    tamper: impl FnOnce(&mut Entries, &[BlockHandle]),
) -> MemFile {
    fn write_part(
        w: &mut dyn crate::io::WritableFile,
        off: &mut u64,
        blocks: &[Entries],
    ) -> (Entries, Vec<BlockHandle>) {
        let mut index = Entries::new();
        let mut handles = Vec::new();
        for block in blocks {
            let mut b = BlockBuilder::new(4);
            for (k, v) in block {
                b.add(k, v);
            }
            let h = write_block(w, off, b.finish(), Compression::None, &mut Vec::new()).unwrap();
            let mut enc = Vec::new();
            h.encode_to(&mut enc);
            index.push((block.last().unwrap().0.clone(), enc));
            handles.push(h);
        }
        (index, handles)
    }
    fn write_index(w: &mut dyn crate::io::WritableFile, off: &mut u64, e: &Entries) -> BlockHandle {
        let mut b = BlockBuilder::new(1);
        for (k, v) in e {
            b.add(k, v);
        }
        write_block(w, off, b.finish(), Compression::None, &mut Vec::new()).unwrap()
    }
    let file = MemFile::default();
    let mut w = file.writer();
    let mut off = 0;
    let (data_index, data_handles) = write_part(&mut w, &mut off, data_blocks);
    let (mut handle_index, _) = write_part(&mut w, &mut off, handle_blocks);
    tamper(&mut handle_index, &data_handles);
    let index = write_index(&mut w, &mut off, &data_index);
    let handle_index = write_index(&mut w, &mut off, &handle_index);
    let mut all: Entries = data_blocks
        .iter()
        .chain(handle_blocks)
        .flatten()
        .cloned()
        .collect();
    all.sort_by(|a, b| compare_internal(&a.0, &b.0));
    let props = TableProperties {
        num_entries: all.len() as u64,
        smallest_key: all.first().unwrap().0.clone(),
        largest_key: all.last().unwrap().0.clone(),
        compression: "none".into(),
        format_version: FORMAT_VERSION_INDEX_DECOUPLED,
        ..TableProperties::default()
    };
    let mut b = BlockBuilder::new(1);
    props.encode_to(&mut b);
    let properties = write_block(
        &mut w,
        &mut off,
        b.finish(),
        Compression::None,
        &mut Vec::new(),
    )
    .unwrap();
    let footer = Footer {
        index,
        handle_index: Some(handle_index),
        filter: None,
        properties,
        format_version: FORMAT_VERSION_INDEX_DECOUPLED,
    };
    crate::io::WritableFile::append(&mut w, &footer.encode()).unwrap();
    file
}

fn hand_made_parts() -> (Vec<Entries>, Vec<Entries>) {
    let inline = |k: &str, s| {
        (
            make_internal_key(k.as_bytes(), s, ValueKind::Value),
            b"v".to_vec(),
        )
    };
    let handle = |k: &str, s| {
        (
            make_internal_key(k.as_bytes(), s, ValueKind::ValueHandle),
            handle_value(s),
        )
    };
    (
        vec![vec![inline("a", 9), inline("c", 9)], vec![inline("e", 9)]],
        vec![vec![handle("b", 8), handle("c", 8)], vec![handle("d", 8)]],
    )
}

/// Lookups of `keys` and full scans of a tampered table: corruption errors only, never an
/// answer.
fn assert_corrupt_everywhere(file: &MemFile, keys: &[&str]) {
    let table = open(file, None).unwrap();
    let ctx = ReadCtx::default();
    for k in keys {
        let lookup = make_lookup_key(k.as_bytes(), 100);
        match table.get_key(&lookup, ctx) {
            Err(e) => assert!(e.is_corruption(), "{k}: {e}"),
            Ok(got) => panic!("{k}: tampered table answered {got:?}"),
        }
        assert!(table.get(&lookup, ctx).unwrap_err().is_corruption());
    }
    assert!(
        scan_forward(&mut table.iter(ctx))
            .unwrap_err()
            .is_corruption()
    );
    assert!(
        scan_backward(&mut table.iter(ctx))
            .unwrap_err()
            .is_corruption()
    );
}

#[test]
fn hand_assembled_table_reads_back() {
    let (data, handles) = hand_made_parts();
    let file = assemble(&data, &handles, |_, _| {});
    let table = open(&file, None).unwrap();
    let mut all: Entries = data.iter().chain(&handles).flatten().cloned().collect();
    all.sort_by(|a, b| compare_internal(&a.0, &b.0));
    assert_eq!(
        scan_forward(&mut table.iter(ReadCtx::default())).unwrap(),
        all
    );
    assert_eq!(
        table
            .get_key(&make_lookup_key(b"c", 100), ReadCtx::default())
            .unwrap()
            .unwrap()
            .1,
        KeyEntry::Inline { expiry: None }
    );
    assert_eq!(
        table
            .get_key(&make_lookup_key(b"c", 8), ReadCtx::default())
            .unwrap()
            .unwrap()
            .1,
        KeyEntry::Handle(handle_value(8))
    );
}

#[test]
fn handle_index_leading_to_a_data_block_is_corruption() {
    let (data, handles) = hand_made_parts();
    // The handle index's entries point at the data blocks instead.
    let file = assemble(&data, &handles, |index, data_handles| {
        for ((_, v), h) in index.iter_mut().zip(data_handles) {
            v.clear();
            h.encode_to(v);
        }
    });
    // Lookups the handle index sends to a data block ("e" sorts after every handle index key).
    assert_corrupt_everywhere(&file, &["a", "c"]);
}

#[test]
fn malformed_handle_index_entries_are_corruption() {
    let (data, handles) = hand_made_parts();
    // Not a block handle at all.
    let file = assemble(&data, &handles, |index, _| {
        for (_, v) in index.iter_mut() {
            *v = b"not a handle".to_vec();
        }
    });
    assert_corrupt_everywhere(&file, &["b", "d"]);
    // A handle reaching past the block area.
    let file = assemble(&data, &handles, |index, _| {
        for (_, v) in index.iter_mut() {
            v.clear();
            BlockHandle {
                offset: 1 << 30,
                size: 10,
            }
            .encode_to(v);
        }
    });
    assert_corrupt_everywhere(&file, &["b", "d"]);
}

#[test]
fn entries_in_the_wrong_part_are_corruption() {
    let (mut data, handles) = hand_made_parts();
    // A value handle inside a data block.
    data[1].push((
        make_internal_key(b"f", 3, ValueKind::ValueHandle),
        handle_value(3),
    ));
    let file = assemble(&data, &handles, |_, _| {});
    let table = open(&file, None).unwrap();
    let err = table
        .get_key(&make_lookup_key(b"f", 100), ReadCtx::default())
        .unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(
        scan_forward(&mut table.iter(ReadCtx::default()))
            .unwrap_err()
            .is_corruption()
    );
    // Other keys still read correctly (the damage is local to one block).
    assert_eq!(
        table
            .get_key(&make_lookup_key(b"b", 100), ReadCtx::default())
            .unwrap()
            .unwrap()
            .1,
        KeyEntry::Handle(handle_value(8))
    );
}

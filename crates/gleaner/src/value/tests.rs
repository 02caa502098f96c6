//! Whole-table tests: build, open, read, find, walk; empty tables; damage of every kind.

use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::io::{
    CountedReader, FaultFs, FaultKind, FaultOp, FaultRule, FileSystem, IoClass, IoStats,
    ReadFileOptions, WritableFile, WriteFileOptions,
};
use crate::key::MAX_SEQUENCE;
use crate::options::MAX_KEY_SIZE;
use crate::table::test_util::MemFile;
use crate::table::{BlockBuilder, Compression, block_io::write_block};
use format::{FOOTER_LEN, Footer};
use index::DenseIndexBuilder;
use record::{encode_record, encoded_record_len};

const NAME: &str = "000007.vst";

/// One record of a model table and where the builder put it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    key: Vec<u8>,
    seq: u64,
    value: Vec<u8>,
    offset: u64,
    len: u64,
    /// The version's expiry (format 2), if it has one.
    expiry: Option<u64>,
}

/// Records in internal-key order: several versions of some keys, empty values, an empty key,
/// a key of the maximum size, and (when `big`) a 1 MiB value.
fn model(rng: &mut StdRng, n_keys: usize, big: bool) -> Vec<Rec> {
    let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
    keys.extend((0..n_keys).map(|i| format!("k{i:05}").into_bytes()));
    keys.push(vec![0xff; MAX_KEY_SIZE]);
    let big_at = n_keys / 2;
    let mut out = Vec::new();
    for (i, key) in keys.into_iter().enumerate() {
        let versions = if rng.random_bool(0.3) {
            rng.random_range(2..5)
        } else {
            1
        };
        let mut seqs: Vec<u64> = (0..versions)
            .map(|_| rng.random_range(1..1_000_000))
            .collect();
        seqs.sort_unstable_by(|a, b| b.cmp(a));
        seqs.dedup();
        for (j, seq) in seqs.into_iter().enumerate() {
            let len = if big && i == big_at && j == 0 {
                1 << 20
            } else if rng.random_bool(0.1) {
                0
            } else {
                rng.random_range(1..300)
            };
            let value = (0..len).map(|j| (j as u64 ^ seq) as u8).collect();
            out.push(Rec {
                key: key.clone(),
                seq,
                value,
                offset: 0,
                len: 0,
                expiry: None,
            });
        }
    }
    out
}

/// Builds the table of `recs` into `file`, filling in each record's location.
fn build(
    file: Box<dyn WritableFile>,
    recs: &mut [Rec],
    opts: ValueTableBuilderOptions,
) -> FinishedValueTable {
    let mut b = ValueTableBuilder::new(file, opts).unwrap();
    for r in recs.iter_mut() {
        let (offset, len) = b.add_expiring(&r.key, r.seq, &r.value, r.expiry).unwrap();
        assert_eq!(len, encoded_record_len(r.key.len(), r.value.len()));
        (r.offset, r.len) = (offset, len);
    }
    assert_eq!(b.num_records(), recs.len() as u64);
    b.finish().unwrap()
}

fn build_mem(recs: &mut [Rec], opts: ValueTableBuilderOptions) -> (MemFile, FinishedValueTable) {
    let file = MemFile::default();
    let done = build(Box::new(file.writer()), recs, opts);
    assert_eq!(done.file_size, file.len());
    (file, done)
}

fn open_mem(file: &MemFile, cache: Option<Arc<BlockCache>>) -> Result<Arc<ValueTable>> {
    let size = file.len();
    ValueTable::open(file.reader(), NAME.into(), 7, size, cache, IoClass::Other).map(Arc::new)
}

fn small_opts(compression: Compression) -> ValueTableBuilderOptions {
    ValueTableBuilderOptions {
        index_block_size: 64,
        compression,
        class: 3,
    }
}

/// Checks every way of reading `t` against the model.
fn check_table(t: &Arc<ValueTable>, recs: &[Rec]) {
    for r in recs {
        let got = t.read_record(r.offset, r.len, IoClass::UserRead).unwrap();
        assert_eq!((&got.key, got.seq), (&r.key, r.seq));
        assert!(got.value == r.value, "value of {:?}@{}", r.key, r.seq);
        assert_eq!(
            t.find(&r.key, r.seq, IoClass::UserRead, true).unwrap(),
            Some((r.offset, r.len))
        );
    }
    // Absent: other sequence numbers of present keys, and other keys.
    let present = |k: &[u8], s: u64| recs.iter().any(|r| r.key == k && r.seq == s);
    for r in recs {
        for s in [r.seq + 1, r.seq - 1, 0, MAX_SEQUENCE] {
            if !present(&r.key, s) {
                assert_eq!(t.find(&r.key, s, IoClass::UserRead, true).unwrap(), None);
            }
        }
        let mut other = r.key.clone();
        if other.len() < MAX_KEY_SIZE {
            other.push(0);
            assert_eq!(
                t.find(&other, r.seq, IoClass::UserRead, false).unwrap(),
                None
            );
        }
    }
    // The whole dense index, in order.
    let walked: Vec<IndexEntry> = t.index_iter(IoClass::GcRead).map(|e| e.unwrap()).collect();
    let want: Vec<IndexEntry> = recs
        .iter()
        .map(|r| IndexEntry {
            user_key: r.key.clone(),
            seq: r.seq,
            offset: r.offset,
            len: r.len,
            expiry: r.expiry,
        })
        .collect();
    assert!(walked == want, "index walk differs from the model");
    // Coalesced reads of runs of records, parsed by the walker.
    for start in (0..recs.len()).step_by(7) {
        let end = (start + 5).min(recs.len());
        let from = recs[start].offset;
        let to = recs[end - 1].offset + recs[end - 1].len;
        let buf = t.read_range(from, to - from, IoClass::GcRead).unwrap();
        let parsed: Vec<(u64, Vec<u8>, u64, Vec<u8>)> = RecordIter::new(&buf, from, NAME)
            .map(|r| {
                let (o, r) = r.unwrap();
                (o, r.key.to_vec(), r.seq, r.value.to_vec())
            })
            .collect();
        let want: Vec<_> = recs[start..end]
            .iter()
            .map(|r| (r.offset, r.key.clone(), r.seq, r.value.clone()))
            .collect();
        assert!(parsed == want, "records {start}..{end}");
    }
}

fn check_properties(p: &ValueTableProperties, recs: &[Rec], class: u32) {
    assert_eq!(p.num_records, recs.len() as u64);
    let data_end = recs.last().map_or(0, |r| r.offset + r.len);
    assert_eq!((p.data_end, p.record_bytes), (data_end, data_end));
    assert_eq!(
        p.key_bytes,
        recs.iter().map(|r| r.key.len() as u64).sum::<u64>()
    );
    assert_eq!(
        p.value_bytes,
        recs.iter().map(|r| r.value.len() as u64).sum::<u64>()
    );
    assert_eq!(
        p.smallest_seq,
        recs.iter().map(|r| r.seq).min().unwrap_or(0)
    );
    assert_eq!(p.largest_seq, recs.iter().map(|r| r.seq).max().unwrap_or(0));
    assert_eq!(
        p.smallest_key,
        recs.first().map_or(vec![], |r| r.key.clone())
    );
    assert_eq!(p.largest_key, recs.last().map_or(vec![], |r| r.key.clone()));
    assert_eq!((p.class, p.format_version), (class, FORMAT_VERSION));
    assert!(p.index_bytes > 0);
}

#[test]
fn expiring_records_make_a_format_2_table_whose_index_keeps_their_expiries() {
    let mut rng = StdRng::seed_from_u64(26);
    for all in [false, true] {
        let mut recs = model(&mut rng, 300, false);
        for r in &mut recs {
            if all || rng.random_bool(0.4) {
                r.expiry = Some(rng.random_range(0..=crate::expiry::MAX_EXPIRY_MS));
            }
        }
        let (file, done) = build_mem(&mut recs, small_opts(Compression::Lz4));
        let p = &done.properties;
        let expiring = recs.iter().filter(|r| r.expiry.is_some()).count() as u64;
        assert_eq!(
            (p.format_version, p.expiring_records, p.max_expiry),
            (
                format::FORMAT_VERSION_EXPIRY,
                expiring,
                recs.iter().filter_map(|r| r.expiry).max().unwrap_or(0)
            )
        );
        assert_eq!(p.all_records_expire(), all);
        let t = open_mem(&file, None).unwrap();
        assert_eq!(t.properties(), p);
        check_table(&t, &recs);
    }
    // Without an expiring record, format 1 as before.
    let mut recs = model(&mut rng, 50, false);
    let (_, done) = build_mem(&mut recs, small_opts(Compression::None));
    assert_eq!(done.properties.format_version, FORMAT_VERSION);
    assert!(!done.properties.all_records_expire());
}

#[test]
fn value_table_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<ValueTable>();
    check::<Arc<ValueTable>>();
    fn send<T: Send>() {}
    send::<ValueIndexIter>();
    send::<ValueTableBuilder>();
}

#[test]
fn round_trip_through_the_fault_fs() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut recs = model(&mut rng, 1500, true);
    assert!(recs.iter().any(|r| r.value.len() == 1 << 20));
    let fs = FaultFs::new(1);
    fs.create_dir_all(Path::new("/db")).unwrap();
    let path = Path::new("/db/000007.vst");
    let w = fs.new_writable(path, WriteFileOptions::default()).unwrap();
    let done = build(w, &mut recs, ValueTableBuilderOptions::default());
    check_properties(&done.properties, &recs, 0);

    let stats = Arc::new(IoStats::default());
    let r = fs.open_readable(path, ReadFileOptions::default()).unwrap();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let t = ValueTable::open(
        CountedReader::new(r, stats.clone()),
        NAME.into(),
        7,
        done.file_size,
        Some(cache.clone()),
        IoClass::Other,
    )
    .map(Arc::new)
    .unwrap();
    assert_eq!(t.properties(), &done.properties);
    assert_eq!((t.file_number(), t.file_name()), (7, NAME));
    assert_eq!(t.data_end(), done.properties.data_end);
    assert!(t.pinned_bytes() > 0);
    check_table(&t, &recs);

    // A record is exactly one read of its length.
    let r = &recs[recs.len() / 3];
    let before = stats.get(IoClass::UserRead);
    t.read_record(r.offset, r.len, IoClass::UserRead).unwrap();
    let after = stats.get(IoClass::UserRead);
    assert_eq!(after.read_ops - before.read_ops, 1);
    assert_eq!(after.read_bytes - before.read_bytes, r.len);
}

#[test]
fn round_trips_with_every_option() {
    let mut rng = StdRng::seed_from_u64(2);
    for opts in [
        small_opts(Compression::None),
        small_opts(Compression::Lz4),
        ValueTableBuilderOptions {
            index_block_size: 1,
            ..small_opts(Compression::Lz4)
        },
        ValueTableBuilderOptions {
            index_block_size: 1 << 20,
            ..small_opts(Compression::None)
        },
    ] {
        let mut recs = model(&mut rng, 300, false);
        let (file, done) = build_mem(&mut recs, opts);
        check_properties(&done.properties, &recs, 3);
        for cache in [None, Some(Arc::new(BlockCache::new(1 << 20)))] {
            let t = open_mem(&file, cache).unwrap();
            check_table(&t, &recs);
        }
    }
}

#[test]
fn keys_before_and_after_the_range_are_absent() {
    let mut recs: Vec<Rec> = ["b", "d", "f"]
        .iter()
        .map(|k| Rec {
            key: k.as_bytes().to_vec(),
            seq: 10,
            value: b"v".to_vec(),
            offset: 0,
            len: 0,
            expiry: None,
        })
        .collect();
    let (file, _) = build_mem(&mut recs, ValueTableBuilderOptions::default());
    let t = open_mem(&file, None).unwrap();
    for k in ["", "a", "c", "e", "g", "zzz"] {
        assert_eq!(
            t.find(k.as_bytes(), 10, IoClass::UserRead, true).unwrap(),
            None,
            "{k}"
        );
    }
    check_table(&t, &recs);
    assert!(matches!(
        t.find(&vec![0; MAX_KEY_SIZE + 1], 1, IoClass::UserRead, true),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        t.find(b"b", MAX_SEQUENCE + 1, IoClass::UserRead, true),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn an_empty_table_builds_and_opens() {
    for compression in [Compression::None, Compression::Lz4] {
        let (file, done) = build_mem(&mut [], small_opts(compression));
        assert_eq!(done.properties.num_records, 0);
        let t = open_mem(&file, None).unwrap();
        assert_eq!(t.data_end(), 0);
        assert_eq!(t.index_iter(IoClass::GcRead).count(), 0);
        assert_eq!(t.find(b"", 0, IoClass::UserRead, true).unwrap(), None);
        assert_eq!(t.find(b"x", 9, IoClass::UserRead, true).unwrap(), None);
        assert!(t.read_range(0, 0, IoClass::GcRead).unwrap().is_empty());
        assert!(
            t.read_record(0, 14, IoClass::UserRead)
                .unwrap_err()
                .is_corruption()
        );
        assert!(
            t.read_range(0, 1, IoClass::GcRead)
                .unwrap_err()
                .is_corruption()
        );
    }
}

#[test]
fn lookups_and_index_walks_touch_no_record() {
    let mut rng = StdRng::seed_from_u64(3);
    let mut recs = model(&mut rng, 400, false);
    let (file, done) = build_mem(&mut recs, small_opts(Compression::Lz4));
    // Wipe the record region: lookups and walks must not notice.
    let mut bytes = file.bytes();
    bytes[..done.properties.data_end as usize].fill(0);
    let wiped = MemFile::from_bytes(bytes);
    let stats = Arc::new(IoStats::default());
    // Large enough that the cache's admission region keeps every block seen once.
    let cache = Arc::new(BlockCache::new(64 << 20));
    let t = Arc::new(
        ValueTable::open(
            wiped.reader_with_stats(stats.clone()),
            NAME.into(),
            7,
            done.file_size,
            Some(cache.clone()),
            IoClass::Other,
        )
        .unwrap(),
    );
    let walked: Vec<IndexEntry> = t.index_iter(IoClass::GcRead).map(|e| e.unwrap()).collect();
    assert_eq!(walked.len(), recs.len());
    // The walk did not fill the cache.
    assert_eq!(cache.usage_bytes(), 0);
    for r in &recs {
        assert_eq!(
            t.find(&r.key, r.seq, IoClass::GcLookup, true).unwrap(),
            Some((r.offset, r.len))
        );
    }
    // Every dense block is cached now: a second round does no I/O.
    let reads = stats.get(IoClass::GcLookup).read_ops;
    assert!(reads > 0);
    for r in &recs {
        assert!(
            t.find(&r.key, r.seq, IoClass::GcLookup, true)
                .unwrap()
                .is_some()
        );
    }
    assert_eq!(stats.get(IoClass::GcLookup).read_ops, reads);
    // Without filling the cache, lookups read a block each time and cache nothing.
    let cache2 = Arc::new(BlockCache::new(64 << 20));
    let t2 = ValueTable::open(
        wiped.reader_with_stats(stats.clone()),
        NAME.into(),
        8,
        done.file_size,
        Some(cache2.clone()),
        IoClass::Other,
    )
    .unwrap();
    for r in &recs[..3] {
        assert!(
            t2.find(&r.key, r.seq, IoClass::GcLookup, false)
                .unwrap()
                .is_some()
        );
        assert!(
            t2.find(&r.key, r.seq, IoClass::GcLookup, false)
                .unwrap()
                .is_some()
        );
    }
    assert_eq!(stats.get(IoClass::GcLookup).read_ops, reads + 6);
    assert_eq!(cache2.usage_bytes(), 0);
    // The records themselves are gone, and reading one says so.
    let r = &recs[5];
    assert!(
        t.read_record(r.offset, r.len, IoClass::UserRead)
            .unwrap_err()
            .is_corruption()
    );
}

fn assert_corruption<T: std::fmt::Debug>(r: Result<T>, at: Option<u64>) {
    match r {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, NAME);
            if let Some(at) = at {
                assert_eq!(offset, at);
            }
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn handles_that_are_not_exactly_a_record_are_corruption() {
    let mut rng = StdRng::seed_from_u64(4);
    let mut recs = model(&mut rng, 50, false);
    let (file, done) = build_mem(&mut recs, small_opts(Compression::Lz4));
    let t = open_mem(&file, None).unwrap();
    let data_end = done.properties.data_end;
    let read = |o: u64, l: u64| t.read_record(o, l, IoClass::UserRead);
    for r in &recs {
        for (o, l) in [
            (r.offset, r.len - 1),
            (r.offset, r.len + 1),
            (r.offset + 1, r.len),
            (r.offset + 1, r.len - 1),
            (r.offset.wrapping_sub(1), r.len + 1),
            (r.offset, r.len + 14),
        ] {
            if o.checked_add(l).is_some_and(|e| e <= data_end) && l >= 14 {
                assert_corruption(read(o, l), Some(o));
            }
        }
    }
    for (o, l) in [
        (0, 0),
        (0, 13),
        (data_end, 14),
        (data_end - 13, 14),
        (u64::MAX, 14),
        (0, u64::MAX),
        (1, data_end),
        (0, record::MAX_RECORD_LEN + 1),
    ] {
        assert_corruption(read(o, l), Some(o));
    }
    assert_corruption(t.read_range(1, data_end, IoClass::GcRead), Some(1));
    assert_corruption(t.read_range(u64::MAX, 2, IoClass::GcRead), Some(u64::MAX));
    // A range not starting at a record is caught by the walker.
    let buf = t.read_range(1, data_end - 1, IoClass::GcRead).unwrap();
    let first = RecordIter::new(&buf, 1, NAME).next().unwrap();
    assert_corruption(first, Some(1));
}

#[test]
fn truncated_files_are_corruption() {
    let mut rng = StdRng::seed_from_u64(5);
    let mut recs = model(&mut rng, 20, false);
    let (file, done) = build_mem(&mut recs, small_opts(Compression::None));
    let bytes = file.bytes();
    for cut in 0..bytes.len() {
        let short = MemFile::from_bytes(bytes[..cut].to_vec());
        // The recorded size no longer matches.
        let r = ValueTable::open(
            short.reader(),
            NAME.into(),
            7,
            done.file_size,
            None,
            IoClass::Other,
        );
        assert_corruption(r, None);
        // The truncated size was recorded: the footer is gone.
        assert_corruption(open_mem(&short, None), None);
    }
    // A longer file is not the recorded one either.
    let mut long = bytes.clone();
    long.push(0);
    let r = ValueTable::open(
        MemFile::from_bytes(long).reader(),
        NAME.into(),
        7,
        done.file_size,
        None,
        IoClass::Other,
    );
    assert_corruption(r, None);
}

/// Every operation on a damaged table either fails (corruption, or an I/O error) or returns
/// exactly the model's answer.
fn check_damaged(file: &MemFile, recs: &[Rec], damaged: std::ops::Range<u64>, cached: bool) {
    let cache = cached.then(|| Arc::new(BlockCache::new(1 << 20)));
    let t = match open_mem(file, cache) {
        Ok(t) => t,
        Err(e) => {
            assert!(e.is_corruption() || e.io_kind().is_some(), "open: {e}");
            return;
        }
    };
    let ok_err = |e: &Error, what: &str| {
        assert!(e.is_corruption() || e.io_kind().is_some(), "{what}: {e}");
    };
    for r in recs {
        let hit = damaged.start < r.offset + r.len && r.offset < damaged.end;
        match t.read_record(r.offset, r.len, IoClass::UserRead) {
            Ok(got) => {
                assert!(!hit, "damage inside record at {} went unnoticed", r.offset);
                assert!(got.key == r.key && got.seq == r.seq && got.value == r.value);
            }
            Err(e) => {
                assert!(hit, "intact record at {} failed: {e}", r.offset);
                assert_corruption(Err::<(), _>(e), Some(r.offset));
            }
        }
        match t.find(&r.key, r.seq, IoClass::UserRead, true) {
            Ok(found) => assert_eq!(found, Some((r.offset, r.len)), "find {:?}", r.key),
            Err(e) => ok_err(&e, "find"),
        }
        let mut other = r.key.clone();
        other.push(1);
        match t.find(&other, r.seq, IoClass::UserRead, true) {
            Ok(found) => assert_eq!(found, None),
            Err(e) => ok_err(&e, "find absent"),
        }
    }
    let mut n = 0;
    for e in t.index_iter(IoClass::GcRead) {
        match e {
            Ok(e) => {
                let r = &recs[n];
                assert!(
                    e.user_key == r.key && (e.seq, e.offset, e.len) == (r.seq, r.offset, r.len)
                );
                n += 1;
            }
            Err(e) => {
                ok_err(&e, "index_iter");
                n = usize::MAX;
                break;
            }
        }
    }
    assert!(
        n == recs.len() || n == usize::MAX,
        "walk stopped early without an error"
    );
    if let Ok(buf) = t.read_range(0, t.data_end(), IoClass::GcRead) {
        for (i, rec) in RecordIter::new(&buf, 0, NAME).enumerate() {
            match rec {
                Ok((o, got)) => {
                    let r = &recs[i];
                    assert!(o == r.offset && got.key == r.key && got.value == r.value);
                }
                Err(e) => {
                    ok_err(&e, "record walk");
                    break;
                }
            }
        }
    }
}

#[test]
fn every_flipped_byte_is_caught_or_harmless() {
    let mut rng = StdRng::seed_from_u64(6);
    for (compression, cached) in [(Compression::None, false), (Compression::Lz4, true)] {
        let mut recs = model(&mut rng, 12, false);
        recs.retain(|r| r.key.len() < 100);
        let (file, _) = build_mem(&mut recs, small_opts(compression));
        let bytes = file.bytes();
        for i in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0x5a] {
                let bad = MemFile::from_bytes(bytes.clone());
                bad.flip(i, mask);
                check_damaged(&bad, &recs, i as u64..i as u64 + 1, cached);
            }
        }
    }
}

#[test]
fn random_multi_byte_damage_is_caught_or_harmless() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut recs = model(&mut rng, 30, false);
    recs.retain(|r| r.key.len() < 100);
    let (file, _) = build_mem(&mut recs, small_opts(Compression::Lz4));
    let bytes = file.bytes();
    for _ in 0..1500 {
        let bad = MemFile::from_bytes(bytes.clone());
        let start = rng.random_range(0..bytes.len());
        let len = rng.random_range(1..16).min(bytes.len() - start);
        for j in start..start + len {
            bad.flip(j, rng.random_range(1..=255));
        }
        check_damaged(&bad, &recs, start as u64..(start + len) as u64, false);
    }
}

/// A forged dense-index entry: `(user_key, seq, offset, len)`.
type ForgedEntry = (Vec<u8>, u64, u64, u64);

/// A forgery's edit of the honest properties.
type PropsEdit = Box<dyn Fn(&mut ValueTableProperties)>;

/// Writes a table whose record region is `records` and whose dense index is `entries`
/// (`(key, seq, offset, len)`), with properties computed from the records and then changed by
/// `edit`: for forging tables whose checksums are all valid but whose contents disagree.
fn forge(
    records: &[u8],
    entries: &[ForgedEntry],
    edit: impl FnOnce(&mut ValueTableProperties),
) -> MemFile {
    let file = MemFile::default();
    let mut w = file.writer();
    w.append(records).unwrap();
    let mut offset = records.len() as u64;
    let mut index = DenseIndexBuilder::new(64, Compression::None);
    for (k, s, o, l) in entries {
        index.add(k, *s, *o, *l, None).unwrap();
    }
    let (top_index, index_bytes) = index.finish(&mut w, &mut offset).unwrap();
    let mut p = ValueTableProperties {
        data_end: records.len() as u64,
        record_bytes: records.len() as u64,
        index_bytes,
        format_version: FORMAT_VERSION,
        ..Default::default()
    };
    for r in RecordIter::new(records, 0, NAME) {
        let (_, r) = r.unwrap();
        if p.num_records == 0 {
            p.smallest_key = r.key.to_vec();
            p.smallest_seq = r.seq;
        }
        p.num_records += 1;
        p.key_bytes += r.key.len() as u64;
        p.value_bytes += r.value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(r.seq);
        p.largest_seq = p.largest_seq.max(r.seq);
        p.largest_key = r.key.to_vec();
    }
    edit(&mut p);
    let mut block = BlockBuilder::new(1);
    p.encode_to(&mut block);
    let properties = write_block(
        &mut w,
        &mut offset,
        block.finish(),
        Compression::None,
        &mut Vec::new(),
    )
    .unwrap();
    let footer = Footer {
        top_index,
        properties,
        // The properties' version unless the edit asked for a format-2 table with a footer of
        // format 1 (which the reader must refuse too).
        format_version: if p.max_expiry == u64::MAX {
            FORMAT_VERSION
        } else {
            p.format_version
        },
    };
    w.append(&footer.encode()).unwrap();
    file
}

/// Ten records `k0..k9` at seq 5 and their honest index entries.
fn forge_inputs() -> (Vec<u8>, Vec<ForgedEntry>) {
    let mut records = Vec::new();
    let mut entries = Vec::new();
    for i in 0..10u64 {
        let key = format!("k{i}").into_bytes();
        let offset = records.len() as u64;
        encode_record(&mut records, &key, 5, &vec![b'v'; i as usize * 10]);
        entries.push((key, 5, offset, records.len() as u64 - offset));
    }
    (records, entries)
}

fn walk(file: &MemFile) -> Result<Vec<IndexEntry>> {
    open_mem(file, None)?.index_iter(IoClass::GcRead).collect()
}

#[test]
fn an_honest_forgery_opens_and_walks() {
    let (records, entries) = forge_inputs();
    let file = forge(&records, &entries, |_| {});
    assert_eq!(walk(&file).unwrap().len(), 10);
}

#[test]
fn inconsistent_dense_indexes_are_corruption() {
    let (records, entries) = forge_inputs();
    // A record missing from the index (a gap in the record region).
    let mut gap = entries.clone();
    gap.remove(4);
    let file = forge(&records, &gap, |p| p.largest_key = b"k9".to_vec());
    let err = walk(&file).unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains("previous record"),
        "{err}"
    );
    // The other records are still found (find does not need the whole index).
    let t = open_mem(&file, None).unwrap();
    assert!(t.find(b"k5", 5, IoClass::UserRead, true).unwrap().is_some());

    // An entry pointing into the middle of the previous record.
    let mut overlap = entries.clone();
    overlap[3].2 -= 1;
    overlap[3].3 += 1;
    assert!(
        walk(&forge(&records, &overlap, |_| {}))
            .unwrap_err()
            .is_corruption()
    );

    // Fewer records than the properties claim; the last record not reaching data_end.
    assert!(
        walk(&forge(&records, &entries, |p| p.num_records = 11))
            .unwrap_err()
            .is_corruption()
    );
    let short = entries[..9].to_vec();
    assert!(
        walk(&forge(&records, &short, |p| p.largest_key = b"k8".to_vec()))
            .unwrap_err()
            .is_corruption()
    );

    // An entry whose length does not fit its key.
    let mut bad_len = entries.clone();
    bad_len[0].3 = 3;
    assert!(
        walk(&forge(&records, &bad_len, |_| {}))
            .unwrap_err()
            .is_corruption()
    );
}

#[test]
fn inconsistent_properties_are_corruption() {
    let (records, entries) = forge_inputs();
    let edits: Vec<(&str, PropsEdit)> = vec![
        ("record_bytes", Box::new(|p| p.record_bytes += 1)),
        ("data_end", Box::new(|p| p.data_end += 1000)),
        ("empty", Box::new(|p| p.num_records = 0)),
        ("too many", Box::new(|p| p.num_records = 1000)),
        ("key bytes", Box::new(|p| p.key_bytes = u64::MAX)),
        (
            "seq range",
            Box::new(|p| p.smallest_seq = p.largest_seq + 1),
        ),
        ("seq limit", Box::new(|p| p.largest_seq = MAX_SEQUENCE + 1)),
        ("key range", Box::new(|p| p.smallest_key = b"z".to_vec())),
        ("largest key", Box::new(|p| p.largest_key = b"k8".to_vec())),
        ("index bytes", Box::new(|p| p.index_bytes = 1 << 40)),
        // Format 2's expiry properties (the footer follows the properties' version here).
        (
            "format 2 without an expiring record",
            Box::new(|p| p.format_version = 2),
        ),
        (
            "more expiring records than records",
            Box::new(|p| (p.format_version, p.expiring_records) = (2, 11)),
        ),
        (
            "a latest expiry with no expiring record",
            Box::new(|p| (p.format_version, p.max_expiry) = (2, 7)),
        ),
        (
            "an expiry beyond the latest",
            Box::new(|p| {
                (p.format_version, p.expiring_records) = (2, 1);
                p.max_expiry = crate::expiry::MAX_EXPIRY_MS + 1;
            }),
        ),
        (
            "properties of format 2 under a footer of format 1",
            Box::new(|p| {
                (p.format_version, p.expiring_records) = (2, 1);
                p.max_expiry = u64::MAX;
            }),
        ),
    ];
    for (what, edit) in edits {
        let file = forge(&records, &entries, |p| edit(p));
        let err = open_mem(&file, None).unwrap_err();
        assert!(err.is_corruption(), "{what}: {err}");
    }
    // An empty table with record bytes.
    let file = forge(&[], &[], |p| p.value_bytes = 1);
    assert!(open_mem(&file, None).unwrap_err().is_corruption());
    // Dense-index entries for a table that claims no records.
    let file = forge(&[], &entries, |_| {});
    assert!(open_mem(&file, None).unwrap_err().is_corruption());
}

#[test]
fn unknown_footer_versions_are_named() {
    let (file, _) = build_mem(&mut [], ValueTableBuilderOptions::default());
    let mut bytes = file.bytes();
    let at = bytes.len() - FOOTER_LEN + 48;
    bytes[at] = 9;
    let err = open_mem(&MemFile::from_bytes(bytes), None).unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains("version 9"),
        "{err}"
    );
}

#[test]
fn the_builder_is_poisoned_by_io_errors() {
    let fs = FaultFs::new(8);
    fs.create_dir_all(Path::new("/db")).unwrap();
    let opts = WriteFileOptions {
        buffer_size: 0,
        ..Default::default()
    };
    let w = fs.new_writable(Path::new("/db/000009.vst"), opts).unwrap();
    let mut b = ValueTableBuilder::new(w, ValueTableBuilderOptions::default()).unwrap();
    b.add(b"a", 1, b"x").unwrap();
    fs.add_fault(FaultRule {
        op: FaultOp::Append,
        path_contains: Some("000009".into()),
        skip: 0,
        times: Some(1),
        kind: FaultKind::Eio,
    });
    assert!(b.add(b"b", 1, b"y").unwrap_err().io_kind().is_some());
    // The fault is spent, but the builder remembers it.
    assert!(b.add(b"c", 1, b"z").unwrap_err().io_kind().is_some());
    assert!(b.finish().unwrap_err().io_kind().is_some());
}

/// Compaction's read-ahead (`compaction/read_ahead.rs`) returns exactly the records a single
/// read returns, reads forward runs in a few large reads, reads a jump back on its own, and
/// refuses a location that is not a record as `read_record` does.
#[test]
fn read_ahead_serves_forward_runs_from_few_reads_and_verifies_every_record() {
    use crate::compaction::read_ahead::RecordReadAhead;
    let mut rng = StdRng::seed_from_u64(41);
    let mut recs = model(&mut rng, 3000, false);
    let (file, _) = build_mem(&mut recs, small_opts(Compression::None));
    let t = open_mem(&file, None).unwrap();
    let mut ra = RecordReadAhead::default();
    let at = |r: &Rec| ValueHandle {
        file_number: 7,
        offset: r.offset,
        len: r.len,
    };
    // Two of every three records, in file order (the others died).
    let wanted: Vec<&Rec> = recs.iter().enumerate().filter(|(i, _)| i % 3 != 1).map(|(_, r)| r).collect();
    for r in &wanted {
        let got = ra.read(&t, 7, at(r)).unwrap();
        assert_eq!((&got.key, got.seq), (&r.key, r.seq));
        assert!(got.value == r.value, "value of {:?}@{}", r.key, r.seq);
    }
    assert!(
        ra.reads * 20 < wanted.len() as u64,
        "{} reads for {} records",
        ra.reads,
        wanted.len()
    );
    // Back to the first record: read on its own, and right.
    let first = ra.read(&t, 7, at(&recs[0])).unwrap();
    assert_eq!((&first.key, first.seq), (&recs[0].key, recs[0].seq));
    // A location that is not one record: corruption, inside a window or read alone.
    let bad = ValueHandle {
        file_number: 7,
        offset: recs[1].offset,
        len: recs[1].len + 1,
    };
    assert!(matches!(ra.read(&t, 7, bad), Err(Error::Corruption { .. })));
    let mut fresh = RecordReadAhead::default();
    assert!(matches!(fresh.read(&t, 7, bad), Err(Error::Corruption { .. })));
}

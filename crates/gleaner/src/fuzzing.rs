//! Entry points of the fuzz targets in `fuzz/` (cargo-fuzz) and of the seed-corpus tests in
//! `tests/fuzz_corpus.rs`. Not part of the API: the functions exist so that both drivers feed
//! arbitrary bytes to exactly the same decoders, the way the engine itself reaches them.
//!
//! Every function takes any byte string and must return normally: a decoder may reject the
//! input (with `Error::Corruption` or `Error::InvalidArgument`), but a panic, an abort, an
//! allocation sized by an unchecked length, or a loop that does not end is a bug in the engine.
//! Some targets also check a cheap round-trip property on inputs that decode: re-encoding and
//! decoding again gives the same value. See `docs/fuzzing.md`.

use std::path::Path;
use std::sync::Arc;

use crate::io::{CountedReader, FaultFs, FileSystem, IoClass, ReadFileOptions};
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQUENCE, make_lookup_key, user_key};
use crate::options::{Options, WalRecoveryMode, parse_options_file, render_options_file};
use crate::table::block_io::decompress_lz4;
use crate::table::{Block, BlockIter, BloomFilter, KeyEntry, ReadCtx, Table, TablePart};
use crate::value::{RecordIter, ValueHandle, ValueTable, decode_record};
use crate::version::VersionEdit;
use crate::version::set::MAX_MANIFEST_RECORD;
use crate::wal::{LogReader, decode_wal_record};

/// Iterator steps per walk. Enough to cover every entry of a seed file; a damaged index can
/// make a key table yield far more entries than it has bytes (several index entries naming the
/// same block), so walks are capped to keep one execution fast rather than to hide a hang.
const MAX_STEPS: usize = 4096;

/// Keys looked up in every image besides the ones found in it: empty, tiny, and bytes that sort
/// before and after typical keys.
const PROBE_KEYS: &[&[u8]] = &[b"", b"a", b"key", b"\x00", b"\xff\xff\xff\xff"];

/// Writes `data` to a file of an in-memory file system and opens it for reads the way the
/// engine opens its files, so the decoders see the same reader type as in production.
fn open_image(name: &str, data: &[u8]) -> CountedReader {
    let fs = FaultFs::new(0);
    let path = Path::new("/fuzz").join(name);
    // Failing here would be a bug of the in-memory file system, not of a decoder under test.
    fs.set_file_bytes(&path, data.to_vec())
        .expect("in-memory file system accepts a new file");
    let file = fs
        .open_readable(&path, ReadFileOptions::default())
        .expect("in-memory file system opens the file it just wrote");
    CountedReader::new(file, Arc::default())
}

/// Walks `it` forwards and backwards and seeks it to `targets` (each followed by a few steps in
/// both directions), stopping a phase at its first error. Returns up to 8 keys seen, to be used
/// as lookup keys.
fn exercise<I: InternalIterator + ?Sized>(it: &mut I, targets: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut seen = Vec::new();
    let forward = (|| -> crate::Result<()> {
        it.seek_to_first()?;
        for _ in 0..MAX_STEPS {
            if !it.valid() {
                break;
            }
            if seen.len() < 8 {
                seen.push(it.key().to_vec());
            }
            // Touch the value so a bad range would be caught here.
            let _ = it.value().len();
            it.next()?;
        }
        Ok(())
    })();
    let _ = forward;
    let backward = (|| -> crate::Result<()> {
        it.seek_to_last()?;
        for _ in 0..MAX_STEPS {
            if !it.valid() {
                break;
            }
            let _ = (it.key().len(), it.value().len());
            it.prev()?;
        }
        Ok(())
    })();
    let _ = backward;
    for target in targets.iter().chain(seen.clone().iter()) {
        let _ = (|| -> crate::Result<()> {
            it.seek(target)?;
            for _ in 0..3 {
                if !it.valid() {
                    break;
                }
                it.next()?;
            }
            it.seek_for_prev(target)?;
            for _ in 0..3 {
                if !it.valid() {
                    break;
                }
                it.prev()?;
            }
            Ok(())
        })();
    }
    seen
}

/// Internal-key seek targets built from [`PROBE_KEYS`].
fn probe_targets() -> Vec<Vec<u8>> {
    PROBE_KEYS
        .iter()
        .map(|k| make_lookup_key(k, MAX_SEQUENCE))
        .collect()
}

/// A log file (WAL or manifest) image: read it as recovery reads a WAL, in both recovery
/// modes, decoding every record into a write batch and walking its operations; then as
/// recovery reads a manifest, decoding every record as a version edit.
pub fn wal_reader(data: &[u8]) {
    const NAME: &str = "000001.log";
    // A record takes at least one 7-byte fragment header, so more records than bytes means the
    // reader is not advancing: report it as the hang it would be.
    let bound = data.len() + 1;
    for mode in [
        WalRecoveryMode::TolerateCorruptedTail,
        WalRecoveryMode::SkipAnyCorruptedRecords,
    ] {
        let Ok(mut reader) =
            crate::wal::wal_reader(open_image(NAME, data), NAME.into(), IoClass::Wal, mode)
        else {
            continue;
        };
        let mut n = 0;
        while let Ok(Some((offset, record))) = reader.read_record() {
            n += 1;
            assert!(n <= bound, "WAL reader returned more records than bytes");
            if let Ok(Some(batch)) = decode_wal_record(record, NAME, offset) {
                for op in batch.iter() {
                    if op.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = reader.dropped().len();
    }

    const MANIFEST: &str = "MANIFEST-000001";
    let Ok(mut reader) = LogReader::new(
        open_image(MANIFEST, data),
        MANIFEST.into(),
        IoClass::Manifest,
        WalRecoveryMode::TolerateCorruptedTail,
        MAX_MANIFEST_RECORD,
    ) else {
        return;
    };
    let mut n = 0;
    while let Ok(Some((offset, record))) = reader.read_record() {
        n += 1;
        assert!(
            n <= bound,
            "manifest reader returned more records than bytes"
        );
        let _ = VersionEdit::decode(&record, MANIFEST, offset);
    }
}

/// Uncompressed block contents, or (when the first byte is odd) a stored LZ4 block: the
/// remaining bytes go through the LZ4 decompressor, whose output becomes the block. The block
/// is then walked with the internal-key and the bytewise comparator.
pub fn block(data: &[u8]) {
    const NAME: &str = "000001.sst";
    let contents = match data.split_first() {
        Some((mode, rest)) if mode & 1 == 1 => match decompress_lz4(rest, NAME, 0, "fuzz") {
            Ok(c) => c,
            Err(_) => return,
        },
        Some((_, rest)) => rest.to_vec(),
        None => return,
    };
    let Ok(block) = Block::new(contents, NAME.into(), 0) else {
        return;
    };
    let block = Arc::new(block);
    let _ = block.num_restarts();
    exercise(&mut BlockIter::internal(block.clone()), &probe_targets());
    let bytewise: Vec<Vec<u8>> = PROBE_KEYS.iter().map(|k| k.to_vec()).collect();
    exercise(&mut BlockIter::bytewise(block), &bytewise);
}

/// Filter block contents: parse them and probe both hash families with a few keys, including
/// slices of the input itself.
pub fn bloom(data: &[u8]) {
    let Ok(filter) = BloomFilter::parse(data.to_vec(), "000001.sst", 0) else {
        return;
    };
    let _ = filter.size();
    let chunks = data.chunks(7).take(16);
    for key in PROBE_KEYS.iter().copied().chain(chunks) {
        let _ = filter.may_contain(key);
        let _ = filter.may_contain_inline(key);
    }
}

/// A whole key-table file image (either layout): open it as the table cache does (footer,
/// index(es), filter, properties), walk it and its parts, and look up keys found in it and a
/// few others.
pub fn key_table(data: &[u8]) {
    const NAME: &str = "000001.sst";
    let Ok(table) = Table::open(
        open_image(NAME, data),
        NAME.into(),
        1,
        data.len() as u64,
        None,
        IoClass::UserRead,
    ) else {
        return;
    };
    let table = Arc::new(table);
    let _ = (table.layout(), table.properties().num_data_entries());
    let targets = probe_targets();
    let mut keys = exercise(&mut table.iter(ReadCtx::default()), &targets);
    for part in [TablePart::Data, TablePart::Handles] {
        if let Some(mut it) = table.part_iter(part, ReadCtx::default()) {
            keys.extend(exercise(&mut it, &targets));
        }
    }
    // Its range tombstones, as reads and compaction ask them.
    if let Some(f) = table.range_tombstones() {
        for k in PROBE_KEYS.iter().copied().chain(keys.iter().map(|k| user_key(k))) {
            let _ = (f.newest_covering(k, MAX_SEQUENCE), f.covers(k, 1, 1 << 40));
            let _ = (f.fragment_from(k), f.fragment_before(k));
        }
        let _ = f.collapse(&[5, 1 << 20], |_, _| true);
    }
    let lookups = keys
        .iter()
        .filter(|k| k.len() >= 8)
        .map(|k| make_lookup_key(user_key(k), MAX_SEQUENCE))
        .chain(targets.iter().cloned());
    for lookup in lookups {
        let uk = user_key(&lookup);
        let _ = (table.may_contain(uk), table.may_contain_inline(uk));
        let _ = table.get(&lookup, ReadCtx::default());
        if let Ok(Some((_, KeyEntry::Handle(h)))) = table.get_key(&lookup, ReadCtx::default()) {
            let _ = ValueHandle::decode(&h, NAME, 0);
        }
    }
}

/// A whole value-table file image: open it as the value-table cache does (footer, properties,
/// top index), walk the dense index, read every indexed record and find it again by key, and
/// walk the record region as GC's coalesced reads do.
pub fn value_table(data: &[u8]) {
    const NAME: &str = "000001.vst";
    let Ok(table) = ValueTable::open(
        open_image(NAME, data),
        NAME.into(),
        1,
        data.len() as u64,
        None,
        IoClass::GcRead,
    ) else {
        return;
    };
    let table = Arc::new(table);
    let mut it = table.index_iter(IoClass::GcIndexRead);
    for entry in it.by_ref().take(MAX_STEPS) {
        let Ok(entry) = entry else { break };
        let _ = table.read_record(entry.offset, entry.len, IoClass::GcRead);
        let _ = table.find(&entry.user_key, entry.seq, IoClass::GcLookup, false);
    }
    let _ = it.block_bytes();
    for key in PROBE_KEYS {
        let _ = table.find(key, MAX_SEQUENCE, IoClass::UserRead, false);
    }
    // The whole record region at once; `data_end` was checked against the file at open.
    if let Ok(region) = table.read_range(0, table.data_end(), IoClass::GcRead) {
        for record in RecordIter::new(&region, 0, NAME).take(MAX_STEPS) {
            if record.is_err() {
                break;
            }
        }
    }
}

/// An open value segment's file image, as recovery meets one after a crash: scan it
/// (`scan_segment`), cut it back to half its sequence range, claim every second record kept as a
/// replayed handle would, resume it in a new file and seal it. What a scan accepts must seal
/// into a value table that opens and walks without error and holds exactly the records kept.
pub fn value_segment(data: &[u8]) {
    use crate::io::WriteFileOptions;
    use crate::value::ValueTableBuilderOptions;
    use crate::value::segment::{SegmentWriter, scan_segment};
    const NAME: &str = "000001.vst";
    let reader = open_image(NAME, data);
    let Ok(mut scanned) = scan_segment(NAME, data.len() as u64, |at, len| {
        reader.read_vec(at, len, IoClass::Wal)
    }) else {
        return;
    };
    let _ = scanned.torn();
    scanned.keep_through(scanned.largest_seq() / 2 + 1);
    let kept = scanned.num_records();
    let end = scanned.end() as usize;
    // Claims as the log's handles make them, read back from the records themselves.
    let mut walk = RecordIter::new(&data[..end], 0, NAME);
    for (i, record) in walk.by_ref().enumerate().take(MAX_STEPS) {
        let (offset, r) = record.expect("a scanned record decodes");
        let len = crate::value::record::encoded_record_len(r.key.len(), r.value.len());
        if i % 2 == 0 {
            let expiry = (i % 4 == 0).then_some(offset);
            assert!(scanned.claim(r.key, r.seq, offset, len, expiry), "a kept record is claimed");
        }
    }
    let fs = FaultFs::new(0);
    let path = Path::new("/").join(NAME);
    let mut file = fs
        .new_writable(&path, WriteFileOptions::default())
        .expect("in-memory file system creates a file");
    file.append(&data[..end]).expect("in-memory append");
    let writer = SegmentWriter::resume(file, scanned).expect("the file ends where the records do");
    let done = writer
        .seal(&ValueTableBuilderOptions::default())
        .expect("a scanned segment seals");
    let sealed = fs
        .open_readable(&path, ReadFileOptions::default())
        .expect("in-memory file system opens the sealed file");
    let table = Arc::new(
        ValueTable::open(
            CountedReader::new(sealed, Arc::default()),
            NAME.into(),
            1,
            done.file_size,
            None,
            IoClass::GcRead,
        )
        .expect("a sealed segment opens"),
    );
    let walked = table.index_iter(IoClass::GcIndexRead).take(MAX_STEPS + 1).count();
    assert!(table.in_write_order());
    assert_eq!(table.properties().num_records, kept as u64);
    if kept <= MAX_STEPS {
        assert_eq!(walked, kept, "the sealed index names every kept record");
    }
    let mut it = table.index_iter(IoClass::GcIndexRead);
    for entry in it.by_ref().take(MAX_STEPS) {
        let entry = entry.expect("a sealed segment's index walks");
        table
            .read_record(entry.offset, entry.len, IoClass::GcRead)
            .expect("an indexed record reads");
    }
}

/// One value record (as a handle's read returns it) and, separately, the same bytes as a run
/// of consecutive records. A record that decodes must re-encode to exactly its input: the
/// decoder accepts only minimal varints, so there is one encoding per record.
pub fn value_record(data: &[u8]) {
    const NAME: &str = "000001.vst";
    if let Ok(record) = decode_record(data, NAME, 0) {
        let mut again = Vec::with_capacity(data.len());
        crate::value::record::encode_record(&mut again, record.key, record.seq, record.value);
        assert_eq!(again, data, "a decoded value record re-encodes differently");
    }
    for record in RecordIter::new(data, 0, NAME).take(MAX_STEPS) {
        if record.is_err() {
            break;
        }
    }
}

/// One manifest record: a version edit. An edit that decodes must survive a re-encoding.
pub fn manifest_edit(data: &[u8]) {
    if let Ok(edit) = VersionEdit::decode(data, "MANIFEST-000001", 0) {
        let again = VersionEdit::decode(&edit.encode(), "MANIFEST-000001", 0)
            .expect("a re-encoded version edit decodes");
        assert_eq!(again, edit, "a version edit changes through re-encoding");
    }
}

/// An encoded value handle, as stored in a key table (plain, and as a stored handle with its
/// flags and expiry). A handle that decodes must survive a re-encoding, and a stored handle's
/// expiry read alone must be the one it decodes with.
pub fn value_handle(data: &[u8]) {
    if let Ok(handle) = ValueHandle::decode(data, "000001.sst", 0) {
        let again = ValueHandle::decode(&handle.encode(), "000001.sst", 0)
            .expect("a re-encoded value handle decodes");
        assert_eq!(again, handle, "a value handle changes through re-encoding");
    }
    // The stored form an entry holds (record sequence, flags, payload, expiry): it survives
    // re-encoding, and the expiry iterators read alone is the one it decodes with.
    if let Ok(stored) = crate::value::StoredHandle::decode(data, "000001.sst", 0) {
        let again = crate::value::StoredHandle::decode(&stored.encode(), "000001.sst", 0)
            .expect("a re-encoded stored handle decodes");
        assert_eq!(again, stored, "a stored handle changes through re-encoding");
        let expiry = crate::value::StoredHandle::expiry_of(data, "000001.sst")
            .expect("a stored handle that decodes has a readable expiry");
        assert_eq!(expiry, stored.expiry, "the expiry read alone differs");
    }
}

/// An OPTIONS file: parse it, apply every saved option to default options as the open does,
/// and validate the result. Options that are accepted must render to a file that reads back to
/// the same options (a reopen must not drift).
pub fn options_file(data: &[u8]) {
    const NAME: &str = "OPTIONS";
    let Ok(pairs) = parse_options_file(NAME, data) else {
        return;
    };
    let mut opts = Options::default();
    for (name, value) in &pairs {
        if opts.apply_saved(name, value).is_err() {
            return;
        }
    }
    if opts.validate().is_err() {
        return;
    }
    let rendered = render_options_file(&opts);
    let mut reread = Options::default();
    for (name, value) in
        parse_options_file(NAME, rendered.as_bytes()).expect("a rendered OPTIONS file parses")
    {
        reread
            .apply_saved(&name, &value)
            .expect("a rendered option applies");
    }
    assert_eq!(
        render_options_file(&reread),
        rendered,
        "options change through an OPTIONS file round trip"
    );
}

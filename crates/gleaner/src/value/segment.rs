//! Value segments: value tables written in the order values arrive (`separate_at=write`,
//! issue 32), so that a separated value is written once.
//!
//! A segment's records are appended as writes come, each in the record format of every value
//! table; while the segment is *open* its file holds records only, and the writer keeps every
//! record's place in memory. *Sealing* sorts those places into internal-key order and appends the
//! dense index, the top index, the properties and the footer a value table has, in format
//! version 3 ([`FORMAT_VERSION_WRITE_ORDER`]): from then on the segment reads like any value
//! table, but for its records' order (offsets along the dense index do not increase).
//!
//! After a crash an open segment is *scanned* ([`scan_segment`]): its records are walked from
//! the start until one fails its checks (a torn write), and the writer is rebuilt from what was
//! found, to be cut back to what the write-ahead log acknowledged and sealed.

use crate::error::{Error, Result};
use crate::io::WritableFile;
use crate::options::MAX_KEY_SIZE;
use crate::table::format::{MAX_BLOCK_CONTENTS, MAX_VALUE_LEN};
use crate::table::BlockHandle;

use super::builder::{FinishedValueTable, ValueTableBuilderOptions, write_tail};
use super::format::FORMAT_VERSION_WRITE_ORDER;
use super::index::{DenseIndexBuilder, max_entry_growth};
use super::properties::ValueTableProperties;
use super::record::{
    MAX_RECORD_LEN, check_record_limits, decode_record, write_record,
    record_header_len, record_len_from_header,
};

/// Where one appended record lies, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placed {
    /// Its user key: `keys[key_at..key_at + key_len]`.
    key_at: usize,
    key_len: usize,
    seq: u64,
    offset: u64,
    len: u64,
    value_len: u64,
    expiry: Option<u64>,
    /// Named by a handle: appended by the writer, or claimed by a replayed handle after a scan.
    claimed: bool,
}

/// Appends records to an open value segment and seals it.
///
/// Records are appended in strictly increasing sequence order (the order writes are logged),
/// which makes `(user key, seq)` unique in the segment and lets a scan after a crash cut the
/// segment back to a sequence number. After an I/O error the writer is unusable: every later
/// call returns the same error. Refused arguments (`Error::InvalidArgument`) write nothing and
/// leave the writer usable.
///
/// Memory: the writer keeps each record's key and its place (64 bytes) until the seal, so an
/// open segment of `n` records holds `n × (key + 64)` bytes ([`SegmentWriter::memory_bytes`]);
/// the caller bounds it by sealing at a target size.
#[derive(Debug)]
pub struct SegmentWriter {
    file: Box<dyn WritableFile>,
    /// Bytes appended: where the next record starts.
    offset: u64,
    /// Every record, in write order (so in offset and sequence order).
    placed: Vec<Placed>,
    keys: Vec<u8>,
    /// An upper bound on the top index the seal would write: as if every record ended a dense
    /// block (which a one-byte `index_block_size` makes true).
    top_bound: usize,
    record_buf: Vec<u8>,
    props: ValueTableProperties,
    error: Option<Error>,
}

impl SegmentWriter {
    /// Starts a segment in `file`, which must be empty (`Error::InvalidArgument` otherwise).
    pub fn new(file: Box<dyn WritableFile>) -> Result<SegmentWriter> {
        if !file.is_empty() {
            return Err(Error::invalid(format!(
                "a value segment must start in an empty file, this one holds {} bytes",
                file.len()
            )));
        }
        Ok(SegmentWriter::with(file, ScannedSegment::default()))
    }

    /// Resumes a segment from a scan of its file, cut back as the caller decided: `file` is
    /// the segment's file opened for appending at the end of the records kept (`scanned.end()`).
    pub fn resume(
        file: Box<dyn WritableFile>,
        scanned: ScannedSegment,
    ) -> Result<SegmentWriter> {
        if file.len() != scanned.end() {
            return Err(Error::invalid(format!(
                "a resumed value segment must continue at {}, its file holds {} bytes",
                scanned.end(),
                file.len()
            )));
        }
        Ok(SegmentWriter::with(file, scanned))
    }

    fn with(file: Box<dyn WritableFile>, scanned: ScannedSegment) -> SegmentWriter {
        let mut w = SegmentWriter {
            file,
            offset: 0,
            placed: Vec::new(),
            keys: scanned.keys,
            top_bound: 8,
            record_buf: Vec::new(),
            props: ValueTableProperties::default(),
            error: None,
        };
        for p in scanned.placed {
            w.note(p);
        }
        w
    }

    /// Appends the record `(user_key, seq, value)`, whose version expires at `expiry` if it
    /// does, and returns its location `(offset, len)`, from which the caller builds a value
    /// handle. The bytes reach the file's buffer; [`SegmentWriter::flush`] hands them to the
    /// operating system, [`SegmentWriter::sync`] makes them durable.
    ///
    /// `Error::InvalidArgument`, with nothing written, when `user_key` exceeds 64 KiB, `value`
    /// exceeds 256 MiB, `seq` exceeds [`MAX_SEQUENCE`](crate::key::MAX_SEQUENCE) or is not
    /// above the previous record's, `expiry` is past
    /// [`MAX_EXPIRY_MS`](crate::expiry::MAX_EXPIRY_MS), or the segment's index could outgrow its
    /// block limit (seal it and start another).
    pub fn append(
        &mut self,
        user_key: &[u8],
        seq: u64,
        value: &[u8],
        expiry: Option<u64>,
    ) -> Result<(u64, u64)> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.check_args(user_key, seq, value)?;
        if let Some(e) = expiry {
            crate::expiry::check_expiry(e)?;
        }
        let written = write_record(&mut *self.file, &mut self.record_buf, user_key, seq, value);
        let len = match written {
            Ok(len) => len,
            Err(e) => {
                self.error = Some(e.clone());
                return Err(e);
            }
        };
        let offset = self.offset;
        let key_at = self.keys.len();
        self.keys.extend_from_slice(user_key);
        self.note(Placed {
            key_at,
            key_len: user_key.len(),
            seq,
            offset,
            len,
            value_len: value.len() as u64,
            expiry,
            claimed: true,
        });
        Ok((offset, len))
    }

    /// Counts an appended (or scanned) record.
    fn note(&mut self, p: Placed) {
        debug_assert_eq!(p.offset, self.offset, "records follow each other");
        debug_assert!(self.placed.last().is_none_or(|l| l.seq < p.seq));
        let props = &mut self.props;
        if props.num_records == 0 {
            props.smallest_seq = p.seq;
        }
        props.largest_seq = p.seq;
        props.num_records += 1;
        props.key_bytes += p.key_len as u64;
        props.value_bytes += p.value_len;
        if let Some(e) = p.expiry {
            props.expiring_records += 1;
            props.max_expiry = props.max_expiry.max(e);
        }
        self.top_bound += max_entry_growth(p.key_len + 8, BlockHandle::MAX_ENCODED_LEN);
        self.offset += p.len;
        self.placed.push(p);
    }

    /// The argument checks of [`SegmentWriter::append`].
    fn check_args(&self, user_key: &[u8], seq: u64, value: &[u8]) -> Result<()> {
        check_record_limits(user_key, seq, value)?;
        if let Some(last) = self.placed.last()
            && seq <= last.seq
        {
            return Err(Error::invalid(format!(
                "value-segment records must be appended in increasing sequence order: seq {seq} \
                 after seq {}",
                last.seq
            )));
        }
        if !self.has_room(user_key.len()) {
            return Err(Error::invalid(format!(
                "value segment too large: its top index could exceed the {MAX_BLOCK_CONTENTS}-byte \
                 block limit (seal it and start another)"
            )));
        }
        Ok(())
    }

    /// Whether a record of a `key_len`-byte key may still be appended: the seal's top index
    /// stays within its block limit (see [`SegmentWriter::append`]).
    pub fn has_room(&self, key_len: usize) -> bool {
        self.top_bound + max_entry_growth(key_len + 8, BlockHandle::MAX_ENCODED_LEN)
            <= MAX_BLOCK_CONTENTS
    }

    /// Bytes appended so far: the size of the record region.
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Records appended so far.
    pub fn num_records(&self) -> u64 {
        self.props.num_records
    }

    /// Bytes held in memory for the seal: the keys and the places of every record.
    pub fn memory_bytes(&self) -> usize {
        self.keys.capacity() + self.placed.capacity() * std::mem::size_of::<Placed>()
    }

    /// Hands the appended bytes to the operating system (readers of the file see them).
    pub fn flush(&mut self) -> Result<()> {
        self.io(|f| f.flush())
    }

    /// Makes the appended bytes durable.
    pub fn sync(&mut self) -> Result<()> {
        self.io(|f| f.sync())
    }

    fn io(&mut self, op: impl FnOnce(&mut dyn WritableFile) -> Result<()>) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let r = op(&mut *self.file);
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }

    /// Seals the segment: writes its dense index (the records' places sorted into internal-key
    /// order), top index, properties and footer after the last record, in format version 3,
    /// then syncs the file. Returns the properties and the file size, as a value table's
    /// builder does. A segment without records seals into a valid empty table. Errors: the
    /// writer's earlier I/O error, an `opts` out of range, or an I/O error while writing.
    pub fn seal(mut self, opts: &ValueTableBuilderOptions) -> Result<FinishedValueTable> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        opts.validate()?;
        let keys = &self.keys;
        let key = |p: &Placed| &keys[p.key_at..p.key_at + p.key_len];
        // Internal-key order: user key ascending, then sequence descending.
        self.placed
            .sort_unstable_by(|a, b| key(a).cmp(key(b)).then(b.seq.cmp(&a.seq)));
        let mut index = DenseIndexBuilder::new(opts.index_block_size, opts.compression);
        for p in &self.placed {
            index.add(key(p), p.seq, p.offset, p.len, p.expiry)?;
        }
        let mut props = self.props;
        if let (Some(first), Some(last)) = (self.placed.first(), self.placed.last()) {
            props.smallest_key = key(first).to_vec();
            props.largest_key = key(last).to_vec();
        }
        props.format_version = FORMAT_VERSION_WRITE_ORDER;
        write_tail(&mut *self.file, self.offset, index, props, opts)
    }
}

/// The valid records at the start of an open segment's file, as [`scan_segment`] found them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ScannedSegment {
    placed: Vec<Placed>,
    keys: Vec<u8>,
    /// Where the walk stopped short of the file's end, and why: a torn write (or damage) at that
    /// offset. `None` when the records fill the file exactly.
    torn: Option<(u64, String)>,
}

impl ScannedSegment {
    /// End of the last record kept: where a resumed segment continues.
    pub fn end(&self) -> u64 {
        self.placed.last().map_or(0, |p| p.offset + p.len)
    }

    /// Where each record kept lies, `(offset, len)`, in file order.
    pub fn places(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.placed.iter().map(|p| (p.offset, p.len))
    }

    /// Records kept.
    pub fn num_records(&self) -> usize {
        self.placed.len()
    }

    /// Where the file stopped holding valid records, and what was wrong there (`None`: the
    /// records fill the file).
    pub fn torn(&self) -> Option<(u64, &str)> {
        self.torn.as_ref().map(|(at, why)| (*at, why.as_str()))
    }

    /// The largest sequence number of a record kept (0 with none).
    pub fn largest_seq(&self) -> u64 {
        self.placed.last().map_or(0, |p| p.seq)
    }

    /// Whether the segment holds the record `(user_key, seq)` at exactly `(offset, len)`: what
    /// a handle replayed from the write-ahead log must name. When it does, the record takes the
    /// handle's `expiry` (records do not carry their expiries; the log's handles and the sealed
    /// index do).
    pub fn claim(
        &mut self,
        user_key: &[u8],
        seq: u64,
        offset: u64,
        len: u64,
        expiry: Option<u64>,
    ) -> bool {
        let Some(i) = self.find(user_key, seq, offset, len) else {
            return false;
        };
        let p = &mut self.placed[i];
        p.expiry = expiry;
        p.claimed = true;
        true
    }

    /// Whether the segment holds the record `(user_key, seq)` at exactly `(offset, len)`, as
    /// [`ScannedSegment::claim`] checks, without claiming it.
    pub fn holds(&self, user_key: &[u8], seq: u64, offset: u64, len: u64) -> bool {
        self.find(user_key, seq, offset, len).is_some()
    }

    fn find(&self, user_key: &[u8], seq: u64, offset: u64, len: u64) -> Option<usize> {
        // Records are in offset order.
        let i = self
            .placed
            .binary_search_by_key(&offset, |p| p.offset)
            .ok()?;
        let p = &self.placed[i];
        (p.len == len && p.seq == seq && &self.keys[p.key_at..p.key_at + p.key_len] == user_key)
            .then_some(i)
    }

    /// The records kept that no handle claimed, and their bytes: garbage from the start (a
    /// write whose log record was lost to damage the log's recovery mode skipped).
    pub fn unclaimed(&self) -> (u64, u64) {
        self.placed
            .iter()
            .filter(|p| !p.claimed)
            .fold((0, 0), |(n, b), p| (n + 1, b + p.len))
    }

    /// Keeps only the records with sequence numbers up to `seq` (a prefix: records are in
    /// sequence order), as the write-ahead log acknowledged them; the rest are cut off.
    pub fn keep_through(&mut self, seq: u64) {
        let keep = self.placed.partition_point(|p| p.seq <= seq);
        self.placed.truncate(keep);
        let keys_end = self.placed.last().map_or(0, |p| p.key_at + p.key_len);
        self.keys.truncate(keys_end);
    }
}

/// How much of an open segment [`scan_segment`] reads at a time.
const SCAN_WINDOW: u64 = 4 << 20;

/// Walks the records of an open segment's file of `size` bytes from its start, reading through
/// `read(offset, len)` (which returns exactly `len` bytes or an error), until the end of the
/// file or the first record that fails its checks: a header out of bounds, a record running
/// past the end of the file, or a CRC mismatch is where a torn write ends the segment
/// ([`ScannedSegment::torn`]). A valid record whose sequence number is not above the one before
/// it cannot come from a torn write (files are never reused) and is `Error::Corruption` naming
/// `file`. Reads go `SCAN_WINDOW` bytes at a time (a record longer than that in one read of its
/// own), so memory stays bounded by the window and the longest record.
pub fn scan_segment(
    file: &str,
    size: u64,
    mut read: impl FnMut(u64, usize) -> Result<Vec<u8>>,
) -> Result<ScannedSegment> {
    let mut out = ScannedSegment::default();
    let mut window: Vec<u8> = Vec::new();
    let mut window_at = 0u64;
    let mut at = 0u64;
    let max_header = record_header_len(MAX_KEY_SIZE, MAX_VALUE_LEN) as u64;
    while at < size {
        // The header (or what is left of the file), then the whole record, in the window.
        let head = max_header.min(size - at);
        if at + head > window_at + window.len() as u64 {
            window_at = at;
            window = read(at, SCAN_WINDOW.min(size - at) as usize)?;
        }
        let rel = (at - window_at) as usize;
        let len = match record_len_from_header(&window[rel..]) {
            Ok(len) => len,
            Err(why) => {
                out.torn = Some((at, why));
                break;
            }
        };
        if len > size - at {
            out.torn = Some((
                at,
                format!("a {len}-byte record runs past the end of the file at {size}"),
            ));
            break;
        }
        debug_assert!(len <= MAX_RECORD_LEN);
        if at + len > window_at + window.len() as u64 {
            window_at = at;
            window = read(at, SCAN_WINDOW.max(len).min(size - at) as usize)?;
        }
        let rel = (at - window_at) as usize;
        let record = match decode_record(&window[rel..rel + len as usize], file, at) {
            Ok(r) => r,
            Err(e) => {
                out.torn = Some((at, e.to_string()));
                break;
            }
        };
        if let Some(last) = out.placed.last()
            && record.seq <= last.seq
        {
            return Err(Error::corruption(
                file,
                at,
                format!(
                    "value-segment record with seq {} after seq {}: records are written in \
                     increasing sequence order",
                    record.seq, last.seq
                ),
            ));
        }
        let value_len = record.value.len();
        let key_at = out.keys.len();
        out.keys.extend_from_slice(record.key);
        out.placed.push(Placed {
            key_at,
            key_len: record.key.len(),
            seq: record.seq,
            offset: at,
            len,
            value_len: value_len as u64,
            // Records do not carry expiries; the log's handles do (`ScannedSegment::claim`).
            expiry: None,
            claimed: false,
        });
        debug_assert_eq!(
            len,
            (record_header_len(record.key.len(), value_len) + record.key.len() + value_len) as u64
        );
        at += len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::io::IoClass;
    use crate::key::MAX_SEQUENCE;
    use crate::table::Compression;
    use crate::table::test_util::MemFile;
    use crate::value::{IndexEntry, ValueTable};

    const NAME: &str = "000009.vst";

    /// One appended record and where it went.
    #[derive(Debug, Clone)]
    struct Rec {
        key: Vec<u8>,
        seq: u64,
        value: Vec<u8>,
        expiry: Option<u64>,
        at: (u64, u64),
    }

    fn opts(index_block_size: usize) -> ValueTableBuilderOptions {
        ValueTableBuilderOptions {
            index_block_size,
            compression: Compression::Lz4,
            class: 0,
        }
    }

    /// Appends `n` records of random keys (some written several times), sizes and expiries, in
    /// increasing sequence order from `first_seq`.
    fn append_random(
        w: &mut SegmentWriter,
        rng: &mut StdRng,
        n: usize,
        first_seq: u64,
    ) -> Vec<Rec> {
        let mut seq = first_seq;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            seq += rng.random_range(1..4);
            let key = format!("k{:03}", rng.random_range(0..40)).into_bytes();
            let len = if rng.random_bool(0.05) {
                0
            } else {
                rng.random_range(1..600)
            };
            let value: Vec<u8> = (0..len).map(|i| (i as u64 ^ seq) as u8).collect();
            let expiry = rng
                .random_bool(0.2)
                .then(|| rng.random_range(1..(1u64 << 50)));
            let at = w.append(&key, seq, &value, expiry).unwrap();
            out.push(Rec {
                key,
                seq,
                value,
                expiry,
                at,
            });
        }
        out
    }

    fn open(file: &MemFile) -> Arc<ValueTable> {
        Arc::new(
            ValueTable::open(file.reader(), NAME.into(), 9, file.len(), None, IoClass::Other)
                .unwrap(),
        )
    }

    /// Every way of reading the sealed segment agrees with what was appended.
    fn check_sealed(t: &Arc<ValueTable>, recs: &[Rec]) {
        assert!(t.in_write_order());
        for r in recs {
            let got = t.read_record(r.at.0, r.at.1, IoClass::UserRead).unwrap();
            assert_eq!((&got.key, got.seq, &got.value[..]), (&r.key, r.seq, &r.value[..]));
            assert_eq!(
                t.find(&r.key, r.seq, IoClass::UserRead, true).unwrap(),
                Some(r.at)
            );
        }
        let mut want: Vec<IndexEntry> = recs
            .iter()
            .map(|r| IndexEntry {
                user_key: r.key.clone(),
                seq: r.seq,
                offset: r.at.0,
                len: r.at.1,
                expiry: r.expiry,
            })
            .collect();
        want.sort_by(|a, b| a.user_key.cmp(&b.user_key).then(b.seq.cmp(&a.seq)));
        let walked: Vec<IndexEntry> = t.index_iter(IoClass::GcRead).map(|e| e.unwrap()).collect();
        assert!(walked == want, "the index walk is the records in internal-key order");
        let p = t.properties();
        assert_eq!(p.format_version, FORMAT_VERSION_WRITE_ORDER);
        assert_eq!(p.num_records, recs.len() as u64);
        assert_eq!(p.data_end, recs.last().map_or(0, |r| r.at.0 + r.at.1));
        assert_eq!(p.smallest_key, want.first().map_or(vec![], |e| e.user_key.clone()));
        assert_eq!(p.largest_key, want.last().map_or(vec![], |e| e.user_key.clone()));
        assert_eq!(
            (p.smallest_seq, p.largest_seq),
            (
                recs.first().map_or(0, |r| r.seq),
                recs.last().map_or(0, |r| r.seq)
            )
        );
        let expiring: Vec<u64> = recs.iter().filter_map(|r| r.expiry).collect();
        assert_eq!(p.expiring_records, expiring.len() as u64);
        assert_eq!(p.max_expiry, expiring.iter().copied().max().unwrap_or(0));
        assert_eq!(
            p.value_bytes,
            recs.iter().map(|r| r.value.len() as u64).sum::<u64>()
        );
    }

    #[test]
    fn a_sealed_segment_reads_as_a_value_table_with_records_in_write_order() {
        let mut rng = StdRng::seed_from_u64(7);
        for block_size in [1, 64, 4096] {
            let file = MemFile::default();
            let mut w = SegmentWriter::new(Box::new(file.writer())).unwrap();
            let recs = append_random(&mut w, &mut rng, 300, 0);
            assert_eq!((w.num_records(), w.len()), (300, file.len()));
            let done = w.seal(&opts(block_size)).unwrap();
            assert_eq!(done.file_size, file.len());
            assert_eq!(*file.syncs.lock(), 1);
            check_sealed(&open(&file), &recs);
        }
        // Empty.
        let file = MemFile::default();
        let done = SegmentWriter::new(Box::new(file.writer()))
            .unwrap()
            .seal(&opts(4096))
            .unwrap();
        assert_eq!(done.properties.num_records, 0);
        check_sealed(&open(&file), &[]);
    }

    #[test]
    fn appends_out_of_sequence_order_or_past_the_limits_are_refused_without_writing() {
        let file = MemFile::default();
        let mut w = SegmentWriter::new(Box::new(file.writer())).unwrap();
        w.append(b"m", 10, b"v", None).unwrap();
        let len = file.len();
        for (k, s) in [(&b"m"[..], 10), (b"a", 9), (b"z", MAX_SEQUENCE + 1)] {
            let err = w.append(k, s, b"x", None).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{k:?}@{s}: {err}");
        }
        assert!(w.append(&vec![b'k'; MAX_KEY_SIZE + 1], 11, b"", None).is_err());
        assert!(w.append(b"k", 11, b"", Some(u64::MAX)).is_err());
        assert_eq!(file.len(), len);
        // Still usable; keys in any order.
        w.append(b"a", 11, b"", None).unwrap();
        w.append(b"m", 12, b"newer", None).unwrap();
        assert_eq!(w.num_records(), 3);
        w.seal(&opts(4096)).unwrap();
        let t = open(&file);
        let keys: Vec<(Vec<u8>, u64)> = t
            .index_iter(IoClass::GcRead)
            .map(|e| e.map(|e| (e.user_key, e.seq)).unwrap())
            .collect();
        assert_eq!(
            keys,
            vec![(b"a".to_vec(), 11), (b"m".to_vec(), 12), (b"m".to_vec(), 10)]
        );
        assert!(
            SegmentWriter::new(Box::new(MemFile::from_bytes(vec![0]).writer())).is_err(),
            "a segment starts in an empty file"
        );
    }

    #[test]
    fn an_index_whose_records_do_not_tile_the_region_is_corruption() {
        let file = MemFile::default();
        let mut w = SegmentWriter::new(Box::new(file.writer())).unwrap();
        w.append(b"b", 1, b"one", None).unwrap();
        w.append(b"a", 2, b"two", None).unwrap();
        w.append(b"c", 3, b"six", None).unwrap();
        // The index would name the first record twice and the second never (same lengths).
        w.placed[1].offset = w.placed[0].offset;
        w.seal(&opts(4096)).unwrap();
        let t = open(&file);
        let err = t
            .index_iter(IoClass::GcRead)
            .find_map(std::result::Result::err)
            .expect("the walk fails");
        assert!(err.is_corruption() && err.to_string().contains("records before"), "{err}");
    }

    fn scan(bytes: &[u8]) -> Result<ScannedSegment> {
        scan_segment(NAME, bytes.len() as u64, |at, len| {
            Ok(bytes[at as usize..at as usize + len].to_vec())
        })
    }

    #[test]
    fn a_scan_finds_every_record_up_to_a_torn_write() {
        let mut rng = StdRng::seed_from_u64(3);
        let file = MemFile::default();
        let mut w = SegmentWriter::new(Box::new(file.writer())).unwrap();
        let mut recs = append_random(&mut w, &mut rng, 200, 100);
        // A record longer than the scan's window.
        let big = vec![7u8; SCAN_WINDOW as usize + 10];
        let at = w.append(b"big", 10_000, &big, None).unwrap();
        recs.push(Rec { key: b"big".to_vec(), seq: 10_000, value: big, expiry: None, at });
        let bytes = file.bytes();
        let s = scan(&bytes).unwrap();
        assert_eq!((s.num_records(), s.end(), s.torn()), (201, bytes.len() as u64, None));
        assert_eq!(s.largest_seq(), 10_000);
        // Every cut and every damaged record ends the segment there.
        for r in recs.iter().step_by(17) {
            let (offset, len) = r.at;
            let i = recs.iter().position(|x| x.at == r.at).unwrap();
            for cut in [offset, offset + 1, offset + len - 1] {
                let s = scan(&bytes[..cut as usize]).unwrap();
                assert_eq!(s.num_records(), i, "cut at {cut}");
                assert_eq!(s.end(), offset);
                assert_eq!(s.torn().map(|t| t.0), (cut > offset).then_some(offset));
            }
            for flip in [offset, offset + 4, offset + len - 1] {
                let mut bad = bytes.clone();
                bad[flip as usize] ^= 0x40;
                let s = scan(&bad).unwrap();
                assert_eq!((s.num_records(), s.end()), (i, offset), "flip at {flip}");
                assert_eq!(s.torn().map(|t| t.0), Some(offset));
            }
        }
        // Zeros after the records (a file extended but never written) are a torn tail too.
        let mut zeros = bytes.clone();
        zeros.extend_from_slice(&[0; 100]);
        let s = scan(&zeros).unwrap();
        assert_eq!((s.num_records(), s.torn().map(|t| t.0)), (201, Some(bytes.len() as u64)));
    }

    #[test]
    fn a_valid_record_out_of_sequence_order_is_corruption() {
        let mut bytes = Vec::new();
        crate::value::record::encode_record(&mut bytes, b"a", 5, b"x");
        let second = bytes.len() as u64;
        crate::value::record::encode_record(&mut bytes, b"b", 5, b"y");
        let err = scan(&bytes).unwrap_err();
        match err {
            Error::Corruption { offset, .. } => assert_eq!(offset, second),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_scanned_segment_is_cut_back_claimed_resumed_and_sealed() {
        let mut rng = StdRng::seed_from_u64(11);
        let file = MemFile::default();
        let mut w = SegmentWriter::new(Box::new(file.writer())).unwrap();
        let recs = append_random(&mut w, &mut rng, 100, 0);
        let bytes = file.bytes();
        let mut s = scan(&bytes).unwrap();
        // The log acknowledged the first 60 records.
        let through = recs[59].seq;
        s.keep_through(through);
        assert_eq!((s.num_records(), s.largest_seq()), (60, through));
        assert_eq!(s.end(), recs[60].at.0);
        // Handles replayed from the log name records exactly.
        let r = &recs[10];
        assert!(!s.claim(&r.key, r.seq + 1, r.at.0, r.at.1, None));
        assert!(!s.claim(&r.key, r.seq, r.at.0, r.at.1 + 1, None));
        assert!(!s.claim(&r.key, r.seq, r.at.0 + 1, r.at.1, None));
        assert!(!s.claim(b"other", r.seq, r.at.0, r.at.1, None));
        let cut = &recs[60];
        assert!(!s.claim(&cut.key, cut.seq, cut.at.0, cut.at.1, None), "cut off");
        let mut kept: Vec<Rec> = recs[..60].to_vec();
        for r in &kept {
            assert!(s.claim(&r.key, r.seq, r.at.0, r.at.1, r.expiry));
        }
        // Resumed where the kept records end, it takes new records and seals them all.
        let resumed = MemFile::from_bytes(bytes[..s.end() as usize].to_vec());
        assert!(
            SegmentWriter::resume(Box::new(MemFile::from_bytes(bytes.clone()).writer()), s.clone())
                .is_err(),
            "the file must end where the kept records do"
        );
        let mut w = SegmentWriter::resume(Box::new(resumed.writer()), s).unwrap();
        assert!(w.append(b"k", through, b"", None).is_err(), "sequence order holds on");
        kept.extend(append_random(&mut w, &mut rng, 20, through));
        w.seal(&opts(128)).unwrap();
        check_sealed(&open(&resumed), &kept);
    }
}

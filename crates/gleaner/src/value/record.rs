//! Records: the `(key, seq, value)` entries of a value table's record region, their encoding,
//! verification, and a walker over a buffer of consecutive records.
//!
//! ```text
//! record = masked crc32c: u32 | key_len: varint32 | seq: u64 | value_len: varint64 | key | value
//! ```
//!
//! The CRC covers every byte after it. Varints are minimal, so a record's length is a function of
//! its key and value lengths ([`encoded_record_len`]). Records are never compressed.

use bytes::{Buf, Bytes};

use crate::checksum;
use crate::coding::{Decoder, decode_fixed32, put_fixed64, put_varint32, put_varint64};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use crate::key::MAX_SEQUENCE;
use crate::options::MAX_KEY_SIZE;
use crate::table::format::MAX_VALUE_LEN;

/// Bytes of the masked CRC32C at the start of every record.
pub const RECORD_CRC_LEN: usize = 4;

/// Shortest possible record: CRC, 1-byte key length, sequence number, 1-byte value length, with
/// an empty key and an empty value (14 bytes).
pub const MIN_RECORD_LEN: u64 = (RECORD_CRC_LEN + 1 + 8 + 1) as u64;

/// Longest possible record: a [`MAX_KEY_SIZE`] key and a [`MAX_VALUE_LEN`] value with their
/// header (64 KiB + 256 MiB + 20 bytes).
pub const MAX_RECORD_LEN: u64 = encoded_record_len(MAX_KEY_SIZE, MAX_VALUE_LEN);

/// Length of the minimal LEB128 encoding of `v`.
pub(crate) const fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Length of a record's header (CRC, the two length varints and the sequence number).
pub const fn record_header_len(key_len: usize, value_len: usize) -> usize {
    RECORD_CRC_LEN + varint_len(key_len as u64) + 8 + varint_len(value_len as u64)
}

/// Total encoded length of a record with a `key_len`-byte key and a `value_len`-byte value.
pub const fn encoded_record_len(key_len: usize, value_len: usize) -> u64 {
    (record_header_len(key_len, value_len) + key_len + value_len) as u64
}

/// The limits every written record keeps: `Error::InvalidArgument` naming the limit when the key
/// exceeds [`MAX_KEY_SIZE`], the value [`MAX_VALUE_LEN`] or the sequence number [`MAX_SEQUENCE`].
pub(crate) fn check_record_limits(user_key: &[u8], seq: u64, value: &[u8]) -> Result<()> {
    if user_key.len() > MAX_KEY_SIZE {
        return Err(Error::invalid(format!(
            "key of {} bytes exceeds the limit of {MAX_KEY_SIZE}",
            user_key.len()
        )));
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::invalid(format!(
            "value of {} bytes exceeds the value-table limit of {MAX_VALUE_LEN}",
            value.len()
        )));
    }
    if seq > MAX_SEQUENCE {
        return Err(Error::invalid(format!(
            "sequence number {seq} exceeds {MAX_SEQUENCE}"
        )));
    }
    Ok(())
}

/// Appends a record's CRC, header and key to `dst`; the caller appends `value` itself (so a
/// large value is never copied into a staging buffer). The CRC covers the value too. Limits are
/// the caller's to check: `key` at most [`MAX_KEY_SIZE`], `value` at most [`MAX_VALUE_LEN`],
/// `seq` at most [`MAX_SEQUENCE`].
pub(crate) fn encode_record_prefix(dst: &mut Vec<u8>, key: &[u8], seq: u64, value: &[u8]) {
    let start = dst.len();
    dst.extend_from_slice(&[0; RECORD_CRC_LEN]);
    put_varint32(dst, key.len() as u32);
    put_fixed64(dst, seq);
    put_varint64(dst, value.len() as u64);
    dst.extend_from_slice(key);
    let crc = checksum::crc32c(&dst[start + RECORD_CRC_LEN..]);
    let crc = checksum::mask(checksum::crc32c_extend(crc, value));
    dst[start..start + RECORD_CRC_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// Writes the record `(key, seq, value)` to `file`: its prefix, encoded in `buf` (cleared
/// first; reused across records), then the value as it is, without copying it. Returns the
/// record's length. What a value table's builder and a value segment's writer append.
pub(crate) fn write_record(
    file: &mut dyn WritableFile,
    buf: &mut Vec<u8>,
    key: &[u8],
    seq: u64,
    value: &[u8],
) -> Result<u64> {
    buf.clear();
    encode_record_prefix(buf, key, seq, value);
    file.append(buf)?;
    if !value.is_empty() {
        file.append(value)?;
    }
    Ok((buf.len() + value.len()) as u64)
}

/// Appends a whole record to `dst` (the builder writes the value separately; this form serves
/// tests and tools). The limits of [`decode_record`] are not checked here.
pub fn encode_record(dst: &mut Vec<u8>, key: &[u8], seq: u64, value: &[u8]) {
    encode_record_prefix(dst, key, seq, value);
    dst.extend_from_slice(value);
}

/// A decoded, verified record borrowing its key and value from the buffer it was read into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The user key.
    pub key: &'a [u8],
    /// The sequence number of the write that stored the value.
    pub seq: u64,
    /// The value.
    pub value: &'a [u8],
}

/// A verified record that owns its key and value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnedRecord {
    /// The user key.
    pub key: Vec<u8>,
    /// The sequence number of the write that stored the value.
    pub seq: u64,
    /// The value: a view of the buffer the record was read into when it came from
    /// [`OwnedRecord::from_buffer`], so handing it on (to the value cache, to a reader) copies
    /// nothing.
    pub value: Bytes,
}

impl From<RecordRef<'_>> for OwnedRecord {
    fn from(r: RecordRef<'_>) -> Self {
        OwnedRecord {
            key: r.key.to_vec(),
            seq: r.seq,
            value: Bytes::copy_from_slice(r.value),
        }
    }
}

impl OwnedRecord {
    /// Decodes the record that exactly fills `buf` (read from `offset` of `file`) and keeps the
    /// buffer as the value's storage: the value is a view of its tail, so no byte of it is
    /// copied or moved. The view holds the whole buffer, the record's header and key too (a
    /// few dozen bytes beside a separated value). Errors as [`decode_record`].
    pub(crate) fn from_buffer(buf: Vec<u8>, file: &str, offset: u64) -> Result<OwnedRecord> {
        let (key_range, seq, value_start) = {
            let r = decode_record(&buf, file, offset)?;
            let value_start = buf.len() - r.value.len();
            let key_start = value_start - r.key.len();
            (key_start..value_start, r.seq, value_start)
        };
        let key = buf[key_range].to_vec();
        // Advanced, not sliced: a slice is a clone, which would allocate the shared buffer's
        // reference count on every read; a buffer filled to its capacity becomes `Bytes`
        // without one.
        let mut value = Bytes::from(buf);
        value.advance(value_start);
        Ok(OwnedRecord { key, seq, value })
    }
}

/// A parsed record header.
#[derive(Debug, Clone, Copy)]
struct Header {
    key_len: usize,
    seq: u64,
    value_len: usize,
    header_len: usize,
}

impl Header {
    fn record_len(&self) -> usize {
        self.header_len + self.key_len + self.value_len
    }
}

/// The whole length of the record whose header starts `buf` (at least its first 20 bytes, or
/// all that is left of the file), once the header parses within the limits; the error says what
/// is wrong. Nothing past the header is checked: the CRC needs the whole record.
pub(crate) fn record_len_from_header(buf: &[u8]) -> std::result::Result<u64, String> {
    parse_header(buf).map(|h| h.record_len() as u64)
}

/// Parses and bounds the header at the start of `buf`; the error describes what is wrong.
fn parse_header(buf: &[u8]) -> std::result::Result<Header, String> {
    let truncated = || {
        format!(
            "header truncated or malformed ({} bytes available)",
            buf.len()
        )
    };
    let Some(rest) = buf.get(RECORD_CRC_LEN..) else {
        return Err(truncated());
    };
    let mut d = Decoder::new(rest);
    let key_len = d.varint32().ok_or_else(truncated)? as usize;
    if key_len > MAX_KEY_SIZE {
        return Err(format!(
            "key length {key_len} exceeds the limit of {MAX_KEY_SIZE}"
        ));
    }
    let seq = d.fixed64().ok_or_else(truncated)?;
    if seq > MAX_SEQUENCE {
        return Err(format!(
            "sequence number {seq} exceeds the limit of {MAX_SEQUENCE}"
        ));
    }
    let value_len = d.varint64().ok_or_else(truncated)?;
    if value_len > MAX_VALUE_LEN as u64 {
        return Err(format!(
            "value length {value_len} exceeds the limit of {MAX_VALUE_LEN}"
        ));
    }
    let value_len = value_len as usize;
    let header_len = RECORD_CRC_LEN + d.position();
    if header_len != record_header_len(key_len, value_len) {
        return Err("header has a non-minimal varint".into());
    }
    Ok(Header {
        key_len,
        seq,
        value_len,
        header_len,
    })
}

/// Decodes and verifies the record that exactly fills `buf`, read from `offset` of `file` (both
/// only name the record in errors).
///
/// Fails with `Error::Corruption { file, offset, .. }` when the header is truncated or has a
/// non-minimal varint, the key exceeds [`MAX_KEY_SIZE`], the value exceeds [`MAX_VALUE_LEN`],
/// the sequence number exceeds [`MAX_SEQUENCE`], the declared lengths do not fill `buf` exactly
/// (a handle with a wrong length or an offset not at a record start), or the CRC does not match.
pub fn decode_record<'a>(buf: &'a [u8], file: &str, offset: u64) -> Result<RecordRef<'a>> {
    let corrupt =
        |detail: String| Error::corruption(file, offset, format!("value record: {detail}"));
    let h = parse_header(buf).map_err(corrupt)?;
    if h.record_len() != buf.len() {
        return Err(corrupt(format!(
            "a {}-byte key and a {}-byte value make a {}-byte record, but the record is {} bytes \
             (wrong length or not a record start)",
            h.key_len,
            h.value_len,
            h.record_len(),
            buf.len()
        )));
    }
    let stored = checksum::unmask(decode_fixed32(buf));
    let actual = checksum::crc32c(&buf[RECORD_CRC_LEN..]);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    let key_end = h.header_len + h.key_len;
    Ok(RecordRef {
        key: &buf[h.header_len..key_end],
        seq: h.seq,
        value: &buf[key_end..],
    })
}

/// Walks a buffer of consecutive records (a coalesced read of the record region, as returned
/// by [`ValueTable::read_range`](super::ValueTable::read_range)), yielding each record's file
/// offset and contents.
///
/// Each record is verified as by [`decode_record`]. A damaged record, or a last record that
/// runs past the end of the buffer, yields one `Error::Corruption` at that record's file offset,
/// after which the walker is exhausted.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    base_offset: u64,
    pos: usize,
    file: &'a str,
    done: bool,
}

impl<'a> RecordIter<'a> {
    /// A walker over `buf`, whose first byte is at `base_offset` of `file` (which names the file
    /// in errors). The buffer must start at a record boundary.
    pub fn new(buf: &'a [u8], base_offset: u64, file: &'a str) -> Self {
        RecordIter {
            buf,
            base_offset,
            pos: 0,
            file,
            done: false,
        }
    }

    /// File offset of the next record to be parsed (just past the last record yielded).
    pub fn next_offset(&self) -> u64 {
        self.base_offset.saturating_add(self.pos as u64)
    }

    fn parse(&mut self) -> Result<(u64, RecordRef<'a>)> {
        let at = self.next_offset();
        let rest = &self.buf[self.pos..];
        let h = parse_header(rest)
            .map_err(|d| Error::corruption(self.file, at, format!("value record: {d}")))?;
        let len = h.record_len();
        if len > rest.len() {
            return Err(Error::corruption(
                self.file,
                at,
                format!(
                    "value record of {len} bytes runs past the end of the buffer ({} bytes left)",
                    rest.len()
                ),
            ));
        }
        let record = decode_record(&rest[..len], self.file, at)?;
        self.pos += len;
        Ok((at, record))
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<(u64, RecordRef<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.parse();
        self.done = r.is_err();
        Some(r)
    }
}

impl std::iter::FusedIterator for RecordIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(key: &[u8], seq: u64, value: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_record(&mut v, key, seq, value);
        assert_eq!(v.len() as u64, encoded_record_len(key.len(), value.len()));
        v
    }

    fn is_corruption_at(r: Result<impl std::fmt::Debug>, at: u64) {
        match r {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file.as_str(), offset), ("v.vst", at));
            }
            other => panic!("expected corruption at {at}, got {other:?}"),
        }
    }

    #[test]
    fn limits() {
        assert_eq!(MIN_RECORD_LEN, enc(b"", 0, b"").len() as u64);
        assert_eq!(
            MAX_RECORD_LEN,
            (4 + 3 + 8 + 5 + MAX_KEY_SIZE + MAX_VALUE_LEN) as u64
        );
        for v in [0u64, 1, 127, 128, 16383, 16384, u64::MAX] {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            assert_eq!(varint_len(v), b.len(), "{v}");
        }
    }

    #[test]
    fn layout_and_round_trip() {
        let buf = enc(b"key", 0x0102, b"value");
        // crc | key_len | seq | value_len | key | value
        assert_eq!(buf[4], 3);
        assert_eq!(&buf[5..13], &0x0102u64.to_le_bytes());
        assert_eq!(buf[13], 5);
        assert_eq!(&buf[14..17], b"key");
        assert_eq!(&buf[17..], b"value");
        let crc = checksum::unmask(decode_fixed32(&buf));
        assert_eq!(crc, checksum::crc32c(&buf[4..]));

        let r = decode_record(&buf, "v.vst", 0).unwrap();
        assert_eq!(
            (r.key, r.seq, r.value),
            (&b"key"[..], 0x0102, &b"value"[..])
        );
        let owned = OwnedRecord::from_buffer(buf.clone(), "v.vst", 0).unwrap();
        assert_eq!(owned, OwnedRecord::from(r));

        let empty = enc(b"", MAX_SEQUENCE, b"");
        let r = decode_record(&empty, "v.vst", 0).unwrap();
        assert_eq!((r.key, r.seq, r.value), (&b""[..], MAX_SEQUENCE, &b""[..]));
    }

    #[test]
    fn every_flipped_bit_and_every_wrong_length_is_corruption() {
        let buf = enc(b"some key", 77, &[9u8; 300]);
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                is_corruption_at(decode_record(&bad, "v.vst", 40), 40);
            }
        }
        for len in 0..buf.len() {
            is_corruption_at(decode_record(&buf[..len], "v.vst", 1), 1);
        }
        let mut longer = buf.clone();
        longer.push(0);
        is_corruption_at(decode_record(&longer, "v.vst", 1), 1);
        // A suffix (an offset not at the record start) is not a record either.
        for start in 1..buf.len() {
            is_corruption_at(decode_record(&buf[start..], "v.vst", 2), 2);
        }
    }

    /// Builds a record with a correct CRC over an arbitrary header.
    fn forge(header: &[u8], body: &[u8]) -> Vec<u8> {
        let mut v = vec![0; 4];
        v.extend_from_slice(header);
        v.extend_from_slice(body);
        let crc = checksum::mask(checksum::crc32c(&v[4..]));
        v[..4].copy_from_slice(&crc.to_le_bytes());
        v
    }

    #[test]
    fn limits_and_non_minimal_varints_are_corruption_despite_a_good_crc() {
        let mut h = Vec::new();
        put_varint32(&mut h, (MAX_KEY_SIZE + 1) as u32);
        put_fixed64(&mut h, 1);
        put_varint64(&mut h, 0);
        let err = decode_record(&forge(&h, &vec![0; MAX_KEY_SIZE + 1]), "v.vst", 0).unwrap_err();
        assert!(err.to_string().contains("key length"), "{err}");

        let mut h = Vec::new();
        put_varint32(&mut h, 0);
        put_fixed64(&mut h, 1);
        put_varint64(&mut h, MAX_VALUE_LEN as u64 + 1);
        let err = decode_record(&forge(&h, &[]), "v.vst", 0).unwrap_err();
        assert!(err.to_string().contains("value length"), "{err}");

        let mut h = Vec::new();
        put_varint32(&mut h, 0);
        put_fixed64(&mut h, MAX_SEQUENCE + 1);
        put_varint64(&mut h, 0);
        let err = decode_record(&forge(&h, &[]), "v.vst", 0).unwrap_err();
        assert!(err.to_string().contains("sequence"), "{err}");

        // key_len 1 encoded in two bytes.
        let mut h = vec![0x81, 0x00];
        put_fixed64(&mut h, 1);
        put_varint64(&mut h, 0);
        let err = decode_record(&forge(&h, b"k"), "v.vst", 0).unwrap_err();
        assert!(err.to_string().contains("non-minimal"), "{err}");
    }

    #[test]
    fn walker_yields_offsets_and_stops_at_damage() {
        let recs: Vec<(Vec<u8>, u64, Vec<u8>)> = (0..20u64)
            .map(|i| {
                (
                    format!("k{i:03}").into_bytes(),
                    100 - i,
                    vec![i as u8; (i * 37 % 200) as usize],
                )
            })
            .collect();
        let mut buf = Vec::new();
        let mut offsets = Vec::new();
        for (k, s, v) in &recs {
            offsets.push(1000 + buf.len() as u64);
            encode_record(&mut buf, k, *s, v);
        }
        let got: Vec<_> = RecordIter::new(&buf, 1000, "v.vst")
            .map(|r| r.unwrap())
            .map(|(o, r)| (o, r.key.to_vec(), r.seq, r.value.to_vec()))
            .collect();
        let want: Vec<_> = recs
            .iter()
            .zip(&offsets)
            .map(|((k, s, v), o)| (*o, k.clone(), *s, v.clone()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(RecordIter::new(&[], 5, "v.vst").count(), 0);

        // A truncated tail: every complete record, then one error at the partial one.
        let cut = (offsets[7] - 1000) as usize + 3;
        let mut it = RecordIter::new(&buf[..cut], 1000, "v.vst");
        for want in &offsets[..7] {
            assert_eq!(it.next().unwrap().unwrap().0, *want);
        }
        is_corruption_at(it.next().unwrap(), offsets[7]);
        assert!(it.next().is_none());

        // A flipped byte inside record 4: records 0..4, then corruption at record 4.
        let mut bad = buf.clone();
        bad[(offsets[4] - 1000) as usize + 10] ^= 0x10;
        let results: Vec<_> = RecordIter::new(&bad, 1000, "v.vst").collect();
        assert_eq!(results.len(), 5);
        is_corruption_at(results[4].clone(), offsets[4]);
    }

    #[test]
    fn walker_survives_random_garbage() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let len = (x % 64) as usize;
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            for r in RecordIter::new(&buf, u64::MAX - 3, "v.vst") {
                let _ = r;
            }
        }
    }
}

//! The fixed parts of the value-table format: version, magic, limits and the footer.
//! docs/format.md ("Value table") is the byte-level specification; keep the two in step.

use crate::checksum;
use crate::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};
use crate::error::{Error, Result};
use crate::table::BlockHandle;

/// The value-table format version this code writes for a table whose records do not expire
/// (the oldest it reads).
pub const FORMAT_VERSION: u32 = 1;

/// The format version of a table holding records with an expiry (issue 26): its dense index
/// entries may carry a third varint, the expiry, and its properties count the expiring records.
pub const FORMAT_VERSION_EXPIRY: u32 = 2;

/// The format version of a *value segment* (issue 32): records in the order they were written,
/// not in key order, with format 2's dense index entries and properties (expiring records or
/// none). The dense index is still in internal-key order, built when the segment is sealed.
/// The newest version this code reads.
pub const FORMAT_VERSION_WRITE_ORDER: u32 = 3;

/// The last eight bytes of every value table.
pub const MAGIC: [u8; 8] = *b"GlnrVTbl";

/// Size of the footer in bytes. As in key tables, the last 16 bytes (version, CRC, magic) keep
/// their position in every future version, so a reader can always name a version it cannot read.
pub const FOOTER_LEN: usize = 64;

/// Offset of the reserved (zero) bytes in the footer.
const RESERVED_START: usize = 32;
/// Offset of the format version in the footer; also the end of the reserved bytes.
const VERSION_AT: usize = 48;
/// Offset of the masked CRC in the footer.
const CRC_AT: usize = 52;
/// Offset of the magic in the footer.
const MAGIC_AT: usize = 56;

/// The fixed-size footer at the end of every value table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The top index block: one entry per dense index block.
    pub top_index: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// The format version the table was written in.
    pub format_version: u32,
}

impl Footer {
    /// Encodes the footer: two handles as fixed `u64` pairs, 16 reserved zero bytes, the
    /// version, the masked CRC of the 52 bytes before it, and the magic.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut buf = Vec::with_capacity(FOOTER_LEN);
        for h in [self.top_index, self.properties] {
            put_fixed64(&mut buf, h.offset);
            put_fixed64(&mut buf, h.size);
        }
        buf.resize(VERSION_AT, 0);
        put_fixed32(&mut buf, self.format_version);
        let crc = checksum::mask(checksum::crc32c(&buf));
        put_fixed32(&mut buf, crc);
        buf.extend_from_slice(&MAGIC);
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&buf);
        out
    }

    /// Decodes and verifies a footer read from `offset` of `file`. Checks, in this order, the
    /// length, the magic, the version (an unknown version is `Error::Corruption` naming it), the
    /// CRC, and that the reserved bytes are zero; any failure is `Error::Corruption` at
    /// `offset`. The caller checks the handles against the file.
    pub fn decode(buf: &[u8], file: &str, offset: u64) -> Result<Footer> {
        let corrupt = |detail: String| Error::corruption(file, offset, detail);
        if buf.len() != FOOTER_LEN {
            return Err(corrupt(format!(
                "value-table footer is {} bytes, expected {FOOTER_LEN}",
                buf.len()
            )));
        }
        if buf[MAGIC_AT..] != MAGIC {
            return Err(corrupt(format!(
                "bad magic number {:02x?} (not a value table, or truncated)",
                &buf[MAGIC_AT..]
            )));
        }
        let format_version = decode_fixed32(&buf[VERSION_AT..]);
        if !(FORMAT_VERSION..=FORMAT_VERSION_WRITE_ORDER).contains(&format_version) {
            return Err(corrupt(format!(
                "unknown value-table format version {format_version} (this build reads versions \
                 {FORMAT_VERSION} to {FORMAT_VERSION_WRITE_ORDER})"
            )));
        }
        let stored = checksum::unmask(decode_fixed32(&buf[CRC_AT..]));
        let actual = checksum::crc32c(&buf[..CRC_AT]);
        if stored != actual {
            return Err(corrupt(format!(
                "value-table footer checksum mismatch: stored {stored:#010x}, computed \
                 {actual:#010x}"
            )));
        }
        if buf[RESERVED_START..VERSION_AT].iter().any(|&b| b != 0) {
            return Err(corrupt(
                "value-table footer has non-zero reserved bytes".into(),
            ));
        }
        let handle = |at: usize| BlockHandle {
            offset: decode_fixed64(&buf[at..]),
            size: decode_fixed64(&buf[at + 8..]),
        };
        Ok(Footer {
            top_index: handle(0),
            properties: handle(16),
            format_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Footer {
        Footer {
            top_index: BlockHandle {
                offset: 1 << 33,
                size: 300,
            },
            properties: BlockHandle {
                offset: (1 << 33) + 305,
                size: 90,
            },
            format_version: FORMAT_VERSION,
        }
    }

    #[test]
    fn layout_is_frozen() {
        let buf = sample().encode();
        assert_eq!(decode_fixed64(&buf[0..]), 1 << 33);
        assert_eq!(decode_fixed64(&buf[8..]), 300);
        assert_eq!(decode_fixed64(&buf[16..]), (1 << 33) + 305);
        assert_eq!(decode_fixed64(&buf[24..]), 90);
        assert!(buf[32..48].iter().all(|&b| b == 0));
        assert_eq!(decode_fixed32(&buf[48..]), 1);
        assert_eq!(&buf[56..], b"GlnrVTbl");
    }

    #[test]
    fn round_trip_and_every_flipped_byte_is_caught() {
        let f = sample();
        let buf = f.encode();
        assert_eq!(Footer::decode(&buf, "t.vst", 9).unwrap(), f);
        for i in 0..FOOTER_LEN {
            for mask in [0x01, 0x80, 0xff] {
                let mut bad = buf;
                bad[i] ^= mask;
                let err = Footer::decode(&bad, "t.vst", 9).unwrap_err();
                match err {
                    Error::Corruption { file, offset, .. } => {
                        assert_eq!((file.as_str(), offset), ("t.vst", 9), "byte {i}");
                    }
                    other => panic!("byte {i}: {other:?}"),
                }
            }
        }
        assert!(
            Footer::decode(&buf[1..], "t", 0)
                .unwrap_err()
                .is_corruption()
        );
    }

    #[test]
    fn unknown_versions_and_key_table_footers_are_named() {
        let mut v4 = sample().encode();
        v4[48] = 4;
        let err = Footer::decode(&v4, "t", 0).unwrap_err().to_string();
        assert!(err.contains("version 4"), "{err}");

        let kt = crate::table::Footer {
            index: BlockHandle::default(),
            handle_index: None,
            filter: None,
            properties: BlockHandle::default(),
            format_version: 1,
        }
        .encode();
        let err = Footer::decode(&kt, "t", 0).unwrap_err().to_string();
        assert!(err.contains("magic"), "{err}");
    }

    #[test]
    fn reserved_bytes_must_be_zero() {
        let mut buf = sample().encode();
        buf[40] = 1;
        let crc = checksum::mask(checksum::crc32c(&buf[..CRC_AT]));
        buf[CRC_AT..MAGIC_AT].copy_from_slice(&crc.to_le_bytes());
        let err = Footer::decode(&buf, "t", 0).unwrap_err().to_string();
        assert!(err.contains("reserved"), "{err}");
    }
}

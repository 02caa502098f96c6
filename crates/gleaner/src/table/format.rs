//! The fixed parts of the key-table format: limits, compression codes, block handles and the
//! footer. docs/format.md ("Key table") is the byte-level specification; keep the two in step.

use crate::checksum;
use crate::coding::{Decoder, decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};
use crate::error::{Error, Result};
use crate::key::TRAILER_LEN;

/// Format version of the mixed layout ([`KeyTableLayout::Mixed`]): one kind of data block holds
/// inline values, tombstones and value handles.
pub const FORMAT_VERSION_MIXED: u32 = 1;

/// Format version of the index-decoupled layout ([`KeyTableLayout::IndexDecoupled`]): data
/// blocks hold inline values and tombstones, handle blocks hold value handles, each with its own
/// index.
pub const FORMAT_VERSION_INDEX_DECOUPLED: u32 = 2;

/// The format version written by default ([`KeyTableLayout::default`], the mixed layout). A
/// reader accepts every version that [`KeyTableLayout::from_format_version`] knows.
pub const FORMAT_VERSION: u32 = FORMAT_VERSION_MIXED;

/// How a key table arranges its entries; each layout is its own footer format version, so every
/// table records which one it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum KeyTableLayout {
    /// Format version 1: inline values, tombstones and value handles share the data blocks and
    /// one index. The default, readable by every Gleaner version.
    #[default]
    Mixed,
    /// Format version 2 (Scavenger's IndexDecoupledTable): data blocks hold only inline values
    /// and tombstones, *handle blocks* hold only value handles, and each part has its own index,
    /// so a GC validity lookup ([`Table::get_key`](super::Table::get_key)) reads no data block of
    /// a separated key.
    IndexDecoupled,
}

impl KeyTableLayout {
    /// The footer format version of this layout.
    pub fn format_version(self) -> u32 {
        match self {
            KeyTableLayout::Mixed => FORMAT_VERSION_MIXED,
            KeyTableLayout::IndexDecoupled => FORMAT_VERSION_INDEX_DECOUPLED,
        }
    }

    /// The layout a footer format version denotes; `None` for a version this build cannot read.
    pub fn from_format_version(version: u32) -> Option<Self> {
        match version {
            FORMAT_VERSION_MIXED => Some(KeyTableLayout::Mixed),
            FORMAT_VERSION_INDEX_DECOUPLED => Some(KeyTableLayout::IndexDecoupled),
            _ => None,
        }
    }

    /// Stable name for tools and stats: `"mixed"` or `"index-decoupled"`.
    pub fn name(self) -> &'static str {
        match self {
            KeyTableLayout::Mixed => "mixed",
            KeyTableLayout::IndexDecoupled => "index-decoupled",
        }
    }

    /// Inverse of [`KeyTableLayout::name`]; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "mixed" => Some(KeyTableLayout::Mixed),
            "index-decoupled" => Some(KeyTableLayout::IndexDecoupled),
            _ => None,
        }
    }
}

/// One of the two parts of an index-decoupled key table. A mixed table has only a data part
/// (which then holds value handles too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TablePart {
    /// Data blocks and the (data) index: inline values and tombstones, plus value handles in a
    /// mixed table.
    Data,
    /// Handle blocks and the handle index of an index-decoupled table: value handles only.
    Handles,
}

impl TablePart {
    /// Name used in error messages and dumps: `"data"` or `"handle"`.
    pub fn name(self) -> &'static str {
        match self {
            TablePart::Data => "data",
            TablePart::Handles => "handle",
        }
    }
}

/// The last eight bytes of every key table.
pub const MAGIC: [u8; 8] = *b"GlnrKTbl";

/// Size of the footer in bytes. The last 16 bytes of the footer (version, CRC, magic) keep their
/// position in every future version, so a reader can always name the version it cannot read.
pub const FOOTER_LEN: usize = 64;

/// Bytes that follow every block's contents on disk: a type byte and a masked CRC32C.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Longest user key a key table accepts (64 KiB, the engine-wide key limit).
pub const MAX_USER_KEY_LEN: usize = 64 << 10;

/// Longest internal key: the longest user key plus its 8-byte trailer.
pub const MAX_INTERNAL_KEY_LEN: usize = MAX_USER_KEY_LEN + TRAILER_LEN;

/// Longest value stored inline in a key table (256 MiB, the engine's default value cap). Longer
/// values must be separated into value tables.
pub const MAX_VALUE_LEN: usize = 256 << 20;

/// Largest accepted [`TableBuilderOptions::block_size`](super::TableBuilderOptions) (64 MiB).
pub const MAX_BLOCK_SIZE: usize = 64 << 20;

/// Largest uncompressed contents of any block (data, index, filter or properties):
/// [`MAX_BLOCK_SIZE`] + [`MAX_VALUE_LEN`] + 128 KiB.
///
/// A data block is cut as soon as it reaches the block size, so it exceeds the block size by at
/// most one entry (three 5-byte varints, a key of at most [`MAX_INTERNAL_KEY_LEN`], a value of at
/// most [`MAX_VALUE_LEN`], a 4-byte restart slot); 128 KiB covers the key, the varints and the
/// restart slot with room to spare. The builder refuses to write any block larger than this, and
/// a reader rejects a handle or a decompressed size above it before allocating.
pub const MAX_BLOCK_CONTENTS: usize = MAX_BLOCK_SIZE + MAX_VALUE_LEN + (128 << 10);

// A version-2 footer stores block sizes as u32: no block the builder writes (stored contents are
// never larger than the raw contents) or a reader accepts can be larger.
const _: () = assert!(MAX_BLOCK_CONTENTS <= u32::MAX as usize);

/// Block type byte: the contents are stored as they are.
pub const BLOCK_TYPE_NONE: u8 = 0;
/// Block type byte: the contents are a 4-byte little-endian decompressed size followed by an LZ4
/// block.
pub const BLOCK_TYPE_LZ4: u8 = 1;

/// How the builder compresses blocks. Each block records its own type byte, so a table built
/// with [`Compression::Lz4`] may still hold uncompressed blocks (those LZ4 did not shrink enough).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Store every block uncompressed.
    None,
    /// Compress each block with LZ4; keep the result only if it saves at least 12.5%. The
    /// default (DESIGN.md: key tables are lz4).
    #[default]
    Lz4,
}

impl Compression {
    /// Stable name, as stored in the `compression` table property: `"none"` or `"lz4"`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }

    /// Inverse of [`Compression::name`]; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            _ => None,
        }
    }
}

/// Where a block lives in a key table: its offset and the size of its stored contents, which
/// excludes the [`BLOCK_TRAILER_LEN`]-byte trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte in the file.
    pub offset: u64,
    /// Length of the stored (possibly compressed) contents, without the trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Longest varint encoding of a handle (two 10-byte varints).
    pub const MAX_ENCODED_LEN: usize = 20;

    /// Appends the handle as two varints (offset, size); the form used in index entries.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        crate::coding::put_varint64(dst, self.offset);
        crate::coding::put_varint64(dst, self.size);
    }

    /// Decodes a handle written by [`BlockHandle::encode_to`]; `None` when `src` is truncated,
    /// malformed, or has bytes left over (an index value is exactly one handle).
    pub fn decode(src: &[u8]) -> Option<Self> {
        let mut d = Decoder::new(src);
        let offset = d.varint64()?;
        let size = d.varint64()?;
        d.is_empty().then_some(BlockHandle { offset, size })
    }

    /// Offset one past the block's trailer, or `None` on overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }

    /// Checks that the block and its trailer lie within `data_end` (the start of the footer) and
    /// that its size is within [`MAX_BLOCK_CONTENTS`]; otherwise `Error::Corruption`.
    pub(crate) fn check_within(&self, data_end: u64, file: &str, what: &str) -> Result<()> {
        if self.size > MAX_BLOCK_CONTENTS as u64 {
            return Err(Error::corruption(
                file,
                self.offset,
                format!(
                    "{what} block size {} exceeds the limit {MAX_BLOCK_CONTENTS}",
                    self.size
                ),
            ));
        }
        match self.end() {
            Some(end) if end <= data_end => Ok(()),
            _ => Err(Error::corruption(
                file,
                self.offset,
                format!(
                    "{what} block (offset {}, size {}) extends past the end of the block area at {data_end}",
                    self.offset, self.size
                ),
            )),
        }
    }
}

/// The fixed-size footer at the end of every key table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The (data) index block: one entry per data block.
    pub index: BlockHandle,
    /// The handle index block (one entry per handle block): `Some` exactly in an
    /// index-decoupled (version 2) table, whose footer always records one.
    pub handle_index: Option<BlockHandle>,
    /// The bloom filter block; `None` when the table was built without a filter (stored as
    /// offset 0, size 0, which no real filter block can have).
    pub filter: Option<BlockHandle>,
    /// The properties block.
    pub properties: BlockHandle,
    /// The format version the table was written in (it names the layout).
    pub format_version: u32,
}

impl Footer {
    /// The layout the footer's version denotes. [`Footer::decode`] only returns footers of known
    /// versions; a hand-made footer of an unknown version counts as mixed.
    pub fn layout(&self) -> KeyTableLayout {
        KeyTableLayout::from_format_version(self.format_version).unwrap_or_default()
    }

    /// Encodes the footer (see the format document for the layout of each version). Version 1
    /// stores three handles as two u64s each; version 2 stores four handles as a u64 offset and a
    /// u32 size each (every block size fits 32 bits, see [`MAX_BLOCK_CONTENTS`]).
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut buf = Vec::with_capacity(FOOTER_LEN);
        let filter = self.filter.unwrap_or_default();
        if self.format_version == FORMAT_VERSION_INDEX_DECOUPLED {
            let handle_index = self.handle_index.unwrap_or_default();
            for h in [self.index, handle_index, filter, self.properties] {
                put_fixed64(&mut buf, h.offset);
                // Sizes come from written blocks, bounded by MAX_BLOCK_CONTENTS < 2^32.
                debug_assert!(h.size <= u64::from(u32::MAX));
                put_fixed32(&mut buf, u32::try_from(h.size).unwrap_or(u32::MAX));
            }
        } else {
            for h in [self.index, filter, self.properties] {
                put_fixed64(&mut buf, h.offset);
                put_fixed64(&mut buf, h.size);
            }
        }
        debug_assert_eq!(buf.len(), 48);
        put_fixed32(&mut buf, self.format_version);
        let crc = checksum::mask(checksum::crc32c(&buf));
        put_fixed32(&mut buf, crc);
        buf.extend_from_slice(&MAGIC);
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&buf);
        out
    }

    /// Decodes and verifies a footer read from `offset` of `file`: checks the length, the magic,
    /// the version (an unknown version is `Error::Corruption` naming it) and the CRC, in that
    /// order. Handles are checked against the file size by the caller.
    pub fn decode(buf: &[u8], file: &str, offset: u64) -> Result<Footer> {
        let corrupt = |detail: String| Error::corruption(file, offset, detail);
        if buf.len() != FOOTER_LEN {
            return Err(corrupt(format!(
                "footer is {} bytes, expected {FOOTER_LEN}",
                buf.len()
            )));
        }
        if buf[56..64] != MAGIC {
            return Err(corrupt(format!(
                "bad magic number {:02x?} (not a key table, or truncated)",
                &buf[56..64]
            )));
        }
        let format_version = decode_fixed32(&buf[48..52]);
        let Some(layout) = KeyTableLayout::from_format_version(format_version) else {
            return Err(corrupt(format!(
                "unknown key-table format version {format_version} (this build reads versions \
                 {FORMAT_VERSION_MIXED} and {FORMAT_VERSION_INDEX_DECOUPLED})"
            )));
        };
        let stored = checksum::unmask(decode_fixed32(&buf[52..56]));
        let actual = checksum::crc32c(&buf[..52]);
        if stored != actual {
            return Err(corrupt(format!(
                "footer checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        let optional = |h: BlockHandle| (h != BlockHandle::default()).then_some(h);
        Ok(match layout {
            KeyTableLayout::Mixed => {
                let handle = |at: usize| BlockHandle {
                    offset: decode_fixed64(&buf[at..]),
                    size: decode_fixed64(&buf[at + 8..]),
                };
                Footer {
                    index: handle(0),
                    handle_index: None,
                    filter: optional(handle(16)),
                    properties: handle(32),
                    format_version,
                }
            }
            KeyTableLayout::IndexDecoupled => {
                let handle = |at: usize| BlockHandle {
                    offset: decode_fixed64(&buf[at..]),
                    size: u64::from(decode_fixed32(&buf[at + 8..])),
                };
                Footer {
                    index: handle(0),
                    handle_index: Some(handle(12)),
                    filter: optional(handle(24)),
                    properties: handle(36),
                    format_version,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_names_round_trip() {
        for c in [Compression::None, Compression::Lz4] {
            assert_eq!(Compression::from_name(c.name()), Some(c));
        }
        assert_eq!(Compression::from_name("zstd"), None);
        assert_eq!(Compression::default(), Compression::Lz4);
    }

    #[test]
    fn handle_round_trip_and_rejects_trailing_bytes() {
        let h = BlockHandle {
            offset: 1 << 40,
            size: 4096,
        };
        let mut buf = Vec::new();
        h.encode_to(&mut buf);
        assert!(buf.len() <= BlockHandle::MAX_ENCODED_LEN);
        assert_eq!(BlockHandle::decode(&buf), Some(h));
        buf.push(0);
        assert_eq!(BlockHandle::decode(&buf), None);
        assert_eq!(BlockHandle::decode(&buf[..1]), None);
    }

    #[test]
    fn handle_bounds() {
        let h = BlockHandle {
            offset: 100,
            size: 50,
        };
        assert!(h.check_within(155, "t", "data").is_ok());
        assert!(
            h.check_within(154, "t", "data")
                .unwrap_err()
                .is_corruption()
        );
        let huge = BlockHandle {
            offset: u64::MAX - 2,
            size: 10,
        };
        assert!(huge.check_within(u64::MAX, "t", "data").is_err());
        let big = BlockHandle {
            offset: 0,
            size: MAX_BLOCK_CONTENTS as u64 + 1,
        };
        assert!(big.check_within(u64::MAX, "t", "data").is_err());
    }

    #[test]
    fn footer_round_trip_and_checks() {
        let f = Footer {
            index: BlockHandle {
                offset: 10,
                size: 20,
            },
            handle_index: None,
            filter: None,
            properties: BlockHandle {
                offset: 35,
                size: 7,
            },
            format_version: FORMAT_VERSION,
        };
        let buf = f.encode();
        assert_eq!(Footer::decode(&buf, "t", 0).unwrap(), f);
        let with_filter = Footer {
            filter: Some(BlockHandle { offset: 1, size: 2 }),
            ..f
        };
        assert_eq!(
            Footer::decode(&with_filter.encode(), "t", 0).unwrap(),
            with_filter
        );

        // Any flipped byte is caught by the magic, version or CRC check.
        for i in 0..FOOTER_LEN {
            let mut bad = buf;
            bad[i] ^= 0x40;
            let err = Footer::decode(&bad, "t", 0).unwrap_err();
            assert!(err.is_corruption(), "byte {i}");
        }
        let mut v3 = buf;
        v3[48] = 3;
        let err = Footer::decode(&v3, "t", 0).unwrap_err().to_string();
        assert!(err.contains("version 3"), "{err}");
        assert!(Footer::decode(&buf[1..], "t", 0).is_err());
    }

    #[test]
    fn decoupled_footer_round_trip_and_checks() {
        let f = Footer {
            index: BlockHandle {
                offset: 1 << 40,
                size: 20,
            },
            handle_index: Some(BlockHandle {
                offset: 7,
                size: u64::from(u32::MAX),
            }),
            filter: None,
            properties: BlockHandle {
                offset: 35,
                size: 7,
            },
            format_version: FORMAT_VERSION_INDEX_DECOUPLED,
        };
        let buf = f.encode();
        assert_eq!(Footer::decode(&buf, "t", 0).unwrap(), f);
        assert_eq!(f.layout(), KeyTableLayout::IndexDecoupled);
        let with_filter = Footer {
            filter: Some(BlockHandle { offset: 1, size: 2 }),
            ..f
        };
        assert_eq!(
            Footer::decode(&with_filter.encode(), "t", 0).unwrap(),
            with_filter
        );
        for i in 0..FOOTER_LEN {
            let mut bad = buf;
            bad[i] ^= 0x08;
            assert!(
                Footer::decode(&bad, "t", 0).unwrap_err().is_corruption(),
                "byte {i}"
            );
        }
        // A version-1 reading of version-2 bytes (or the reverse) is impossible: the version is
        // covered by the CRC and selects the field layout.
        let mut as_v1 = buf;
        as_v1[48] = 1;
        assert!(Footer::decode(&as_v1, "t", 0).is_err());
    }

    #[test]
    fn layout_names_and_versions() {
        for l in [KeyTableLayout::Mixed, KeyTableLayout::IndexDecoupled] {
            assert_eq!(KeyTableLayout::from_name(l.name()), Some(l));
            assert_eq!(
                KeyTableLayout::from_format_version(l.format_version()),
                Some(l)
            );
        }
        assert_eq!(KeyTableLayout::default(), KeyTableLayout::Mixed);
        assert_eq!(KeyTableLayout::from_format_version(0), None);
        assert_eq!(KeyTableLayout::from_format_version(3), None);
        assert_eq!(KeyTableLayout::from_name("decoupled"), None);
    }
}

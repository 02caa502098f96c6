//! Table properties: counts and bounds recorded when a key table is built, stored as a block of
//! `name → value` entries with plain byte-string keys in byte order.
//!
//! Integers are varints, `compression` is UTF-8 text, keys are raw bytes. Unknown names are
//! ignored on read (a later version may add properties); a missing or malformed known property
//! is `Error::Corruption`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::key::TRAILER_LEN;

use super::block::Block;
use super::block_builder::BlockBuilder;
use super::property_block::{PropertyWriter, read_properties};

/// What a key table holds, recorded by the builder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableProperties {
    /// Number of entries (every version and tombstone counts).
    pub num_entries: u64,
    /// Number of entries whose kind is deletion (kind byte 0).
    pub num_deletions: u64,
    /// Number of data blocks (equals the number of index entries).
    pub num_data_blocks: u64,
    /// Sum of the internal-key lengths of all entries, before prefix compression.
    pub raw_key_bytes: u64,
    /// Sum of the value lengths of all entries.
    pub raw_value_bytes: u64,
    /// Bytes of all data blocks on disk, trailers included.
    pub data_bytes: u64,
    /// Bytes of the index block on disk, trailer included.
    pub index_bytes: u64,
    /// Bytes of the filter block on disk, trailer included; 0 without a filter.
    pub filter_bytes: u64,
    /// Smallest sequence number of any entry; 0 for an empty table.
    pub smallest_seq: u64,
    /// Largest sequence number of any entry; 0 for an empty table.
    pub largest_seq: u64,
    /// The compression the table was built with: `"none"` or `"lz4"` (individual blocks that
    /// did not compress well are stored uncompressed regardless).
    pub compression: String,
    /// The key-table format version.
    pub format_version: u32,
    /// First internal key of the table; empty for an empty table.
    pub smallest_key: Vec<u8>,
    /// Last internal key of the table; empty for an empty table.
    pub largest_key: Vec<u8>,
}

/// Property names, in the byte order the block requires. Every one is required in version 1.
const NAMES: [&str; 14] = [
    "compression",
    "data_bytes",
    "filter_bytes",
    "format_version",
    "index_bytes",
    "largest_key",
    "largest_seq",
    "num_data_blocks",
    "num_deletions",
    "num_entries",
    "raw_key_bytes",
    "raw_value_bytes",
    "smallest_key",
    "smallest_seq",
];

impl TableProperties {
    /// Adds every property to `block` (an empty builder with any restart interval), in order.
    pub(crate) fn encode_to(&self, block: &mut BlockBuilder) {
        let mut w = PropertyWriter::new(block);
        w.bytes(NAMES[0], self.compression.as_bytes());
        w.int(NAMES[1], self.data_bytes);
        w.int(NAMES[2], self.filter_bytes);
        w.int(NAMES[3], u64::from(self.format_version));
        w.int(NAMES[4], self.index_bytes);
        w.bytes(NAMES[5], &self.largest_key);
        w.int(NAMES[6], self.largest_seq);
        w.int(NAMES[7], self.num_data_blocks);
        w.int(NAMES[8], self.num_deletions);
        w.int(NAMES[9], self.num_entries);
        w.int(NAMES[10], self.raw_key_bytes);
        w.int(NAMES[11], self.raw_value_bytes);
        w.bytes(NAMES[12], &self.smallest_key);
        w.int(NAMES[13], self.smallest_seq);
    }

    /// Decodes a properties block. Every known property must appear exactly once and parse;
    /// unknown names are skipped. A non-empty table's smallest and largest keys must be
    /// internal keys (at least 8 bytes).
    pub(crate) fn decode(block: Arc<Block>) -> Result<TableProperties> {
        let (file, offset) = (block.file_name().to_owned(), block.offset());
        let mut p = TableProperties::default();
        read_properties(block, &NAMES, |i, v| {
            match i {
                0 => p.compression = v.text()?,
                1 => p.data_bytes = v.int()?,
                2 => p.filter_bytes = v.int()?,
                3 => p.format_version = v.int32()?,
                4 => p.index_bytes = v.int()?,
                5 => p.largest_key = v.bytes(),
                6 => p.largest_seq = v.int()?,
                7 => p.num_data_blocks = v.int()?,
                8 => p.num_deletions = v.int()?,
                9 => p.num_entries = v.int()?,
                10 => p.raw_key_bytes = v.int()?,
                11 => p.raw_value_bytes = v.int()?,
                12 => p.smallest_key = v.bytes(),
                _ => p.smallest_seq = v.int()?,
            }
            Ok(())
        })?;
        if p.num_entries > 0
            && (p.smallest_key.len() < TRAILER_LEN || p.largest_key.len() < TRAILER_LEN)
        {
            return Err(Error::corruption(
                &file,
                offset,
                "smallest_key or largest_key is not an internal key",
            ));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;
    use crate::key::{ValueKind, make_internal_key};
    use crate::table::BlockIter;

    fn sample() -> TableProperties {
        TableProperties {
            num_entries: 10,
            num_deletions: 2,
            num_data_blocks: 3,
            raw_key_bytes: 100,
            raw_value_bytes: 1 << 40,
            data_bytes: 5000,
            index_bytes: 70,
            filter_bytes: 20,
            smallest_seq: 1,
            largest_seq: u64::MAX >> 8,
            compression: "lz4".into(),
            format_version: 1,
            smallest_key: make_internal_key(b"a", 1, ValueKind::Value),
            largest_key: make_internal_key(b"z", 9, ValueKind::Deletion),
        }
    }

    fn decode_entries(entries: &[(Vec<u8>, Vec<u8>)]) -> Result<TableProperties> {
        let mut b = BlockBuilder::new(1);
        for (k, v) in entries {
            b.add(k, v);
        }
        TableProperties::decode(Arc::new(
            Block::new(b.finish().to_vec(), "p".into(), 0).unwrap(),
        ))
    }

    fn encoded(p: &TableProperties) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut b = BlockBuilder::new(1);
        p.encode_to(&mut b);
        let mut it = BlockIter::bytewise(Arc::new(
            Block::new(b.finish().to_vec(), "p".into(), 0).unwrap(),
        ));
        let mut out = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        out
    }

    #[test]
    fn names_are_sorted() {
        assert!(NAMES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn round_trip() {
        let p = sample();
        let mut b = BlockBuilder::new(16);
        p.encode_to(&mut b);
        let block = Arc::new(Block::new(b.finish().to_vec(), "p".into(), 0).unwrap());
        assert_eq!(TableProperties::decode(block).unwrap(), p);
        let empty = TableProperties::default();
        assert_eq!(decode_entries(&encoded(&empty)).unwrap(), empty);
    }

    #[test]
    fn unknown_names_are_ignored_and_missing_ones_are_corruption() {
        let mut entries = encoded(&sample());
        entries.push((b"zzz.future".to_vec(), b"anything".to_vec()));
        entries.insert(0, (b"aaa.future".to_vec(), vec![]));
        assert_eq!(decode_entries(&entries).unwrap(), sample());

        for (skip, name) in NAMES.iter().enumerate() {
            let mut entries = encoded(&sample());
            entries.remove(skip);
            let err = decode_entries(&entries).unwrap_err();
            assert!(err.is_corruption());
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[test]
    fn malformed_values_are_corruption() {
        let index = |name: &str| NAMES.iter().position(|n| *n == name).unwrap();
        let mut entries = encoded(&sample());
        // A varint with a trailing byte.
        entries[index("num_entries")].1.push(0);
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = encoded(&sample());
        entries[index("compression")].1 = vec![0xff, 0xfe];
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = encoded(&sample());
        entries[index("smallest_key")].1 = b"abc".to_vec();
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = encoded(&sample());
        entries[index("format_version")].1 = vec![0x80, 0x80, 0x80, 0x80, 0x10];
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = encoded(&sample());
        let dup = entries[index("num_entries")].clone();
        entries.insert(index("num_entries"), dup);
        assert!(decode_entries(&entries).unwrap_err().is_corruption());
    }
}

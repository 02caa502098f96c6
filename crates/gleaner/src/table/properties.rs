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
use super::property_block::{PropertyWriter, read_properties_partial};

/// What a key table holds, recorded by the builder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableProperties {
    /// Number of entries (every version and tombstone counts), in both parts.
    pub num_entries: u64,
    /// Number of entries whose kind is deletion (kind byte 0).
    pub num_deletions: u64,
    /// Number of data blocks (equals the number of data index entries).
    pub num_data_blocks: u64,
    /// Sum of the internal-key lengths of all entries, before prefix compression.
    pub raw_key_bytes: u64,
    /// Sum of the value lengths of all entries (encoded handles included).
    pub raw_value_bytes: u64,
    /// Bytes of all data blocks on disk, trailers included.
    pub data_bytes: u64,
    /// Bytes of the (data) index block on disk, trailer included.
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
    /// The key-table format version (1 = mixed, 2 = index-decoupled).
    pub format_version: u32,
    /// First internal key of the table; empty for an empty table.
    pub smallest_key: Vec<u8>,
    /// Last internal key of the table; empty for an empty table.
    pub largest_key: Vec<u8>,
    /// Number of handle blocks (equals the number of handle index entries). Version 2 only;
    /// 0 in a mixed table, whose handles sit in its data blocks.
    #[serde(default)]
    pub num_handle_blocks: u64,
    /// Number of entries in handle blocks (all of kind value handle). Version 2 only; 0 in a
    /// mixed table.
    #[serde(default)]
    pub num_handle_entries: u64,
    /// Bytes of all handle blocks on disk, trailers included. Version 2 only; 0 in a mixed table.
    #[serde(default)]
    pub handle_bytes: u64,
    /// Bytes of the handle index block on disk, trailer included. Version 2 only; 0 in a mixed
    /// table.
    #[serde(default)]
    pub handle_index_bytes: u64,
    /// Range tombstones the table holds (its range-deletion block); 0 for a table without one.
    #[serde(default)]
    pub range_deletions: u64,
    /// Where the range-deletion block is; `None` exactly when `range_deletions` is 0.
    #[serde(skip)]
    pub range_del_block: Option<super::BlockHandle>,
}

/// Property names, in the byte order the block requires. Every one is required in version 1,
/// except those of [`V2_ONLY`], which a version-1 table does not hold and a version-2 table must.
const NAMES: [&str; 20] = [
    "compression",
    "data_bytes",
    "filter_bytes",
    "format_version",
    "handle_bytes",
    "handle_index_bytes",
    "index_bytes",
    "largest_key",
    "largest_seq",
    "num_data_blocks",
    "num_deletions",
    "num_entries",
    "num_handle_blocks",
    "num_handle_entries",
    "range_del_block",
    "range_deletions",
    "raw_key_bytes",
    "raw_value_bytes",
    "smallest_key",
    "smallest_seq",
];

/// Properties of a table holding range tombstones, in any format version: both or neither (a
/// table without tombstones is written byte for byte as before they existed).
const RANGE_DEL: [&str; 2] = ["range_del_block", "range_deletions"];

/// Properties of the index-decoupled layout (format version 2 and later).
const V2_ONLY: [&str; 4] = [
    "handle_bytes",
    "handle_index_bytes",
    "num_handle_blocks",
    "num_handle_entries",
];

/// A property's value, for writing.
enum Prop<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

impl TableProperties {
    /// The layout named by [`TableProperties::format_version`] (mixed for an unknown version,
    /// which no opened table has).
    pub fn layout(&self) -> super::KeyTableLayout {
        super::KeyTableLayout::from_format_version(self.format_version).unwrap_or_default()
    }

    /// Entries in the data part: all entries of a mixed table, the inline values and tombstones
    /// of an index-decoupled one.
    pub fn num_data_entries(&self) -> u64 {
        self.num_entries.saturating_sub(self.num_handle_entries)
    }

    fn value_of<'a>(&'a self, name: &str, scratch: &'a mut Vec<u8>) -> Option<Prop<'a>> {
        Some(match name {
            "range_del_block" => {
                self.range_del_block?.encode_to(scratch);
                Prop::Bytes(scratch)
            }
            "range_deletions" => Prop::Int(self.range_deletions),
            "compression" => Prop::Bytes(self.compression.as_bytes()),
            "data_bytes" => Prop::Int(self.data_bytes),
            "filter_bytes" => Prop::Int(self.filter_bytes),
            "format_version" => Prop::Int(u64::from(self.format_version)),
            "handle_bytes" => Prop::Int(self.handle_bytes),
            "handle_index_bytes" => Prop::Int(self.handle_index_bytes),
            "index_bytes" => Prop::Int(self.index_bytes),
            "largest_key" => Prop::Bytes(&self.largest_key),
            "largest_seq" => Prop::Int(self.largest_seq),
            "num_data_blocks" => Prop::Int(self.num_data_blocks),
            "num_deletions" => Prop::Int(self.num_deletions),
            "num_entries" => Prop::Int(self.num_entries),
            "num_handle_blocks" => Prop::Int(self.num_handle_blocks),
            "num_handle_entries" => Prop::Int(self.num_handle_entries),
            "raw_key_bytes" => Prop::Int(self.raw_key_bytes),
            "raw_value_bytes" => Prop::Int(self.raw_value_bytes),
            "smallest_key" => Prop::Bytes(&self.smallest_key),
            "smallest_seq" => Prop::Int(self.smallest_seq),
            _ => return None,
        })
    }

    /// Adds every property of the table's format version to `block` (an empty builder with any
    /// restart interval), in order. A version-1 table gets exactly the version-1 set, so what
    /// it writes is byte-for-byte what earlier builds wrote.
    pub(crate) fn encode_to(&self, block: &mut BlockBuilder) {
        let mut w = PropertyWriter::new(block);
        let v2 = self.format_version >= super::FORMAT_VERSION_INDEX_DECOUPLED;
        for name in NAMES {
            if !v2 && V2_ONLY.contains(&name) {
                continue;
            }
            if self.range_deletions == 0 && RANGE_DEL.contains(&name) {
                continue;
            }
            let mut scratch = Vec::new();
            match self.value_of(name, &mut scratch) {
                Some(Prop::Int(v)) => w.int(name, v),
                Some(Prop::Bytes(v)) => w.bytes(name, v),
                None => debug_assert!(false, "property {name} has no value"),
            }
        }
    }

    /// Decodes a properties block. Every known property of the table's format version must
    /// appear exactly once and parse; unknown names are skipped (and so are version-2 names in a
    /// version-1 table). A non-empty table's smallest and largest keys must be internal keys (at
    /// least 8 bytes).
    pub(crate) fn decode(block: Arc<Block>) -> Result<TableProperties> {
        let (file, offset) = (block.file_name().to_owned(), block.offset());
        let mut p = TableProperties::default();
        let seen = read_properties_partial(block, &NAMES, |i, v| {
            match NAMES[i] {
                "compression" => p.compression = v.text()?,
                "data_bytes" => p.data_bytes = v.int()?,
                "filter_bytes" => p.filter_bytes = v.int()?,
                "format_version" => p.format_version = v.int32()?,
                "handle_bytes" => p.handle_bytes = v.int()?,
                "handle_index_bytes" => p.handle_index_bytes = v.int()?,
                "index_bytes" => p.index_bytes = v.int()?,
                "largest_key" => p.largest_key = v.bytes(),
                "largest_seq" => p.largest_seq = v.int()?,
                "num_data_blocks" => p.num_data_blocks = v.int()?,
                "num_deletions" => p.num_deletions = v.int()?,
                "num_entries" => p.num_entries = v.int()?,
                "num_handle_blocks" => p.num_handle_blocks = v.int()?,
                "num_handle_entries" => p.num_handle_entries = v.int()?,
                "range_del_block" => {
                    p.range_del_block = Some(super::BlockHandle::decode(&v.bytes()).ok_or_else(
                        || Error::corruption(&file, offset, "range_del_block is not a block handle"),
                    )?)
                }
                "range_deletions" => p.range_deletions = v.int()?,
                "raw_key_bytes" => p.raw_key_bytes = v.int()?,
                "raw_value_bytes" => p.raw_value_bytes = v.int()?,
                "smallest_key" => p.smallest_key = v.bytes(),
                _ => p.smallest_seq = v.int()?,
            }
            Ok(())
        })?;
        // The version decides which names are required, so it is known only after the walk (a
        // missing version leaves 0, which selects the version-1 set and is reported below).
        let v2 = p.format_version >= super::FORMAT_VERSION_INDEX_DECOUPLED;
        let missing = NAMES.iter().zip(&seen).find(|(name, seen)| {
            !**seen && (v2 || !V2_ONLY.contains(name)) && !RANGE_DEL.contains(name)
        });
        if let Some((name, _)) = missing {
            return Err(Error::corruption(
                &file,
                offset,
                format!("required property {name} is missing"),
            ));
        }
        if !v2 {
            // A mixed table has no handle part, whatever stray names its block may hold.
            p.num_handle_blocks = 0;
            p.num_handle_entries = 0;
            p.handle_bytes = 0;
            p.handle_index_bytes = 0;
        }
        if p.num_entries > 0
            && (p.smallest_key.len() < TRAILER_LEN || p.largest_key.len() < TRAILER_LEN)
        {
            return Err(Error::corruption(
                &file,
                offset,
                "smallest_key or largest_key is not an internal key",
            ));
        }
        if (p.range_deletions > 0) != p.range_del_block.is_some() {
            return Err(Error::corruption(
                &file,
                offset,
                "range_deletions and range_del_block must both be present (and non-zero), or \
                 neither",
            ));
        }
        if p.num_handle_entries > p.num_entries {
            return Err(Error::corruption(
                &file,
                offset,
                format!(
                    "num_handle_entries {} exceeds num_entries {}",
                    p.num_handle_entries, p.num_entries
                ),
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
            ..TableProperties::default()
        }
    }

    fn sample_v2() -> TableProperties {
        TableProperties {
            format_version: 2,
            num_handle_blocks: 4,
            num_handle_entries: 6,
            handle_bytes: 777,
            handle_index_bytes: 33,
            ..sample()
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

    #[test]
    fn range_deletion_properties_come_as_a_pair() {
        let with = TableProperties {
            range_deletions: 2,
            range_del_block: Some(crate::table::BlockHandle {
                offset: 10,
                size: 20,
            }),
            ..sample()
        };
        let good = encoded(&with);
        let back = decode_entries(&good).unwrap();
        assert_eq!(back.range_deletions, 2);
        assert_eq!(back.range_del_block, with.range_del_block);
        // Without tombstones, neither name is written.
        assert!(
            encoded(&sample())
                .iter()
                .all(|(k, _)| !k.starts_with(b"range_del"))
        );
        for name in RANGE_DEL {
            let mut half = good.clone();
            half.retain(|(k, _)| k != name.as_bytes());
            let err = decode_entries(&half).expect_err(name);
            assert!(err.is_corruption(), "{name}: {err}");
        }
        // A handle with bytes after it is no handle.
        let mut bad = good;
        let at = bad
            .iter()
            .position(|(k, _)| k == b"range_del_block")
            .unwrap();
        bad[at].1.push(0);
        assert!(decode_entries(&bad).is_err());
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

    /// Position of property `name` in an encoded list.
    fn at(entries: &[(Vec<u8>, Vec<u8>)], name: &str) -> usize {
        entries
            .iter()
            .position(|(k, _)| k == name.as_bytes())
            .unwrap()
    }

    #[test]
    fn names_are_sorted() {
        assert!(NAMES.windows(2).all(|w| w[0] < w[1]));
        assert!(V2_ONLY.iter().all(|n| NAMES.contains(n)));
    }

    #[test]
    fn round_trip() {
        for p in [sample(), sample_v2()] {
            let mut b = BlockBuilder::new(16);
            p.encode_to(&mut b);
            let block = Arc::new(Block::new(b.finish().to_vec(), "p".into(), 0).unwrap());
            assert_eq!(TableProperties::decode(block).unwrap(), p);
        }
        let empty = TableProperties {
            format_version: 1,
            ..TableProperties::default()
        };
        assert_eq!(decode_entries(&encoded(&empty)).unwrap(), empty);
        assert_eq!(sample_v2().num_data_entries(), 4);
        assert_eq!(
            sample_v2().layout(),
            crate::table::KeyTableLayout::IndexDecoupled
        );
        assert_eq!(sample().layout(), crate::table::KeyTableLayout::Mixed);
    }

    #[test]
    fn version_1_writes_exactly_the_version_1_names() {
        let names: Vec<Vec<u8>> = encoded(&sample()).into_iter().map(|(k, _)| k).collect();
        let expect: Vec<Vec<u8>> = NAMES
            .iter()
            .filter(|n| !V2_ONLY.contains(n) && !RANGE_DEL.contains(n))
            .map(|n| n.as_bytes().to_vec())
            .collect();
        assert_eq!(names, expect);
        assert_eq!(
            encoded(&sample_v2()).len(),
            NAMES.len() - RANGE_DEL.len(),
            "a table without range tombstones writes no range-deletion names"
        );
        // Version-2 names in a version-1 block are ignored.
        let mut entries = encoded(&sample());
        let mut stray = encoded(&sample_v2());
        stray.retain(|(k, _)| k == b"num_handle_entries");
        entries.extend(stray);
        entries.sort();
        assert_eq!(decode_entries(&entries).unwrap(), sample());
    }

    #[test]
    fn unknown_names_are_ignored_and_missing_ones_are_corruption() {
        for p in [sample(), sample_v2()] {
            let mut entries = encoded(&p);
            entries.push((b"zzz.future".to_vec(), b"anything".to_vec()));
            entries.insert(0, (b"aaa.future".to_vec(), vec![]));
            assert_eq!(decode_entries(&entries).unwrap(), p);

            let all = encoded(&p);
            for skip in 0..all.len() {
                let mut entries = all.clone();
                let (name, _) = entries.remove(skip);
                let err = decode_entries(&entries).unwrap_err();
                assert!(err.is_corruption());
                let name = String::from_utf8(name).unwrap();
                assert!(err.to_string().contains(&name), "{err}");
            }
        }
    }

    #[test]
    fn malformed_values_are_corruption() {
        let good = encoded(&sample());
        let mut entries = good.clone();
        // A varint with a trailing byte.
        entries[at(&good, "num_entries")].1.push(0);
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = good.clone();
        entries[at(&good, "compression")].1 = vec![0xff, 0xfe];
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = good.clone();
        entries[at(&good, "smallest_key")].1 = b"abc".to_vec();
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = good.clone();
        entries[at(&good, "format_version")].1 = vec![0x80, 0x80, 0x80, 0x80, 0x10];
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let mut entries = good.clone();
        let dup = entries[at(&good, "num_entries")].clone();
        entries.insert(at(&good, "num_entries"), dup);
        assert!(decode_entries(&entries).unwrap_err().is_corruption());

        let good = encoded(&sample_v2());
        let mut entries = good.clone();
        entries[at(&good, "num_handle_entries")].1 = vec![11];
        let err = decode_entries(&entries).unwrap_err();
        assert!(err.to_string().contains("num_handle_entries"), "{err}");
    }
}

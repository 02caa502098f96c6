//! Value-table properties: counts and bounds recorded when a value table is built, stored as a
//! block of `name → value` entries with plain byte-string keys in byte order (the encoding of
//! key-table properties).
//!
//! Integers are varints, keys are raw bytes. Unknown names are ignored on read (a later version
//! may add properties); a missing, repeated or malformed known property is `Error::Corruption`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::table::property_block::{PropertyWriter, read_properties_partial};
use crate::table::{Block, BlockBuilder};

/// What a value table holds, recorded by the builder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueTableProperties {
    /// Number of records (every version of every key counts).
    pub num_records: u64,
    /// Sum of the encoded lengths of all records (headers included); equals `data_end`, since
    /// records fill the file from offset 0 without gaps.
    pub record_bytes: u64,
    /// Sum of the user-key lengths of all records.
    pub key_bytes: u64,
    /// Sum of the value lengths of all records.
    pub value_bytes: u64,
    /// Smallest sequence number of any record; 0 for an empty table.
    pub smallest_seq: u64,
    /// Largest sequence number of any record; 0 for an empty table.
    pub largest_seq: u64,
    /// User key of the first record; empty for an empty table (and for a table whose first key
    /// is empty).
    pub smallest_key: Vec<u8>,
    /// User key of the last record; empty for an empty table.
    pub largest_key: Vec<u8>,
    /// End of the record region: the offset one past the last record's last byte.
    pub data_end: u64,
    /// Bytes of the dense index blocks and the top index block on disk, trailers included.
    pub index_bytes: u64,
    /// Placement class chosen by the engine when the table was built (0 = default; GC policies
    /// use other values for hot/cold or lifetime classes). The format gives it no meaning.
    pub class: u32,
    /// The value-table format version.
    pub format_version: u32,
    /// Records whose version expires (format 2; 0 in format 1).
    #[serde(default)]
    pub expiring_records: u64,
    /// The latest expiry of those records, milliseconds since the Unix epoch (format 2; 0 when
    /// none expires). When every record expires, the table holds nothing a reader can read
    /// once this time has passed for every reader.
    #[serde(default)]
    pub max_expiry: u64,
}

/// Property names, in the byte order the block requires. Every one is required in version 2;
/// in version 1 all but [`EXPIRY_NAMES`], which it never holds.
const NAMES: [&str; 14] = [
    "class",
    "data_end",
    "expiring_records",
    "format_version",
    "index_bytes",
    "key_bytes",
    "largest_key",
    "largest_seq",
    "max_expiry",
    "num_records",
    "record_bytes",
    "smallest_key",
    "smallest_seq",
    "value_bytes",
];

/// The properties of format 2 only (positions in [`NAMES`]).
const EXPIRY_NAMES: [usize; 2] = [2, 8];

impl ValueTableProperties {
    /// Adds every property to `block` (an empty builder with any restart interval), in order.
    pub(crate) fn encode_to(&self, block: &mut BlockBuilder) {
        let expiries = self.format_version >= super::format::FORMAT_VERSION_EXPIRY;
        let mut w = PropertyWriter::new(block);
        w.int(NAMES[0], u64::from(self.class));
        w.int(NAMES[1], self.data_end);
        if expiries {
            w.int(NAMES[2], self.expiring_records);
        }
        w.int(NAMES[3], u64::from(self.format_version));
        w.int(NAMES[4], self.index_bytes);
        w.int(NAMES[5], self.key_bytes);
        w.bytes(NAMES[6], &self.largest_key);
        w.int(NAMES[7], self.largest_seq);
        if expiries {
            w.int(NAMES[8], self.max_expiry);
        }
        w.int(NAMES[9], self.num_records);
        w.int(NAMES[10], self.record_bytes);
        w.bytes(NAMES[11], &self.smallest_key);
        w.int(NAMES[12], self.smallest_seq);
        w.int(NAMES[13], self.value_bytes);
    }

    /// True when every record expires: once [`ValueTableProperties::max_expiry`] has passed for
    /// every reader, nothing in the table can be read.
    pub fn all_records_expire(&self) -> bool {
        self.num_records > 0 && self.expiring_records == self.num_records
    }

    /// Decodes a properties block. Every property of the table's format version (its
    /// `format_version` property) must appear exactly once and parse (integers as a varint
    /// spanning the whole value; `class` and `format_version` must fit 32 bits), and no
    /// property of a later version; unknown names are skipped. Otherwise `Error::Corruption` at
    /// the block's offset. Consistency between properties is checked by the reader, which knows
    /// the file.
    pub(crate) fn decode(block: Arc<Block>) -> Result<ValueTableProperties> {
        let (file, offset) = (block.file_name().to_owned(), block.offset());
        let mut p = ValueTableProperties::default();
        let seen = read_properties_partial(block, &NAMES, |i, v| {
            match i {
                0 => p.class = v.int32()?,
                1 => p.data_end = v.int()?,
                2 => p.expiring_records = v.int()?,
                3 => p.format_version = v.int32()?,
                4 => p.index_bytes = v.int()?,
                5 => p.key_bytes = v.int()?,
                6 => p.largest_key = v.bytes(),
                7 => p.largest_seq = v.int()?,
                8 => p.max_expiry = v.int()?,
                9 => p.num_records = v.int()?,
                10 => p.record_bytes = v.int()?,
                11 => p.smallest_key = v.bytes(),
                12 => p.smallest_seq = v.int()?,
                _ => p.value_bytes = v.int()?,
            }
            Ok(())
        })?;
        let expiries = p.format_version >= super::format::FORMAT_VERSION_EXPIRY;
        // The properties of every version first: the version itself is one of them.
        let (every, expiry): (Vec<_>, Vec<_>) =
            (0..NAMES.len()).partition(|i| !EXPIRY_NAMES.contains(i));
        for i in every.into_iter().chain(expiry) {
            let name = NAMES[i];
            let required = expiries || !EXPIRY_NAMES.contains(&i);
            if seen[i] != required {
                let why = if required {
                    format!("required property {name} is missing")
                } else {
                    format!(
                        "property {name} in a table of format version {} (it needs {})",
                        p.format_version,
                        super::format::FORMAT_VERSION_EXPIRY
                    )
                };
                return Err(crate::error::Error::corruption(&file, offset, why));
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;
    use crate::table::BlockIter;

    fn sample() -> ValueTableProperties {
        ValueTableProperties {
            num_records: 10,
            record_bytes: 1 << 30,
            key_bytes: 240,
            value_bytes: (1 << 30) - 400,
            smallest_seq: 3,
            largest_seq: (1 << 56) - 1,
            smallest_key: b"apple".to_vec(),
            largest_key: vec![0xff; 300],
            data_end: 1 << 30,
            index_bytes: 4000,
            class: u32::MAX,
            format_version: 1,
            expiring_records: 0,
            max_expiry: 0,
        }
    }

    fn sample_v2() -> ValueTableProperties {
        ValueTableProperties {
            format_version: 2,
            expiring_records: 10,
            max_expiry: 1_700_000_000_000,
            ..sample()
        }
    }

    fn block_of(entries: &[(Vec<u8>, Vec<u8>)]) -> Arc<Block> {
        let mut b = BlockBuilder::new(1);
        for (k, v) in entries {
            b.add(k, v);
        }
        Arc::new(Block::new(b.finish().to_vec(), "p.vst".into(), 0).unwrap())
    }

    fn encoded(p: &ValueTableProperties) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut b = BlockBuilder::new(1);
        p.encode_to(&mut b);
        let mut it = BlockIter::bytewise(Arc::new(
            Block::new(b.finish().to_vec(), "p.vst".into(), 0).unwrap(),
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
        for p in [sample(), sample_v2(), ValueTableProperties::default()] {
            let mut b = BlockBuilder::new(16);
            p.encode_to(&mut b);
            let block = Arc::new(Block::new(b.finish().to_vec(), "p".into(), 0).unwrap());
            assert_eq!(ValueTableProperties::decode(block).unwrap(), p);
        }
    }

    #[test]
    fn serde_round_trip() {
        let json = serde_json::to_string(&sample_v2()).unwrap();
        let back: ValueTableProperties = serde_json::from_str(&json).unwrap();
        assert_eq!(back, sample_v2());
    }

    #[test]
    fn unknown_names_are_ignored_and_missing_ones_are_corruption() {
        let mut entries = encoded(&sample());
        entries.push((b"zzz.future".to_vec(), b"anything".to_vec()));
        entries.insert(0, (b"aaa.future".to_vec(), vec![]));
        assert_eq!(
            ValueTableProperties::decode(block_of(&entries)).unwrap(),
            sample()
        );

        for (skip, name) in NAMES.iter().enumerate() {
            let mut entries = encoded(&sample_v2());
            entries.remove(skip);
            let err = ValueTableProperties::decode(block_of(&entries)).unwrap_err();
            assert!(err.is_corruption());
            assert!(err.to_string().contains(name), "{err}");
        }
        // Format 1 holds neither expiry property; one there is damage.
        assert_eq!(encoded(&sample()).len(), NAMES.len() - EXPIRY_NAMES.len());
        let mut entries = encoded(&sample());
        entries.insert(2, (b"expiring_records".to_vec(), vec![1]));
        let err = ValueTableProperties::decode(block_of(&entries)).unwrap_err();
        assert!(err.to_string().contains("expiring_records"), "{err}");
    }

    #[test]
    fn malformed_values_are_corruption() {
        let index = |name: &str| NAMES.iter().position(|n| *n == name).unwrap();
        let check = |entries: Vec<(Vec<u8>, Vec<u8>)>| {
            let err = ValueTableProperties::decode(block_of(&entries)).unwrap_err();
            assert!(err.is_corruption(), "{err}");
        };
        let mut entries = encoded(&sample_v2());
        entries[index("num_records")].1.push(0);
        check(entries);

        let mut entries = encoded(&sample_v2());
        entries[index("data_end")].1 = vec![0x80];
        check(entries);

        for name in ["class", "format_version"] {
            let mut entries = encoded(&sample_v2());
            entries[index(name)].1 = vec![0x80, 0x80, 0x80, 0x80, 0x10];
            check(entries);
        }

        let mut entries = encoded(&sample_v2());
        let dup = entries[index("value_bytes")].clone();
        entries.push(dup);
        check(entries);
    }
}

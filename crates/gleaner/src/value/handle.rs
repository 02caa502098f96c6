//! Value handles: what the index tree stores in place of a separated value.

use crate::coding::{Decoder, put_varint64};
use crate::error::{Error, Result};

/// Where a separated value's record lives: `{file_number, offset, len}` of a record in a value
/// table. Encoded as three varints (docs/format.md, "Value handle").
///
/// After garbage collection rewrites the table, `file_number` may name a table that no longer
/// exists; the read path then follows the version's inheritance records to the table that now
/// holds the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueHandle {
    /// Number of the value table (`NNNNNN.vst`) the record was written to.
    pub file_number: u64,
    /// Offset of the record's first byte in that table.
    pub offset: u64,
    /// Length of the whole record (header, key and value).
    pub len: u64,
}

/// Longest encoding of a handle: three ten-byte varints.
pub const MAX_HANDLE_LEN: usize = 30;

impl ValueHandle {
    /// Appends the encoding to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.file_number);
        put_varint64(dst, self.offset);
        put_varint64(dst, self.len);
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_HANDLE_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a handle that must span all of `bytes`; `file` and `offset` locate it for errors.
    pub fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<ValueHandle> {
        let mut d = Decoder::new(bytes);
        let bad = || Error::corruption(file, offset, "malformed value handle");
        let handle = ValueHandle {
            file_number: d.varint64().ok_or_else(bad)?,
            offset: d.varint64().ok_or_else(bad)?,
            len: d.varint64().ok_or_else(bad)?,
        };
        if !d.is_empty() || handle.len == 0 {
            return Err(bad());
        }
        Ok(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_strict_decoding() {
        for h in [
            ValueHandle {
                file_number: 7,
                offset: 0,
                len: 1,
            },
            ValueHandle {
                file_number: u64::MAX,
                offset: u64::MAX,
                len: u64::MAX,
            },
        ] {
            let e = h.encode();
            assert!(e.len() <= MAX_HANDLE_LEN);
            assert_eq!(ValueHandle::decode(&e, "t.sst", 0).expect("decode"), h);
            for cut in 0..e.len() {
                assert!(ValueHandle::decode(&e[..cut], "t.sst", 0).is_err());
            }
            let mut longer = e.clone();
            longer.push(0);
            assert!(ValueHandle::decode(&longer, "t.sst", 0).is_err());
        }
        let zero_len = ValueHandle {
            file_number: 1,
            offset: 2,
            len: 0,
        }
        .encode();
        assert!(
            ValueHandle::decode(&zero_len, "t.sst", 9)
                .expect_err("len 0")
                .is_corruption()
        );
    }
}

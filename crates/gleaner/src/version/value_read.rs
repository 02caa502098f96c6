//! Finding and reading a separated value: the handle's own table when it is live, otherwise the
//! table inheritance records lead to, looked up there by key and sequence number.

use std::sync::Arc;

use super::value_set::ValueSet;
use crate::cache::ValueTableCache;
use crate::error::{Error, Result};
use crate::filename::value_table_file_name;
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::value::{ValueHandle, ValueTable};

/// A record's current place.
#[derive(Debug, Clone)]
pub struct Located {
    /// The open table holding it.
    pub table: Arc<ValueTable>,
    /// Where the record is in that table.
    pub handle: ValueHandle,
}

impl ValueSet {
    /// Finds where the record `(user_key, seq)` that `handle` was written as lives now.
    ///
    /// Errors: [`Error::Corruption`] when no live table can hold it, or the table inheritance
    /// leads to does not have it (a dangling handle).
    pub fn locate(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<Located> {
        if let Some(v) = self.live(handle.file_number) {
            return Ok(Located {
                table: cache.get(v.number, v.file_size, class)?,
                handle,
            });
        }
        let dangling = |why: String| {
            Error::corruption(
                value_table_file_name(handle.file_number),
                handle.offset,
                format!("value handle for a key at sequence {seq} cannot be resolved: {why}"),
            )
        };
        let candidates = self.candidates(handle.file_number, user_key);
        if candidates.is_empty() {
            return Err(dangling(
                "the table is gone and no inheritance record covers the key".into(),
            ));
        }
        for v in &candidates {
            let table = cache.get(v.number, v.file_size, class)?;
            if let Some((offset, len)) = table.find(user_key, seq, class, fill_cache)? {
                return Ok(Located {
                    handle: ValueHandle {
                        file_number: v.number,
                        offset,
                        len,
                    },
                    table,
                });
            }
        }
        let names: Vec<String> = candidates.iter().map(|v| v.number.to_string()).collect();
        Err(dangling(format!(
            "tables {} inherited the key but none has such a record",
            names.join(", ")
        )))
    }

    /// Reads the value of the record `(user_key, seq)` that `handle` was written as, checking that
    /// the record read is that one.
    pub fn read_value(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<Vec<u8>> {
        let at = self.locate(cache, user_key, seq, handle, class, fill_cache)?;
        let record = at
            .table
            .read_record(at.handle.offset, at.handle.len, class)?;
        check_record(&at.handle, &record.key, record.seq, user_key, seq)?;
        Ok(record.value)
    }
}

/// Verifies that the record read at `handle` is the one asked for: a handle pointing at another
/// record (a misdirected write, a stale offset) must never return someone else's value.
pub fn check_record(
    handle: &ValueHandle,
    key: &[u8],
    seq: SeqNo,
    want_key: &[u8],
    want_seq: SeqNo,
) -> Result<()> {
    if key != want_key || seq != want_seq {
        return Err(Error::corruption(
            value_table_file_name(handle.file_number),
            handle.offset,
            format!(
                "record at the handle is (key of {} bytes, sequence {seq}), not the one the index names (sequence {want_seq})",
                key.len()
            ),
        ));
    }
    Ok(())
}

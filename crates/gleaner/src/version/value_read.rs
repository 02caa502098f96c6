//! Finding and reading a separated value: the handle's own table when it is live, otherwise the
//! table inheritance records lead to, looked up there by key and sequence number.

use std::sync::Arc;

use super::value_set::ValueSet;
use crate::cache::ValueTableCache;
use crate::error::{Error, Result};
use crate::filename::value_table_file_name;
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::lookup::Lookup;
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
        match self.try_locate(cache, user_key, seq, handle, class, fill_cache)? {
            Some(at) => Ok(at),
            None => Err(self.dangling(user_key, seq, handle)),
        }
    }

    /// Like [`ValueSet::locate`], but `Ok(None)` when no live table holds the record: its table
    /// was collected and the record was not copied. For a version the index tree still holds
    /// that is what a GC job does to a record whose key has a newer version no snapshot can
    /// see past (see docs/gc.md, "Reclaiming shadowed versions early"); callers that meet such
    /// a handle decide whether it is shadowed.
    ///
    /// Errors: opening a table or reading its dense index fails.
    pub fn try_locate(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<Option<Located>> {
        // A live table holds every record written to it; so does a retired one, which stays
        // readable for the versions that name it.
        if let Some(v) = self
            .live(handle.file_number)
            .or_else(|| self.retired_table(handle.file_number))
        {
            return Ok(Some(Located {
                table: cache.get(v.number, v.file_size, class)?,
                handle,
            }));
        }
        for v in &self.candidates(handle.file_number, user_key) {
            let table = cache.get(v.number, v.file_size, class)?;
            if let Some((offset, len)) = table.find(user_key, seq, class, fill_cache)? {
                return Ok(Some(Located {
                    handle: ValueHandle {
                        file_number: v.number,
                        offset,
                        len,
                    },
                    table,
                }));
            }
        }
        Ok(None)
    }

    /// Whether `found`, a key's newest version, names the record written at `record_seq` that
    /// is at `location`: a handle to that record at that place, or through inheritance records
    /// when the handle's table was collected. A handle to another copy of the same record (a
    /// write-back GC interrupted by a crash leaves the victim's copy and the output's copy both
    /// live until the next GC) names that copy only.
    pub fn names_record(
        &self,
        found: Option<&Lookup>,
        record_seq: SeqNo,
        location: ValueHandle,
    ) -> bool {
        match found {
            Some(Lookup::Handle {
                handle,
                record_seq: s,
                ..
            }) if *s == record_seq => {
                *handle == location
                    || (self.live(handle.file_number).is_none()
                        && self.retired_table(handle.file_number).is_none())
            }
            _ => false,
        }
    }

    /// The [`Error::Corruption`] for `handle`, written as `(user_key, seq)`, when it resolves
    /// to no record.
    pub fn dangling(&self, user_key: &[u8], seq: SeqNo, handle: ValueHandle) -> Error {
        let candidates = self.candidates(handle.file_number, user_key);
        let why = if candidates.is_empty() {
            "the table is gone and no inheritance record covers the key".to_string()
        } else {
            let names: Vec<String> = candidates.iter().map(|v| v.number.to_string()).collect();
            format!(
                "tables {} inherited the key but none has such a record",
                names.join(", ")
            )
        };
        Error::corruption(
            value_table_file_name(handle.file_number),
            handle.offset,
            format!("value handle for a key at sequence {seq} cannot be resolved: {why}"),
        )
    }

    /// Reads the value of the record `(user_key, seq)` that `handle` was written as, checking that
    /// the record read is that one. Also returns where the record was found when that was
    /// through inheritance (the handle names a table GC collected).
    pub fn read_value(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<(Vec<u8>, Option<ValueHandle>)> {
        let at = self.locate(cache, user_key, seq, handle, class, fill_cache)?;
        let record = at
            .table
            .read_record(at.handle.offset, at.handle.len, class)?;
        check_record(&at.handle, &record.key, record.seq, user_key, seq)?;
        // A live table is read at the handle itself; inheritance leads to another table.
        let moved = (at.handle.file_number != handle.file_number).then_some(at.handle);
        Ok((record.value, moved))
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

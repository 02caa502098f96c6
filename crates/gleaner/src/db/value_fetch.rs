//! Reading separated values for iterators, with read-ahead: a scan that asks for consecutive
//! records of one value table gets them from one larger read (growing up to
//! `value_readahead_size`) instead of one read per record.

use std::sync::Arc;

use crate::cache::ValueTableCache;
use crate::error::Result;
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::value::{ValueHandle, decode_record};
use crate::version::{ValueSet, check_record};

/// The first read-ahead after a sequential access, in bytes; it doubles up to the maximum.
const FIRST_WINDOW: u64 = 64 << 10;

/// Fetches separated values for one iterator.
pub(super) struct ValueFetcher {
    cache: Arc<ValueTableCache>,
    max_window: u64,
    fill_cache: bool,
    buf: Vec<u8>,
    buf_table: u64,
    buf_start: u64,
    last_table: u64,
    last_end: u64,
    window: u64,
}

impl ValueFetcher {
    pub(super) fn new(cache: Arc<ValueTableCache>, max_window: u64, fill_cache: bool) -> Self {
        ValueFetcher {
            cache,
            max_window,
            fill_cache,
            buf: Vec::new(),
            buf_table: u64::MAX,
            buf_start: 0,
            last_table: u64::MAX,
            last_end: 0,
            window: 0,
        }
    }

    /// Reads the value of record `(user_key, seq)` written at `handle` into `out`.
    pub(super) fn fetch(
        &mut self,
        values: &ValueSet,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let at = values.locate(
            &self.cache,
            user_key,
            seq,
            handle,
            IoClass::UserRead,
            self.fill_cache,
        )?;
        let h = at.handle;
        let buffered = h.file_number == self.buf_table
            && h.offset >= self.buf_start
            && h.offset + h.len <= self.buf_start + self.buf.len() as u64;
        if !buffered {
            let sequential = self.max_window > 0
                && h.file_number == self.last_table
                && h.offset == self.last_end;
            if sequential {
                self.window =
                    (self.window * 2).clamp(FIRST_WINDOW, self.max_window.max(FIRST_WINDOW));
                let available = at.table.data_end().saturating_sub(h.offset);
                let n = self.window.min(available).max(h.len);
                self.buf = at.table.read_range(h.offset, n, IoClass::UserRead)?;
                self.buf_table = h.file_number;
                self.buf_start = h.offset;
            } else {
                self.window = 0;
                let record = at.table.read_record(h.offset, h.len, IoClass::UserRead)?;
                check_record(&h, &record.key, record.seq, user_key, seq)?;
                out.clear();
                out.extend_from_slice(&record.value);
                self.last_table = h.file_number;
                self.last_end = h.offset + h.len;
                return Ok(());
            }
        }
        let start = (h.offset - self.buf_start) as usize;
        let record = decode_record(
            &self.buf[start..start + h.len as usize],
            at.table.file_name(),
            h.offset,
        )?;
        check_record(&h, record.key, record.seq, user_key, seq)?;
        out.clear();
        out.extend_from_slice(record.value);
        self.last_table = h.file_number;
        self.last_end = h.offset + h.len;
        Ok(())
    }
}

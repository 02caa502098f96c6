//! The two-level iterator over a key table: an index-block cursor choosing data blocks, and a
//! cursor inside the current data block.

use std::sync::Arc;

use crate::error::Result;
use crate::iter::{InternalIterator, seek_for_prev_via_seek};
use crate::key::compare_internal;

use super::block::BlockIter;
use super::format::BlockHandle;
use super::reader::{ReadCtx, Table};

/// Iterates over every entry of one key table in internal-key order. Holds its table alive.
/// Data blocks are loaded lazily, one at a time.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    ctx: ReadCtx,
    index: BlockIter,
    /// The data block under the index cursor, and its handle (to avoid reloading it).
    data: Option<(BlockHandle, BlockIter)>,
}

impl TableIter {
    pub(crate) fn new(table: Arc<Table>, index: BlockIter, ctx: ReadCtx) -> Self {
        TableIter {
            table,
            ctx,
            index,
            data: None,
        }
    }

    /// Loads the data block the index cursor points at (or drops the data cursor when the index
    /// cursor is exhausted).
    fn load_data_block(&mut self) -> Result<()> {
        if !self.index.valid() {
            self.data = None;
            return Ok(());
        }
        let handle = self.table.decode_index_value(self.index.value())?;
        if self.data.as_ref().is_some_and(|(h, _)| *h == handle) {
            return Ok(());
        }
        let block = self.table.data_block(handle, self.ctx)?;
        self.data = Some((handle, BlockIter::internal(block)));
        Ok(())
    }

    /// Moves forward past empty data blocks until positioned or exhausted.
    fn skip_forward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|(_, d)| !d.valid()) {
            self.index.next()?;
            self.load_data_block()?;
            if let Some((_, d)) = &mut self.data {
                d.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves backward past empty data blocks until positioned or exhausted.
    fn skip_backward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|(_, d)| !d.valid()) {
            self.index.prev()?;
            self.load_data_block()?;
            if let Some((_, d)) = &mut self.data {
                d.seek_to_last()?;
            }
        }
        Ok(())
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        self.index.seek(target)?;
        self.load_data_block()?;
        if let Some((_, d)) = &mut self.data {
            d.seek(target)?;
        }
        self.skip_forward()
    }

    fn seek_to_first_inner(&mut self) -> Result<()> {
        self.index.seek_to_first()?;
        self.load_data_block()?;
        if let Some((_, d)) = &mut self.data {
            d.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last_inner(&mut self) -> Result<()> {
        self.index.seek_to_last()?;
        self.load_data_block()?;
        if let Some((_, d)) = &mut self.data {
            d.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn next_inner(&mut self) -> Result<()> {
        match &mut self.data {
            Some((_, d)) if d.valid() => d.next()?,
            _ => return Ok(()),
        }
        self.skip_forward()
    }

    fn prev_inner(&mut self) -> Result<()> {
        match &mut self.data {
            Some((_, d)) if d.valid() => d.prev()?,
            _ => return Ok(()),
        }
        self.skip_backward()
    }

    /// Leaves the iterator invalid when a movement failed.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.data = None;
        }
        r
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(|(_, d)| d.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.seek_to_first_inner();
        self.guard(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.seek_to_last_inner();
        self.guard(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_inner(target);
        self.guard(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = seek_for_prev_via_seek(self, target, compare_internal);
        self.guard(r)
    }

    fn next(&mut self) -> Result<()> {
        let r = self.next_inner();
        self.guard(r)
    }

    fn prev(&mut self) -> Result<()> {
        let r = self.prev_inner();
        self.guard(r)
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |(_, d)| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |(_, d)| d.value())
    }
}

//! Iterators over a key table. A part (the data blocks, or an index-decoupled table's handle
//! blocks) is walked by a two-level iterator: an index-block cursor choosing blocks and a cursor
//! inside the current block. A table iterator merges its parts: one for a mixed table, two for
//! an index-decoupled one.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::iter::{InternalIterator, seek_for_prev_via_seek};
use crate::key::{ParsedKey, ValueKind, compare_internal};
use crate::merge::MergingIterator;

use super::block::BlockIter;
use super::format::{BlockHandle, KeyTableLayout, TablePart};
use super::reader::{ReadCtx, Readahead, Table};

/// The two-level iterator over one part of a table.
#[derive(Debug)]
struct PartIter {
    table: Arc<Table>,
    part: TablePart,
    ctx: ReadCtx,
    /// Whether every entry reached must have a kind that belongs to `part` (index-decoupled
    /// tables: value handles exactly in the handle part).
    check_kinds: bool,
    index: BlockIter,
    /// The block under the index cursor, and its handle (to avoid reloading it).
    block: Option<(BlockHandle, BlockIter)>,
    /// The bytes read ahead, when `ctx.readahead` asks for it; shared by the parts of an
    /// index-decoupled table, whose blocks are interleaved in the file, so each window is
    /// read once rather than once per part.
    window: Option<Arc<Mutex<Readahead>>>,
}

impl PartIter {
    /// `None` when the table has no such part.
    fn new(
        table: Arc<Table>,
        part: TablePart,
        ctx: ReadCtx,
        window: Option<Arc<Mutex<Readahead>>>,
    ) -> Option<Self> {
        let index = BlockIter::internal(table.part_index(part)?.clone());
        Some(PartIter {
            check_kinds: table.layout() == KeyTableLayout::IndexDecoupled,
            table,
            part,
            ctx,
            index,
            block: None,
            window,
        })
    }

    /// In an index-decoupled table, an entry in the wrong part (say, a handle index entry that
    /// leads to a data block) would make the merge yield entries twice or out of order; such a
    /// table is corrupt, and saying so is cheap: one trailer byte per entry.
    fn check_kind(&self) -> Result<()> {
        let Some((handle, b)) = self
            .block
            .as_ref()
            .filter(|(_, b)| self.check_kinds && b.valid())
        else {
            return Ok(());
        };
        let kind = ParsedKey::parse(b.key()).map(|p| p.kind);
        let belongs = match kind {
            Some(ValueKind::ValueHandle) => self.part == TablePart::Handles,
            Some(_) => self.part == TablePart::Data,
            None => false,
        };
        if belongs {
            return Ok(());
        }
        Err(Error::corruption(
            self.table.file_name(),
            handle.offset,
            format!(
                "{} block holds an entry of kind {}",
                self.part.name(),
                kind.map_or_else(|| "unknown".to_string(), |k| format!("{k:?}"))
            ),
        ))
    }

    /// Loads the block the index cursor points at (or drops the block cursor when the index
    /// cursor is exhausted).
    fn load_block(&mut self) -> Result<()> {
        if !self.index.valid() {
            self.block = None;
            return Ok(());
        }
        let handle = self
            .table
            .decode_index_value(self.part, self.index.value())?;
        if self.block.as_ref().is_some_and(|(h, _)| *h == handle) {
            return Ok(());
        }
        let block = match &self.window {
            Some(window) => {
                self.table
                    .part_block_with(self.part, handle, self.ctx, Some(&mut window.lock()))?
            }
            None => self.table.part_block(self.part, handle, self.ctx)?,
        };
        self.block = Some((handle, BlockIter::internal(block)));
        Ok(())
    }

    /// Moves forward past empty blocks until positioned or exhausted.
    fn skip_forward(&mut self) -> Result<()> {
        while self.block.as_ref().is_some_and(|(_, b)| !b.valid()) {
            self.index.next()?;
            self.load_block()?;
            if let Some((_, b)) = &mut self.block {
                b.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves backward past empty blocks until positioned or exhausted.
    fn skip_backward(&mut self) -> Result<()> {
        while self.block.as_ref().is_some_and(|(_, b)| !b.valid()) {
            self.index.prev()?;
            self.load_block()?;
            if let Some((_, b)) = &mut self.block {
                b.seek_to_last()?;
            }
        }
        Ok(())
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        self.index.seek(target)?;
        self.load_block()?;
        if let Some((_, b)) = &mut self.block {
            b.seek(target)?;
        }
        self.skip_forward()
    }

    fn seek_to_first_inner(&mut self) -> Result<()> {
        self.index.seek_to_first()?;
        self.load_block()?;
        if let Some((_, b)) = &mut self.block {
            b.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last_inner(&mut self) -> Result<()> {
        self.index.seek_to_last()?;
        self.load_block()?;
        if let Some((_, b)) = &mut self.block {
            b.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn next_inner(&mut self) -> Result<()> {
        match &mut self.block {
            Some((_, b)) if b.valid() => b.next()?,
            _ => return Ok(()),
        }
        self.skip_forward()
    }

    fn prev_inner(&mut self) -> Result<()> {
        match &mut self.block {
            Some((_, b)) if b.valid() => b.prev()?,
            _ => return Ok(()),
        }
        self.skip_backward()
    }

    /// Checks the entry a movement reached; leaves the iterator invalid when the movement or
    /// the check failed.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        let r = r.and_then(|()| self.check_kind());
        if r.is_err() {
            self.block = None;
        }
        r
    }
}

impl InternalIterator for PartIter {
    fn valid(&self) -> bool {
        self.block.as_ref().is_some_and(|(_, b)| b.valid())
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
        self.block.as_ref().map_or(&[], |(_, b)| b.key())
    }

    fn value(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |(_, b)| b.value())
    }
}

/// Iterates over every entry of one key table (or of one part of it) in internal-key order.
/// Holds its table alive. Blocks are loaded lazily, one at a time per part.
///
/// Over an index-decoupled table it merges the data part and the handle part with the
/// engine's [`MergingIterator`] (no internal key is in both parts).
pub struct TableIter {
    merge: MergingIterator,
    /// The part of each merged child, by child index.
    parts: Vec<TablePart>,
}

impl std::fmt::Debug for TableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableIter")
            .field("parts", &self.parts)
            .field("part", &self.part())
            .finish()
    }
}

impl TableIter {
    /// An iterator over `parts` of `table` (parts the table lacks are skipped).
    pub(crate) fn new(table: Arc<Table>, parts: &[TablePart], ctx: ReadCtx) -> Self {
        let window = (ctx.readahead > 0).then(|| Arc::new(Mutex::new(Readahead::default())));
        let iters: Vec<PartIter> = parts
            .iter()
            .filter_map(|&p| PartIter::new(table.clone(), p, ctx, window.clone()))
            .collect();
        TableIter {
            parts: iters.iter().map(|p| p.part).collect(),
            merge: MergingIterator::new(
                iters
                    .into_iter()
                    .map(|p| Box::new(p) as Box<dyn InternalIterator>)
                    .collect(),
                compare_internal,
            ),
        }
    }

    /// The part holding the current entry (`None` when invalid). Every entry of a mixed table
    /// is in [`TablePart::Data`].
    pub fn part(&self) -> Option<TablePart> {
        self.merge.current_child().map(|c| self.parts[c])
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.merge.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.merge.seek_to_first()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.merge.seek_to_last()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.merge.seek(target)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.merge.seek_for_prev(target)
    }

    fn next(&mut self) -> Result<()> {
        // Moving an invalid table iterator is a no-op, as for a part.
        if !self.merge.valid() {
            return Ok(());
        }
        self.merge.next()
    }

    fn prev(&mut self) -> Result<()> {
        if !self.merge.valid() {
            return Ok(());
        }
        self.merge.prev()
    }

    fn key(&self) -> &[u8] {
        if self.merge.valid() {
            self.merge.key()
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.merge.valid() {
            self.merge.value()
        } else {
            &[]
        }
    }
}

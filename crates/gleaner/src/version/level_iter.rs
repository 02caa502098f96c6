//! Iterator over one sorted level (L1 and deeper): concatenates the level's tables, opening
//! each only when the cursor reaches it.

use std::sync::Arc;

use super::file_meta::FileMetaData;
use crate::cache::TableCache;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::table::{ReadCtx, TableIter};

/// A cursor over the tables of a level whose key ranges are sorted and disjoint.
pub struct LevelIter {
    files: Vec<Arc<FileMetaData>>,
    tables: Arc<TableCache>,
    ctx: ReadCtx,
    index: usize,
    current: Option<TableIter>,
}

impl LevelIter {
    /// A cursor over `files` (sorted, disjoint), unpositioned.
    pub fn new(files: Vec<Arc<FileMetaData>>, tables: Arc<TableCache>, ctx: ReadCtx) -> Self {
        LevelIter {
            files,
            tables,
            ctx,
            index: 0,
            current: None,
        }
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.current = None;
        self.index = index;
        if let Some(f) = self.files.get(index) {
            let table = self.tables.get(f.number, f.file_size, self.ctx.class)?;
            self.current = Some(table.iter(self.ctx));
        }
        Ok(())
    }

    fn skip_forward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index + 1 >= self.files.len() {
                self.current = None;
                return Ok(());
            }
            self.open(self.index + 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index == 0 {
                self.current = None;
                return Ok(());
            }
            self.open(self.index - 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }

    fn cur(&self) -> &TableIter {
        self.current
            .as_ref()
            .expect("LevelIter::key/value called while invalid")
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        if self.files.is_empty() {
            self.current = None;
            return Ok(());
        }
        self.open(self.files.len() - 1)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target).is_lt());
        if i >= self.files.len() {
            self.current = None;
            return Ok(());
        }
        self.open(i)?;
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        // The last table whose smallest key is at or before the target.
        let i = self
            .files
            .partition_point(|f| compare_internal(&f.smallest, target).is_le());
        if i == 0 {
            self.current = None;
            return Ok(());
        }
        self.open(i - 1)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_for_prev(target)?;
        }
        self.skip_backward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.cur().key()
    }

    fn value(&self) -> &[u8] {
        self.cur().value()
    }
}

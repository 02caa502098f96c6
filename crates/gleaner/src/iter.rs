//! The cursor interface shared by every sorted source of internal keys: memtables, blocks, key
//! tables, levels and the merging iterator.

use crate::error::Result;

/// A bidirectional cursor over internal keys in [`compare_internal`](crate::key::compare_internal)
/// order (or, for blocks of plain keys, the order of the comparator the block was opened with).
///
/// A movement that fails returns the error and leaves the iterator invalid; it never panics on
/// corrupt input. `key` and `value` may only be called while `valid()` is true.
pub trait InternalIterator: Send {
    /// True when the iterator is positioned at an entry.
    fn valid(&self) -> bool;

    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;

    /// Positions at the last entry.
    fn seek_to_last(&mut self) -> Result<()>;

    /// Positions at the first entry whose key is at or after `target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;

    /// Positions at the last entry whose key is at or before `target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;

    /// Moves to the next entry (invalid after the last).
    fn next(&mut self) -> Result<()>;

    /// Moves to the previous entry (invalid before the first).
    fn prev(&mut self) -> Result<()>;

    /// Key of the current entry.
    fn key(&self) -> &[u8];

    /// Value of the current entry.
    fn value(&self) -> &[u8];
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek_for_prev(target)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
}

/// Default `seek_for_prev` for iterators that can `seek` and step back: seek forward, then step
/// back once if the landing entry is past the target.
pub fn seek_for_prev_via_seek<I: InternalIterator + ?Sized>(
    it: &mut I,
    target: &[u8],
    cmp: fn(&[u8], &[u8]) -> std::cmp::Ordering,
) -> Result<()> {
    it.seek(target)?;
    if !it.valid() {
        it.seek_to_last()
    } else if cmp(it.key(), target) == std::cmp::Ordering::Greater {
        it.prev()
    } else {
        Ok(())
    }
}

/// An iterator over a sorted in-memory vector of `(key, value)` pairs; used in tests and for
/// small sorted runs.
#[derive(Debug, Clone)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
    cmp: fn(&[u8], &[u8]) -> std::cmp::Ordering,
}

impl VecIterator {
    /// `entries` must already be sorted by `cmp`.
    pub fn new(
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        cmp: fn(&[u8], &[u8]) -> std::cmp::Ordering,
    ) -> Self {
        debug_assert!(entries.windows(2).all(|w| cmp(&w[0].0, &w[1].0).is_lt()));
        VecIterator {
            entries,
            pos: None,
            cmp,
        }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = if self.entries.is_empty() {
            None
        } else {
            Some(0)
        };
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.entries.len().checked_sub(1);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let cmp = self.cmp;
        let i = self
            .entries
            .partition_point(|(k, _)| cmp(k, target).is_lt());
        self.pos = (i < self.entries.len()).then_some(i);
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let cmp = self.cmp;
        let i = self
            .entries
            .partition_point(|(k, _)| cmp(k, target).is_le());
        self.pos = i.checked_sub(1);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos = self
            .pos
            .and_then(|p| (p + 1 < self.entries.len()).then_some(p + 1));
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos.expect("valid iterator")].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos.expect("valid iterator")].1
    }
}

//! The merging iterator: one sorted cursor over several sorted children (memtables, L0 tables,
//! levels), in either direction, using a binary heap of child indices.

use std::cmp::Ordering;

use crate::error::Result;
use crate::iter::InternalIterator;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges sorted children. Keys are expected to be distinct across children (internal keys
/// are); ties, if any, are broken by child position so the order is deterministic.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indices of the valid children, heap-ordered: smallest key at the root when moving
    /// forward, largest when moving backward.
    heap: Vec<usize>,
    direction: Direction,
    cmp: fn(&[u8], &[u8]) -> Ordering,
}

impl MergingIterator {
    /// Merges `children`, all ordered by `cmp`.
    pub fn new(
        children: Vec<Box<dyn InternalIterator>>,
        cmp: fn(&[u8], &[u8]) -> Ordering,
    ) -> Self {
        MergingIterator {
            heap: Vec::with_capacity(children.len()),
            children,
            direction: Direction::Forward,
            cmp,
        }
    }

    /// Index (in the order given to [`MergingIterator::new`]) of the child holding the current
    /// entry; `None` when invalid.
    pub fn current_child(&self) -> Option<usize> {
        self.heap.first().copied()
    }

    /// Moves the children `skip` selects past a range the caller knows holds nothing of theirs
    /// it reads (a range tombstone covers it): moving forward, each such child positioned
    /// before `target` seeks to it; moving backward, each positioned after `target` seeks to
    /// its last entry at or before it. The other children keep their places. Returns how many
    /// children moved; on error the iterator is left invalid.
    pub fn skip_children(
        &mut self,
        target: &[u8],
        mut skip: impl FnMut(usize) -> bool,
    ) -> Result<usize> {
        let cmp = self.cmp;
        let mut moved = 0;
        for n in 0..self.heap.len() {
            let i = self.heap[n];
            let c = &mut self.children[i];
            let behind = match self.direction {
                Direction::Forward => cmp(c.key(), target) == Ordering::Less,
                Direction::Reverse => cmp(c.key(), target) == Ordering::Greater,
            };
            if !behind || !skip(i) {
                continue;
            }
            let r = match self.direction {
                Direction::Forward => c.seek(target),
                Direction::Reverse => c.seek_for_prev(target),
            };
            self.guard(r)?;
            moved += 1;
        }
        if moved > 0 {
            self.rebuild(self.direction);
        }
        Ok(moved)
    }

    /// True when child `a` belongs nearer the root than child `b`.
    fn before(&self, a: usize, b: usize) -> bool {
        let o = (self.cmp)(self.children[a].key(), self.children[b].key()).then(a.cmp(&b));
        match self.direction {
            Direction::Forward => o == Ordering::Less,
            Direction::Reverse => o == Ordering::Greater,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                return;
            }
            let r = l + 1;
            let mut best = l;
            if r < n && self.before(self.heap[r], self.heap[l]) {
                best = r;
            }
            if self.before(self.heap[best], self.heap[i]) {
                self.heap.swap(best, i);
                i = best;
            } else {
                return;
            }
        }
    }

    fn rebuild(&mut self, direction: Direction) {
        self.direction = direction;
        self.heap.clear();
        self.heap
            .extend((0..self.children.len()).filter(|&i| self.children[i].valid()));
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    /// After the root child moved: restore the heap.
    fn fix_root(&mut self) {
        let root = self.heap[0];
        if self.children[root].valid() {
            self.sift_down(0);
        } else {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
            self.sift_down(0);
        }
    }

    fn on_all(
        &mut self,
        mut f: impl FnMut(&mut dyn InternalIterator) -> Result<()>,
        dir: Direction,
    ) -> Result<()> {
        for c in &mut self.children {
            if let Err(e) = f(c.as_mut()) {
                self.heap.clear();
                return Err(e);
            }
        }
        self.rebuild(dir);
        Ok(())
    }

    /// Runs `f` and, on error, leaves the iterator invalid.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.heap.clear();
        }
        r
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.on_all(|c| c.seek_to_first(), Direction::Forward)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.on_all(|c| c.seek_to_last(), Direction::Reverse)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.on_all(|c| c.seek(target), Direction::Forward)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.on_all(|c| c.seek_for_prev(target), Direction::Reverse)
    }

    fn next(&mut self) -> Result<()> {
        let current = self.heap[0];
        if self.direction == Direction::Reverse {
            // Every other child sits before the current key; move each to the first entry after
            // it, then rebuild for forward movement.
            let key = self.children[current].key().to_vec();
            let cmp = self.cmp;
            for i in 0..self.children.len() {
                if i == current {
                    continue;
                }
                let c = &mut self.children[i];
                let r = c.seek(&key).and_then(|_| {
                    if c.valid() && cmp(c.key(), &key) == Ordering::Equal {
                        c.next()
                    } else {
                        Ok(())
                    }
                });
                self.guard(r)?;
            }
            let r = self.children[current].next();
            self.guard(r)?;
            self.rebuild(Direction::Forward);
            return Ok(());
        }
        let r = self.children[current].next();
        self.guard(r)?;
        self.fix_root();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let current = self.heap[0];
        if self.direction == Direction::Forward {
            let key = self.children[current].key().to_vec();
            for i in 0..self.children.len() {
                if i == current {
                    continue;
                }
                let c = &mut self.children[i];
                let r = c.seek(&key).and_then(|_| {
                    if c.valid() {
                        c.prev()
                    } else {
                        c.seek_to_last()
                    }
                });
                self.guard(r)?;
            }
            let r = self.children[current].prev();
            self.guard(r)?;
            self.rebuild(Direction::Reverse);
            return Ok(());
        }
        let r = self.children[current].prev();
        self.guard(r)?;
        self.fix_root();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.children[self.heap[0]].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.heap[0]].value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;

    fn bytes_cmp(a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }

    fn child(keys: &[&str]) -> Box<dyn InternalIterator> {
        Box::new(VecIterator::new(
            keys.iter()
                .map(|k| (k.as_bytes().to_vec(), format!("v{k}").into_bytes()))
                .collect(),
            bytes_cmp,
        ))
    }

    fn merged() -> MergingIterator {
        MergingIterator::new(
            vec![
                child(&["b", "e", "h"]),
                child(&[]),
                child(&["a", "f"]),
                child(&["c", "d", "g", "i"]),
            ],
            bytes_cmp,
        )
    }

    fn collect_fwd(it: &mut MergingIterator) -> Vec<String> {
        let mut out = Vec::new();
        while it.valid() {
            out.push(String::from_utf8(it.key().to_vec()).expect("utf8"));
            it.next().expect("next");
        }
        out
    }

    #[test]
    fn forward_backward_and_seeks() {
        let mut it = merged();
        it.seek_to_first().expect("seek");
        assert_eq!(
            collect_fwd(&mut it),
            ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        );
        it.seek_to_last().expect("seek");
        let mut back = Vec::new();
        while it.valid() {
            back.push(String::from_utf8(it.key().to_vec()).expect("utf8"));
            it.prev().expect("prev");
        }
        assert_eq!(back, ["i", "h", "g", "f", "e", "d", "c", "b", "a"]);
        it.seek(b"dd").expect("seek");
        assert_eq!(it.key(), b"e");
        assert_eq!(it.value(), b"ve");
        it.seek_for_prev(b"dd").expect("seek");
        assert_eq!(it.key(), b"d");
        it.seek(b"z").expect("seek");
        assert!(!it.valid());
    }

    #[test]
    fn direction_changes_in_the_middle() {
        let mut it = merged();
        it.seek(b"e").expect("seek");
        it.prev().expect("prev");
        assert_eq!(it.key(), b"d");
        it.prev().expect("prev");
        assert_eq!(it.key(), b"c");
        it.next().expect("next");
        assert_eq!(it.key(), b"d");
        it.next().expect("next");
        assert_eq!(it.key(), b"e");
        it.next().expect("next");
        assert_eq!(it.key(), b"f");
        it.prev().expect("prev");
        assert_eq!(it.key(), b"e");
        // Reverse from the first entry runs off the front.
        it.seek_to_first().expect("seek");
        it.prev().expect("prev");
        assert!(!it.valid());
        it.seek_to_last().expect("seek");
        it.next().expect("next");
        assert!(!it.valid());
    }
}

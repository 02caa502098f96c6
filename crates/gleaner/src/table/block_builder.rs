//! Builds one prefix-compressed block: entries sharing a prefix with their predecessor, a full
//! key every `restart_interval` entries (a *restart point*), then the restart array.
//!
//! Entry: `varint32 shared | varint32 unshared | varint32 value_len | key[shared..] | value`.
//! Block: `entries | u32 restart_offset * n | u32 n` (little-endian).

use crate::coding::{put_fixed32, put_varint32};

/// Default number of entries between restart points.
pub const DEFAULT_RESTART_INTERVAL: usize = 16;

/// Accumulates entries of one block. Reused across blocks via [`BlockBuilder::reset`] so that
/// building a table allocates its buffers once.
#[derive(Debug, Clone)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries added since the last restart point.
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// An empty builder; `restart_interval` is clamped to at least 1 (1 = every key stored in
    /// full, used for index and properties blocks so a binary search lands on every entry).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Appends an entry. The caller guarantees that `key` sorts after the previous key in the
    /// block's order and that the block stays within the format's size limits (so every offset
    /// fits the u32 restart slots); the table builder checks both before calling.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished, "add after finish without reset");
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        let unshared = &key[shared..];
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, unshared.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.counter += 1;
    }

    /// Size of the block if it were finished now, restart array included.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// True when no entry has been added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and returns the finished block contents. Call
    /// [`BlockBuilder::reset`] before adding again.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &r in &self.restarts {
                put_fixed32(&mut self.buf, r);
            }
            put_fixed32(&mut self.buf, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buf
    }

    /// Empties the builder, keeping its buffers' capacity.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.finished = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_of_a_small_block() {
        let mut b = BlockBuilder::new(2);
        b.add(b"apple", b"1");
        b.add(b"apricot", b"22");
        b.add(b"banana", b"");
        assert_eq!(b.size_estimate(), b.clone().finish().len());
        let out = b.finish().to_vec();
        let mut expect = vec![0, 5, 1];
        expect.extend_from_slice(b"apple1");
        expect.extend_from_slice(&[2, 5, 2]);
        expect.extend_from_slice(b"ricot22");
        let restart1 = expect.len() as u32;
        expect.extend_from_slice(&[0, 6, 0]);
        expect.extend_from_slice(b"banana");
        expect.extend_from_slice(&0u32.to_le_bytes());
        expect.extend_from_slice(&restart1.to_le_bytes());
        expect.extend_from_slice(&2u32.to_le_bytes());
        assert_eq!(out, expect);
        b.reset();
        assert!(b.is_empty());
        assert_eq!(b.finish(), &[0, 0, 0, 0, 1, 0, 0, 0]);
    }
}

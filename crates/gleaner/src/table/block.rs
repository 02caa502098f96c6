//! A decoded (uncompressed, checksum-verified) block and its bidirectional iterator.
//!
//! The restart array is validated once, when the block is constructed; entries are validated as
//! the iterator reaches them, so a malformed entry turns the movement that reached it into
//! `Error::Corruption`, never a panic and never a wrong entry.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU8, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};

use crate::coding::{Decoder, decode_fixed32};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, seek_for_prev_via_seek};
use crate::key::{TRAILER_LEN, compare_internal};
use crate::table::restart_heads::{HEAD_BYTES, RestartHeads};

/// The order of keys in a block.
pub type Comparator = fn(&[u8], &[u8]) -> Ordering;

/// An immutable block: entries followed by the restart array. Shared as `Arc<Block>` between
/// the block cache and any number of iterators.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Where the restart array starts, which is also the end of the entry area.
    restarts_offset: usize,
    num_restarts: usize,
    file: Arc<str>,
    offset: u64,
    /// The heads of the restart keys, built at the second seek of an internal-key iterator
    /// (`None` inside: the restart entries do not give them; the search then reads keys).
    heads: OnceLock<Option<RestartHeads>>,
    /// Seeks that found the heads unbuilt. The first searches by keys: building the heads
    /// decodes every restart entry, where one search decodes a logarithm of them, so a block
    /// read for one search and not cached (`fill_cache` off: compaction's handle rewrites,
    /// some GC lookups, the garbage recount) never pays for them, and a block the cache
    /// shares builds them at its second seek.
    unbuilt_seeks: AtomicU8,
}

impl Block {
    /// Wraps uncompressed block contents read from `offset` of `file` (both only name the block
    /// in errors). Fails with `Error::Corruption` unless the restart count fits the block, the
    /// first restart is 0, and the restart offsets strictly increase and point into the entry
    /// area.
    pub fn new(data: Vec<u8>, file: Arc<str>, offset: u64) -> Result<Block> {
        let corrupt =
            |detail: String| Error::corruption(&*file, offset, format!("block: {detail}"));
        if data.len() < 4 {
            return Err(corrupt(format!(
                "{} bytes is too short for a restart count",
                data.len()
            )));
        }
        let num_restarts = decode_fixed32(&data[data.len() - 4..]) as usize;
        let max_restarts = (data.len() - 4) / 4;
        if num_restarts == 0 || num_restarts > max_restarts {
            return Err(corrupt(format!(
                "restart count {num_restarts} does not fit a {}-byte block",
                data.len()
            )));
        }
        let restarts_offset = data.len() - 4 - 4 * num_restarts;
        let block = Block {
            data,
            restarts_offset,
            num_restarts,
            file,
            offset,
            heads: OnceLock::new(),
            unbuilt_seeks: AtomicU8::new(0),
        };
        let mut prev = None;
        for i in 0..num_restarts {
            let r = block.restart_point(i);
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restarts_offset,
            };
            if !ok {
                return Err(block.corruption(format!(
                    "restart point {i} at {r} is out of order or outside the {restarts_offset}-byte entry area"
                )));
            }
            prev = Some(r);
        }
        Ok(block)
    }

    /// Size of the block contents in bytes (its weight in the block cache).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// Bytes of memory the block holds or will hold: its contents, and the heads a seek may
    /// build ([`HEAD_BYTES`] per restart point). The block cache charges this.
    pub fn charge(&self) -> usize {
        self.data.len() + HEAD_BYTES * self.num_restarts
    }

    /// The heads of the restart keys of a block of internal keys, built at the second call
    /// (see `unbuilt_seeks`); `None` before, and when a restart entry is damaged or its key
    /// shorter than a trailer.
    fn restart_heads(&self) -> Option<&RestartHeads> {
        if let Some(heads) = self.heads.get() {
            return heads.as_ref();
        }
        // Wrapping after 256 unbuilt seeks costs one more search by keys, no more: only seeks
        // racing the build count once the second has come.
        if self.unbuilt_seeks.fetch_add(1, AtomicOrdering::Relaxed) == 0 {
            return None;
        }
        self.heads
            .get_or_init(|| {
                let mut keys = Vec::with_capacity(self.num_restarts);
                let mut first_at = 0;
                for i in 0..self.num_restarts {
                    let at = self.restart_point(i);
                    let (shared, unshared, _, header_end) = self.decode_header(at).ok()?;
                    if shared != 0 || unshared < TRAILER_LEN {
                        return None;
                    }
                    if i == 0 {
                        first_at = header_end;
                    }
                    keys.push(&self.data[header_end..header_end + unshared - TRAILER_LEN]);
                }
                RestartHeads::new(&keys, first_at)
            })
            .as_ref()
    }

    /// Name of the file the block was read from.
    pub fn file_name(&self) -> &str {
        &self.file
    }

    /// Offset of the block in its file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Number of restart points (at least 1).
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    fn restart_point(&self, i: usize) -> usize {
        let at = self.restarts_offset + 4 * i;
        decode_fixed32(&self.data[at..at + 4]) as usize
    }

    fn corruption(&self, detail: impl std::fmt::Display) -> Error {
        Error::corruption(&*self.file, self.offset, format!("block: {detail}"))
    }

    /// Decodes the header of the entry at `at` (which must be inside the entry area):
    /// `(shared, unshared, value_len, header_end)`, with the key delta and value checked to end
    /// within the entry area.
    fn decode_header(&self, at: usize) -> Result<(usize, usize, usize, usize)> {
        let area = &self.data[..self.restarts_offset];
        let mut d = Decoder::new(&area[at..]);
        let parsed = (|| {
            let shared = d.varint32()? as usize;
            let unshared = d.varint32()? as usize;
            let value_len = d.varint32()? as usize;
            let header_end = at + d.position();
            let end = header_end.checked_add(unshared)?.checked_add(value_len)?;
            (end <= area.len()).then_some((shared, unshared, value_len, header_end))
        })();
        parsed.ok_or_else(|| {
            self.corruption(format!(
                "entry at byte {at} has a truncated header or runs past the entry area"
            ))
        })
    }
}

/// A cursor over one block. Owns its block (`Arc`), keeps the current key in an owned buffer
/// (keys are prefix-compressed, so they must be reassembled) and the value as a range of the
/// block.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    cmp: Comparator,
    /// Keys shorter than this are corruption (8 for internal keys, whose comparator would
    /// otherwise be handed a key without a trailer).
    min_key_len: usize,
    key: Vec<u8>,
    value: (usize, usize),
    /// Offset of the current entry.
    current: usize,
    /// Offset just past the current entry: where `next` parses.
    next_offset: usize,
    /// Index of the restart region holding the current entry.
    restart_index: usize,
    valid: bool,
    /// Seeks search the block's restart heads (internal keys only: the heads are of user
    /// keys).
    by_heads: bool,
}

impl BlockIter {
    /// An iterator ordering keys by `cmp`, treating keys shorter than `min_key_len` as
    /// corruption. Starts unpositioned.
    pub fn new(block: Arc<Block>, cmp: Comparator, min_key_len: usize) -> Self {
        BlockIter {
            block,
            cmp,
            min_key_len,
            // Room for a typical key up front: one allocation, where growing from empty
            // reallocates whenever a later key is longer than the first.
            key: Vec::with_capacity(64),
            value: (0, 0),
            current: 0,
            next_offset: 0,
            restart_index: 0,
            valid: false,
            by_heads: false,
        }
    }

    /// An iterator over internal keys ([`compare_internal`]): data and index blocks. Its seeks
    /// search the block's restart heads.
    pub fn internal(block: Arc<Block>) -> Self {
        BlockIter {
            by_heads: true,
            ..Self::new(block, compare_internal, TRAILER_LEN)
        }
    }

    /// An iterator over plain byte-string keys: the properties block.
    pub fn bytewise(block: Arc<Block>) -> Self {
        Self::new(block, <[u8]>::cmp, 0)
    }

    /// The block this iterator walks.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    fn invalidate(&mut self) {
        self.valid = false;
        self.key.clear();
        self.value = (0, 0);
        self.current = self.block.restarts_offset;
        self.next_offset = self.block.restarts_offset;
    }

    /// Leaves the iterator invalid when a movement failed.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.invalidate();
        }
        r
    }

    /// Positions before the entry at restart point `i`; the next `parse_next` reads it.
    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next_offset = self.block.restart_point(i);
    }

    /// Parses the entry at `next_offset`. Returns false (and invalidates) at the end of the
    /// entry area.
    fn parse_next(&mut self) -> Result<bool> {
        let block = &*self.block;
        let at = self.next_offset;
        if at >= block.restarts_offset {
            self.invalidate();
            return Ok(false);
        }
        let (shared, unshared, value_len, header_end) = block.decode_header(at)?;
        let mut ri = self.restart_index;
        while ri + 1 < block.num_restarts && block.restart_point(ri + 1) <= at {
            ri += 1;
        }
        if shared > self.key.len() {
            return Err(block.corruption(format!(
                "entry at byte {at} shares {shared} bytes with a {}-byte previous key",
                self.key.len()
            )));
        }
        if block.restart_point(ri) == at && shared != 0 {
            return Err(block.corruption(format!(
                "entry at restart point {ri} (byte {at}) has a shared prefix"
            )));
        }
        let key_end = header_end + unshared;
        let entry_end = key_end + value_len;
        if ri + 1 < block.num_restarts && block.restart_point(ri + 1) < entry_end {
            return Err(block.corruption(format!(
                "restart point {} falls inside the entry at byte {at}",
                ri + 1
            )));
        }
        if shared + unshared < self.min_key_len {
            return Err(block.corruption(format!(
                "entry at byte {at} has a {}-byte key, shorter than {}",
                shared + unshared,
                self.min_key_len
            )));
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(&block.data[header_end..key_end]);
        self.value = (key_end, entry_end);
        self.current = at;
        self.next_offset = entry_end;
        self.restart_index = ri;
        self.valid = true;
        Ok(true)
    }

    /// The full key stored at restart point `i`.
    fn restart_key(&self, i: usize) -> Result<&[u8]> {
        let at = self.block.restart_point(i);
        let (shared, unshared, _, header_end) = self.block.decode_header(at)?;
        if shared != 0 || unshared < self.min_key_len {
            return Err(self.block.corruption(format!(
                "entry at restart point {i} (byte {at}) has a shared prefix or a short key"
            )));
        }
        Ok(&self.block.data[header_end..header_end + unshared])
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        // Binary search for the last restart point whose key is before the target; the first
        // entry at or after the target is in its region or starts the next one. A probe is
        // decided by the restart heads where they differ from the target's, and by the keys
        // otherwise (or when the block has no heads for this target).
        let heads = self.heads_for(target);
        let (mut left, mut right) = (0, self.block.num_restarts - 1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let before = match heads.map(|(h, wanted)| h.get(mid).cmp(&wanted)) {
                Some(Ordering::Less) => true,
                Some(Ordering::Greater) => false,
                _ => (self.cmp)(self.restart_key(mid)?, target) == Ordering::Less,
            };
            if before {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        while self.parse_next()? {
            if (self.cmp)(&self.key, target) != Ordering::Less {
                break;
            }
        }
        Ok(())
    }

    /// The block's restart heads and the target's head, for `seek_inner`'s search: `None` when
    /// this iterator does not search heads, the block has none (yet), or the target lies
    /// outside their prefix.
    fn heads_for(&self, target: &[u8]) -> Option<(&RestartHeads, u64)> {
        if !self.by_heads || target.len() < TRAILER_LEN {
            return None;
        }
        let heads = self.block.restart_heads()?;
        let user_key = &target[..target.len() - TRAILER_LEN];
        Some((heads, heads.head_of(&self.block.data, user_key)?))
    }

    fn seek_to_last_inner(&mut self) -> Result<()> {
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next()? && self.next_offset < self.block.restarts_offset {}
        Ok(())
    }

    fn prev_inner(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let original = self.current;
        let mut ri = self.restart_index;
        while self.block.restart_point(ri) >= original {
            if ri == 0 {
                self.invalidate();
                return Ok(());
            }
            ri -= 1;
        }
        self.seek_to_restart(ri);
        loop {
            if !self.parse_next()? {
                return Err(self
                    .block
                    .corruption(format!("entry before byte {original} is unreachable")));
            }
            match self.next_offset.cmp(&original) {
                Ordering::Less => {}
                Ordering::Equal => return Ok(()),
                Ordering::Greater => {
                    return Err(self
                        .block
                        .corruption(format!("entries overlap the entry at byte {original}")));
                }
            }
        }
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_to_restart(0);
        let r = self.parse_next().map(|_| ());
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
        let cmp = self.cmp;
        let r = seek_for_prev_via_seek(self, target, cmp);
        self.guard(r)
    }

    fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let r = self.parse_next().map(|_| ());
        self.guard(r)
    }

    fn prev(&mut self) -> Result<()> {
        let r = self.prev_inner();
        self.guard(r)
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        &self.block.data[self.value.0..self.value.1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use crate::table::block_builder::BlockBuilder;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        Arc::new(Block::new(b.finish().to_vec(), "t.sst".into(), 7).unwrap())
    }

    /// Sorted internal keys with shared prefixes and several versions per user key.
    fn model(rng: &mut StdRng, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
            .map(|_| {
                let user = format!("key{:05}", rng.random_range(0..n * 2));
                let seq = rng.random_range(0..1000);
                let kind = if rng.random_bool(0.2) {
                    ValueKind::Deletion
                } else {
                    ValueKind::Value
                };
                let value = vec![b'v'; rng.random_range(0..20)];
                (make_internal_key(user.as_bytes(), seq, kind), value)
            })
            .collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        v.dedup_by(|a, b| compare_internal(&a.0, &b.0).is_eq());
        v
    }

    fn collect_forward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        out
    }

    fn collect_backward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_last().unwrap();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        out.reverse();
        out
    }

    /// Keys drawn from {0, 1, 2} and of 0 to 12 bytes, so that blocks have long shared
    /// prefixes, keys that are prefixes of others, zero bytes that look like a head's padding,
    /// and many equal heads.
    fn tight_keys(rng: &mut StdRng, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
            .map(|_| {
                let len = rng.random_range(0..13);
                let user: Vec<u8> = (0..len).map(|_| rng.random_range(0..3u8)).collect();
                let seq = rng.random_range(0..50);
                (make_internal_key(&user, seq, ValueKind::Value), vec![b'v'])
            })
            .collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        v.dedup_by(|a, b| compare_internal(&a.0, &b.0).is_eq());
        v
    }

    /// A block sought once (read for one search, as an uncached block is) never builds its
    /// heads; the second seek does, and the later ones use them.
    #[test]
    fn heads_are_built_at_the_second_seek() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..100u32)
            .map(|i| {
                let user = format!("key{i:05}").into_bytes();
                (make_internal_key(&user, 1, ValueKind::Value), vec![b'v'])
            })
            .collect();
        let block = build(&entries, 4);
        let target = make_internal_key(b"key00042", 9, ValueKind::Value);
        let mut it = BlockIter::internal(Arc::clone(&block));
        it.seek(&target).unwrap();
        assert_eq!(it.key(), &entries[42].0[..]);
        assert!(block.heads.get().is_none(), "one seek builds no heads");
        it.seek(&target).unwrap();
        assert_eq!(it.key(), &entries[42].0[..]);
        assert!(
            block.heads.get().is_some_and(Option::is_some),
            "the second seek built them"
        );
    }

    #[test]
    fn seeks_by_restart_heads_land_where_seeks_by_keys_do() {
        let mut rng = StdRng::seed_from_u64(9);
        for round in 0..60 {
            let n = rng.random_range(1..400);
            let entries = tight_keys(&mut rng, n);
            let interval = [1, 2, 5, 16][round % 4];
            let block = build(&entries, interval);
            let mut by_heads = BlockIter::internal(Arc::clone(&block));
            let mut by_keys = BlockIter::new(Arc::clone(&block), compare_internal, TRAILER_LEN);
            for _ in 0..300 {
                let len = rng.random_range(0..14);
                let user: Vec<u8> = (0..len).map(|_| rng.random_range(0..3u8)).collect();
                let target = make_internal_key(&user, rng.random_range(0..60), ValueKind::Value);
                by_heads.seek(&target).unwrap();
                by_keys.seek(&target).unwrap();
                assert_eq!(by_heads.valid(), by_keys.valid(), "round {round}: {target:?}");
                if by_keys.valid() {
                    assert_eq!(by_heads.key(), by_keys.key(), "round {round}: {target:?}");
                }
            }
            assert!(
                block.restart_heads().is_some(),
                "round {round}: a sound block has heads"
            );
        }
    }

    #[test]
    fn round_trip_many_keys() {
        let mut rng = StdRng::seed_from_u64(1);
        let entries = model(&mut rng, 2000);
        for interval in [1, 2, 16, 1000] {
            let block = build(&entries, interval);
            let mut it = BlockIter::internal(block);
            assert_eq!(collect_forward(&mut it), entries, "interval {interval}");
            assert_eq!(collect_backward(&mut it), entries, "interval {interval}");
        }
    }

    #[test]
    fn empty_block() {
        let block = build(&[], 16);
        let mut it = BlockIter::internal(block);
        it.seek_to_first().unwrap();
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        assert!(!it.valid());
        it.seek(&make_internal_key(b"a", 1, ValueKind::Value))
            .unwrap();
        assert!(!it.valid());
        it.seek_for_prev(&make_internal_key(b"a", 1, ValueKind::Value))
            .unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn seeks_and_steps_match_a_sorted_model() {
        let mut rng = StdRng::seed_from_u64(42);
        for interval in [1, 3, 16] {
            let entries = model(&mut rng, 500);
            let block = build(&entries, interval);
            let mut it = BlockIter::internal(block);
            for _ in 0..2000 {
                let user = format!("key{:05}", rng.random_range(0..1001));
                let target = make_internal_key(user.as_bytes(), rng.random_range(0..1000), {
                    if rng.random_bool(0.5) {
                        ValueKind::Value
                    } else {
                        ValueKind::Deletion
                    }
                });
                let ge = entries.partition_point(|(k, _)| compare_internal(k, &target).is_lt());
                let le = entries.partition_point(|(k, _)| compare_internal(k, &target).is_le());
                let mut pos = if rng.random_bool(0.5) {
                    it.seek(&target).unwrap();
                    (ge < entries.len()).then_some(ge)
                } else {
                    it.seek_for_prev(&target).unwrap();
                    le.checked_sub(1)
                };
                // A few random steps from there.
                for _ in 0..5 {
                    match pos {
                        Some(p) => {
                            assert!(it.valid());
                            assert_eq!(it.key(), &entries[p].0[..]);
                            assert_eq!(it.value(), &entries[p].1[..]);
                        }
                        None => {
                            assert!(!it.valid());
                            break;
                        }
                    }
                    if rng.random_bool(0.5) {
                        it.next().unwrap();
                        pos = pos.and_then(|p| (p + 1 < entries.len()).then_some(p + 1));
                    } else {
                        it.prev().unwrap();
                        pos = pos.and_then(|p| p.checked_sub(1));
                    }
                }
            }
        }
    }

    #[test]
    fn bytewise_blocks() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = ["a", "ab", "abc", "b", "zz"]
            .iter()
            .map(|k| (k.as_bytes().to_vec(), k.as_bytes().to_vec()))
            .collect();
        let mut it = BlockIter::bytewise(build(&entries, 2));
        assert_eq!(collect_forward(&mut it), entries);
        it.seek(b"abb").unwrap();
        assert_eq!(it.key(), b"abc");
        it.seek_for_prev(b"abb").unwrap();
        assert_eq!(it.key(), b"ab");
        it.seek(b"zzz").unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn bad_restart_arrays_are_rejected() {
        let name: Arc<str> = "x.sst".into();
        let mk = |entries: &[u8], restarts: &[u32], count: u32| {
            let mut v = entries.to_vec();
            for r in restarts {
                v.extend_from_slice(&r.to_le_bytes());
            }
            v.extend_from_slice(&count.to_le_bytes());
            v
        };
        let entry = [0u8, 1, 0, b'a'];
        for data in [
            vec![],
            vec![1, 0, 0],
            mk(&entry, &[], 0),
            mk(&entry, &[0], 2),
            mk(&entry, &[0], u32::MAX),
            mk(&entry, &[1], 1),
            mk(&entry, &[0, 0], 2),
            mk(&entry, &[0, 4], 2),
            mk(&entry, &[0, 9], 2),
            mk(&[], &[0, 1], 2),
        ] {
            let err = Block::new(data.clone(), name.clone(), 99).unwrap_err();
            match &err {
                Error::Corruption { file, offset, .. } => {
                    assert_eq!((file.as_str(), *offset), ("x.sst", 99), "{data:?}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(Block::new(mk(&entry, &[0], 1), name.clone(), 0).is_ok());
        assert!(Block::new(mk(&[], &[0], 1), name, 0).is_ok());
    }

    #[test]
    fn malformed_entries_are_errors() {
        let name: Arc<str> = "x.sst".into();
        let block = |entries: &[u8], restarts: &[u32]| {
            let mut v = entries.to_vec();
            for r in restarts {
                v.extend_from_slice(&r.to_le_bytes());
            }
            v.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
            Arc::new(Block::new(v, name.clone(), 0).unwrap())
        };
        let check = |b: Arc<Block>| {
            let mut it = BlockIter::bytewise(b);
            let r = it.seek_to_first().and_then(|()| {
                while it.valid() {
                    it.next()?;
                }
                Ok(())
            });
            assert!(r.unwrap_err().is_corruption());
            assert!(!it.valid());
        };
        // Shared prefix longer than the previous key.
        check(block(&[0, 1, 0, b'a', 2, 1, 0, b'b'], &[0]));
        // Shared prefix at a restart point.
        check(block(&[1, 1, 0, b'a'], &[0]));
        // Value running past the entry area.
        check(block(&[0, 1, 5, b'a', b'x'], &[0]));
        // Truncated header.
        check(block(&[0, 1, 0, b'a', 0x80], &[0]));
        // Restart point inside an entry.
        check(block(&[0, 1, 2, b'a', b'x', b'y', 0, 1, 0, b'b'], &[0, 5]));
        // Internal keys shorter than a trailer.
        let b = block(&[0, 3, 0, b'a', b'b', b'c'], &[0]);
        let mut it = BlockIter::internal(b);
        assert!(it.seek_to_first().unwrap_err().is_corruption());
        assert!(
            it.seek(&make_internal_key(b"a", 1, ValueKind::Value))
                .unwrap_err()
                .is_corruption()
        );
    }

    #[test]
    fn random_damage_never_panics() {
        let mut rng = StdRng::seed_from_u64(7);
        let entries = model(&mut rng, 200);
        let mut good = BlockBuilder::new(4);
        for (k, v) in &entries {
            good.add(k, v);
        }
        let good = good.finish().to_vec();
        let target = make_internal_key(b"key00100", 500, ValueKind::Value);
        for round in 0..3000 {
            let mut data = good.clone();
            if round % 10 == 0 {
                let len = rng.random_range(0..64);
                data = (0..len).map(|_| rng.random()).collect();
            } else {
                for _ in 0..rng.random_range(1..4) {
                    let i = rng.random_range(0..data.len());
                    data[i] = rng.random();
                }
            }
            let Ok(block) = Block::new(data, "x".into(), 0) else {
                continue;
            };
            let mut it = BlockIter::internal(Arc::new(block));
            let _ = it.seek(&target);
            let _ = it.seek_for_prev(&target);
            for _ in 0..3 {
                let _ = it.prev();
            }
            let _ = it.seek_to_last();
            let mut steps = 0;
            while it.valid() && steps < 500 {
                let _ = it.prev();
                steps += 1;
            }
            let _ = it.seek_to_first();
            while it.valid() && steps < 1000 {
                let _ = it.next();
                steps += 1;
            }
        }
    }
}

//! The memtable's key filter: a blocked bloom filter over the user keys of the versions a
//! memtable holds, so that a point lookup of a key the memtable does not hold (most lookups,
//! once the data outgrows one memtable) costs one cache line instead of a skiplist search, whose
//! every level is a cache miss when the values beside the keys are large.
//!
//! Each key sets [`PROBES`] bits of one 64-byte line chosen by its hash, so a lookup touches one
//! line. The filter lives only in memory and is never written: a flushed table has its own.
//! It is sized once, from `memtable_size` ([`MemFilter::for_memtable_size`]); a memtable that
//! grows past that (one large batch) only answers "maybe" more often.
//!
//! Bits are set before the version enters the skiplist, by the one thread that inserts (the
//! write group's leader, or recovery before any reader), and the sequence number that makes
//! the version visible is published after it with `Release`: a reader that may see the version
//! has also seen its bits, so the filter never hides a version from a reader.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::table::bloom::bloom_hash;

/// Bits set per key, all in one line. With the sizing below (at least 11 bits per key for the
/// smallest entries a memtable counts), about 1 % false positives.
const PROBES: u32 = 6;

/// Bytes of `memtable_size` per byte of filter: an entry is counted at no less than 88 bytes
/// (its trailer and the skiplist's overhead, with an empty key and value), so this gives at
/// least 11 bits per key; 1 MiB for the default 64 MiB memtable.
const MEMTABLE_BYTES_PER_FILTER_BYTE: u64 = 64;

/// Most bytes of filter one memtable holds, whatever `memtable_size` says.
pub(crate) const MAX_FILTER_BYTES: u64 = 16 << 20;

/// One cache line of filter bits.
#[repr(align(64))]
#[derive(Default)]
struct Line([AtomicU64; 8]);

/// A concurrent blocked bloom filter over user keys.
pub(crate) struct MemFilter {
    lines: Box<[Line]>,
}

impl MemFilter {
    /// A filter for a memtable of `memtable_size` bytes: `memtable_size / 64` bytes, between
    /// one line and [`MAX_FILTER_BYTES`].
    pub(crate) fn for_memtable_size(memtable_size: u64) -> Self {
        let bytes = (memtable_size / MEMTABLE_BYTES_PER_FILTER_BYTE).clamp(64, MAX_FILTER_BYTES);
        let lines = (bytes / 64) as usize;
        MemFilter {
            lines: (0..lines).map(|_| Line::default()).collect(),
        }
    }

    /// Bytes of memory the filter's bits take.
    #[cfg(test)]
    fn size_bytes(&self) -> u64 {
        self.lines.len() as u64 * 64
    }

    /// The line of `hash` and the eight words of bits its key sets there.
    fn place(&self, hash: u64) -> (&Line, [u64; 8]) {
        // The line from the high half (a multiply-shift maps it onto the line count without a
        // division), the bit positions from a remix of the whole hash, nine bits each: the
        // lower of them depend on the hash's low half only, so the line must not.
        let line = ((hash >> 32) * self.lines.len() as u64) >> 32;
        let mut bits = hash.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut words = [0u64; 8];
        for _ in 0..PROBES {
            let bit = (bits >> 55) as usize;
            words[bit / 64] |= 1 << (bit % 64);
            bits <<= 9;
        }
        (&self.lines[line as usize], words)
    }

    /// Adds `user_key`.
    pub(crate) fn insert(&self, user_key: &[u8]) {
        let (line, words) = self.place(bloom_hash(user_key));
        for (slot, w) in line.0.iter().zip(words) {
            if w != 0 {
                slot.fetch_or(w, Ordering::Release);
            }
        }
    }

    /// False only if `user_key` was never added.
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        let (line, words) = self.place(bloom_hash(user_key));
        line.0
            .iter()
            .zip(words)
            .all(|(slot, w)| slot.load(Ordering::Acquire) & w == w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_added_key_is_found() {
        let f = MemFilter::for_memtable_size(1 << 20);
        for i in 0..20_000u32 {
            f.insert(format!("key{i}").as_bytes());
        }
        for i in 0..20_000u32 {
            assert!(f.may_contain(format!("key{i}").as_bytes()), "key{i}");
        }
    }

    #[test]
    fn absent_keys_are_mostly_ruled_out_at_the_sized_load() {
        // 1 MiB memtable of the smallest counted entries (about 100 bytes): ~10,000 keys in a
        // 16 KiB filter, 13 bits each.
        let f = MemFilter::for_memtable_size(1 << 20);
        assert_eq!(f.size_bytes(), 16 << 10);
        for i in 0..10_000u32 {
            f.insert(format!("key{i}").as_bytes());
        }
        let false_positives = (0..100_000u32)
            .filter(|i| f.may_contain(format!("absent{i}").as_bytes()))
            .count();
        assert!(
            false_positives < 3_000,
            "{false_positives} of 100,000 absent keys pass"
        );
        let empty = MemFilter::for_memtable_size(1 << 20);
        assert!(!empty.may_contain(b"key1"), "an empty filter holds nothing");
    }

    #[test]
    fn size_is_bounded_both_ways() {
        assert_eq!(MemFilter::for_memtable_size(0).size_bytes(), 64);
        assert_eq!(MemFilter::for_memtable_size(64 << 20).size_bytes(), 1 << 20);
        assert_eq!(
            MemFilter::for_memtable_size(u64::MAX).size_bytes(),
            MAX_FILTER_BYTES
        );
    }
}

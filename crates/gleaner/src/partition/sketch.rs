//! A count-min sketch: how often each key was accessed, in fixed memory, never under-counted
//! (DP-KV's per-key counter, which keeps keys accessed rarely out of the prefix trie).
//!
//! `DEPTH` rows of `width` saturating counters; a key adds one to a counter of each row (its
//! own hash per row) and its estimate is the least of them. Collisions only add, so the
//! estimate is at least the true count since the last decay; with `width` counters per row it
//! exceeds it by more than `2 · accesses / width` with probability at most `2^-DEPTH`.

/// Rows of counters (each a hash of its own).
const DEPTH: usize = 4;
/// Fewest counters per row.
pub const MIN_WIDTH: usize = 64;

/// The sketch.
#[derive(Debug, Clone)]
pub struct CountMinSketch {
    width: usize,
    counters: Vec<u32>,
}

impl CountMinSketch {
    /// A sketch of `bytes` of counters (at least `MIN_WIDTH` per row), all zero.
    pub fn with_bytes(bytes: usize) -> Self {
        let width = (bytes / (DEPTH * size_of::<u32>())).max(MIN_WIDTH);
        CountMinSketch {
            width,
            counters: vec![0; width * DEPTH],
        }
    }

    /// The bytes its counters take.
    pub fn bytes(&self) -> usize {
        self.counters.len() * size_of::<u32>()
    }

    /// Counts one access of `key`; returns its estimate, this access included.
    pub fn add(&mut self, key: &[u8]) -> u32 {
        let mut least = u32::MAX;
        for row in 0..DEPTH {
            let i = self.slot(row, key);
            let c = &mut self.counters[i];
            *c = c.saturating_add(1);
            least = least.min(*c);
        }
        least
    }

    /// The estimate of `key`'s accesses: at least the true count since the last decay.
    pub fn estimate(&self, key: &[u8]) -> u32 {
        (0..DEPTH)
            .map(|row| self.counters[self.slot(row, key)])
            .min()
            .unwrap_or(0)
    }

    /// Halves every counter (the periodic decay: old accesses weigh less).
    pub fn decay(&mut self) {
        for c in &mut self.counters {
            *c /= 2;
        }
    }

    fn slot(&self, row: usize, key: &[u8]) -> usize {
        let h = hash(key, row as u64);
        row * self.width + (h % self.width as u64) as usize
    }
}

/// A 64-bit hash of `key` under `seed` (FNV-1a, then a SplitMix64 finaliser so that every bit
/// of the key reaches every bit of the result). In memory only: never stored.
fn hash(key: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_never_undercount_and_decay_halves() {
        let mut s = CountMinSketch::with_bytes(4096);
        assert_eq!(s.bytes(), 4096);
        let key = |i: u32| format!("key{i:06}").into_bytes();
        // Key i accessed i % 7 times, 2,000 keys: 256 counters a row, so collisions happen.
        for i in 0..2000 {
            for _ in 0..i % 7 {
                s.add(&key(i));
            }
        }
        let mut over = 0;
        for i in 0..2000 {
            let e = s.estimate(&key(i));
            assert!(e >= i % 7, "key {i}: {e} < {}", i % 7);
            over += u64::from(e - i % 7);
        }
        // Total accesses 5,994 over 256 counters a row: about 23 added per counter; the least
        // of four rows is far less on average.
        assert!(over / 2000 < 23, "mean overcount {}", over / 2000);
        let before = s.estimate(&key(6));
        s.decay();
        assert_eq!(s.estimate(&key(6)), before / 2);
        assert_eq!(s.add(b"fresh"), s.estimate(b"fresh"));
    }

    #[test]
    fn small_budgets_keep_a_minimum_width_and_counters_saturate() {
        let mut s = CountMinSketch::with_bytes(0);
        assert_eq!(s.bytes(), MIN_WIDTH * DEPTH * 4);
        s.counters.fill(u32::MAX);
        assert_eq!(s.add(b"k"), u32::MAX);
    }
}

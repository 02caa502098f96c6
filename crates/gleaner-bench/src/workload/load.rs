//! The load order: every key number `0..count` inserted exactly once, in a seeded random
//! order, split across client threads — without a `count`-entry shuffle table, which at the
//! papers' scale (100 GB of values, hundreds of millions of keys) would cost gigabytes.

use super::permute::Permutation;

/// A shuffled order of `0..count` from a seeded bijection (a Feistel network on the next power
/// of two with cycle-walking; O(1) memory, O(1) expected time per key).
///
/// Thread `t` of `n` takes positions `t·count/n .. (t+1)·count/n` of the shuffled order, so the
/// parts are disjoint, cover every key, and each is itself in random key order.
#[derive(Debug, Clone)]
pub struct LoadOrder {
    permutation: Permutation,
}

impl LoadOrder {
    /// The order of `0..count` given by `seed`.
    pub fn new(count: u64, seed: u64) -> Self {
        LoadOrder {
            permutation: Permutation::new(count, seed),
        }
    }

    /// The number of keys loaded.
    pub fn count(&self) -> u64 {
        self.permutation.count()
    }

    /// The key number at `position` of the whole order (`position < count`).
    pub fn at(&self, position: u64) -> u64 {
        self.permutation.apply(position)
    }

    /// The key numbers thread `thread` of `threads` inserts. Panics if `threads` is 0 or
    /// `thread >= threads`.
    pub fn part(&self, thread: usize, threads: usize) -> impl Iterator<Item = u64> + use<> {
        assert!(thread < threads, "thread {thread} of {threads}");
        let count = self.count() as u128;
        // u128: count · thread overflows u64 for counts near 2^64.
        let bound = |t: usize| (count * t as u128 / threads as u128) as u64;
        let permutation = self.permutation.clone();
        (bound(thread)..bound(thread + 1)).map(move |position| permutation.apply(position))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_every_key_exactly_once() {
        for count in [1000u64, 100_003] {
            for threads in 1..=3 {
                let order = LoadOrder::new(count, 42);
                let mut seen = vec![0u8; count as usize];
                let mut sizes = Vec::new();
                for t in 0..threads {
                    let part: Vec<u64> = order.part(t, threads).collect();
                    sizes.push(part.len());
                    for n in part {
                        seen[n as usize] += 1;
                    }
                }
                assert!(
                    seen.iter().all(|&s| s == 1),
                    "count {count}, {threads} threads"
                );
                let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(max - min <= 1, "balanced parts: {sizes:?}");
            }
        }
    }

    #[test]
    fn order_is_shuffled_and_seeded() {
        let a: Vec<u64> = LoadOrder::new(1000, 1).part(0, 1).take(50).collect();
        let again: Vec<u64> = LoadOrder::new(1000, 1).part(0, 1).take(50).collect();
        let b: Vec<u64> = LoadOrder::new(1000, 2).part(0, 1).take(50).collect();
        assert_eq!(a, again);
        assert_ne!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<u64>>());
        assert_eq!(LoadOrder::new(1000, 1).at(3), a[3]);
    }

    #[test]
    fn tiny_counts() {
        assert_eq!(LoadOrder::new(0, 5).part(0, 2).count(), 0);
        assert_eq!(LoadOrder::new(1, 5).part(0, 1).collect::<Vec<_>>(), vec![0]);
        let mut two: Vec<u64> = (0..4)
            .flat_map(|t| LoadOrder::new(2, 5).part(t, 4))
            .collect();
        two.sort_unstable();
        assert_eq!(two, vec![0, 1]);
    }
}

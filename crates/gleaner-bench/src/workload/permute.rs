//! A seeded pseudo-random bijection on `0..count` that needs no table: a Feistel network on the
//! smallest power of two ≥ count, with cycle-walking to stay below count. Used for the load
//! order (every key once, shuffled) and to scramble Zipfian ranks over the key space.

/// Feistel rounds. Four rounds of a good round function make a pseudo-random permutation
/// (Luby–Rackoff); an even number brings the two halves back to their starting widths.
const ROUNDS: usize = 4;

/// The splitmix64 finalizer (Steele et al.): a fast 64-bit mixer whose every output bit
/// depends on every input bit. It is the Feistel round function and derives round keys.
pub(crate) fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The low `bits` bits set (`bits` ≤ 32 here).
fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// A bijection of `0..count` chosen by a seed; `apply` is O(1) expected (under two Feistel
/// passes on average) and nothing is stored per element.
#[derive(Debug, Clone)]
pub(crate) struct Permutation {
    count: u64,
    /// Width of the high ("left") half; the low half has `right_bits`.
    left_bits: u32,
    right_bits: u32,
    keys: [u64; ROUNDS],
}

impl Permutation {
    /// A permutation of `0..count` (`count` may be 0 or 1: then there is nothing to permute).
    pub(crate) fn new(count: u64, seed: u64) -> Self {
        // Bits to write count − 1, the largest element: the Feistel domain is 2^bits < 2·count,
        // so cycle-walking takes fewer than two passes on average.
        let bits = 64 - count.saturating_sub(1).leading_zeros();
        let right_bits = bits / 2;
        let mut state = seed;
        let keys = std::array::from_fn(|_| {
            state = mix64(state);
            state
        });
        Permutation {
            count,
            left_bits: bits - right_bits,
            right_bits,
            keys,
        }
    }

    /// The number of elements permuted.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The image of `x` (which must be below the count).
    pub(crate) fn apply(&self, x: u64) -> u64 {
        debug_assert!(x < self.count);
        // Cycle-walking: a bijection on the power-of-two domain, iterated until it lands back
        // in 0..count, restricted to 0..count is a bijection of 0..count (Black & Rogaway).
        let mut y = self.feistel(x);
        while y >= self.count {
            y = self.feistel(y);
        }
        y
    }

    fn feistel(&self, x: u64) -> u64 {
        let (mut left_bits, mut right_bits) = (self.left_bits, self.right_bits);
        // Halves are at most 32 bits wide, so the shifts below cannot overflow.
        let mut left = x >> right_bits;
        let mut right = x & mask(right_bits);
        for key in self.keys {
            // (L, R) → (R, L ⊕ F(R)): invertible whatever F is; the halves swap widths.
            let new_right = left ^ (mix64(right ^ key) & mask(left_bits));
            left = right;
            right = new_right;
            std::mem::swap(&mut left_bits, &mut right_bits);
        }
        // After an even number of rounds the widths are back where they started.
        (left << right_bits) | right
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_permutation(count: u64, seed: u64) -> bool {
        let p = Permutation::new(count, seed);
        let mut seen = vec![false; count as usize];
        for x in 0..count {
            let y = p.apply(x);
            if y >= count || seen[y as usize] {
                return false;
            }
            seen[y as usize] = true;
        }
        true
    }

    #[test]
    fn bijective_for_awkward_counts() {
        for count in [0, 1, 2, 3, 5, 7, 8, 9, 1000, 1023, 1024, 1025, 65_537] {
            for seed in [0, 1, 0xDEAD_BEEF] {
                assert!(is_permutation(count, seed), "count {count} seed {seed}");
            }
        }
    }

    #[test]
    fn huge_counts_stay_in_range() {
        for count in [u64::MAX, 1 << 63, (1 << 40) + 3] {
            let p = Permutation::new(count, 9);
            for x in [0, 1, count / 2, count - 1] {
                assert!(p.apply(x) < count);
            }
            assert_ne!(p.apply(0), p.apply(1));
        }
    }

    #[test]
    fn seeds_give_different_shuffles_that_look_random() {
        let a: Vec<u64> = (0..100)
            .map(|x| Permutation::new(1000, 1).apply(x))
            .collect();
        let b: Vec<u64> = (0..100)
            .map(|x| Permutation::new(1000, 2).apply(x))
            .collect();
        assert_ne!(a, b);
        // Consecutive inputs should not stay neighbours.
        let close = a.windows(2).filter(|w| w[0].abs_diff(w[1]) < 10).count();
        assert!(close < 10, "{close} of 99 consecutive pairs stayed close");
    }
}

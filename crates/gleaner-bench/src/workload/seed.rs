//! Seeds: every random choice of a run derives from one `u64` seed, so a run can be repeated
//! exactly (same keys, same order, same values) against each engine under test.

use rand::SeedableRng;
use rand::rngs::SmallRng;

/// The random-number generator the workload uses.
///
/// `SmallRng` (xoshiro256++ on 64-bit targets) is fast enough that generating keys and values is
/// never the bottleneck. Its output is fixed for a given build of the harness, which is what
/// comparing engines within one run (and re-running a build) needs; it is not promised to stay
/// the same across `rand` versions or platforms.
pub type WorkloadRng = SmallRng;

/// The golden-ratio constant (2^64 / φ): odd, with well-spread bits, so multiplying distinct
/// thread numbers by it gives seeds that differ in many bits.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The seed of client thread `thread` in a run with seed `seed`:
/// `seed ^ (thread + 1) * 0x9E37_79B9_7F4A_7C15` (wrapping multiplication).
///
/// `thread + 1` rather than `thread` so thread 0 does not reuse the run seed itself, which other
/// generators (the load order, the value pool) are built from directly.
pub fn thread_seed(seed: u64, thread: u64) -> u64 {
    seed ^ thread.wrapping_add(1).wrapping_mul(GOLDEN)
}

/// The generator of client thread `thread`: [`WorkloadRng`] seeded with
/// [`thread_seed`]`(seed, thread)`. `seed_from_u64` expands the 64-bit seed through PCG32, so
/// seeds that differ in few bits still give unrelated streams.
pub fn thread_rng(seed: u64, thread: u64) -> WorkloadRng {
    WorkloadRng::seed_from_u64(thread_seed(seed, thread))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn threads_get_distinct_reproducible_streams() {
        let a: Vec<u64> = (0..4).map(|t| thread_rng(7, t).next_u64()).collect();
        let b: Vec<u64> = (0..4).map(|t| thread_rng(7, t).next_u64()).collect();
        assert_eq!(a, b);
        for i in 0..a.len() {
            for j in i + 1..a.len() {
                assert_ne!(a[i], a[j]);
            }
        }
        assert_ne!(thread_rng(7, 0).next_u64(), thread_rng(8, 0).next_u64());
        assert_ne!(thread_seed(7, 0), 7);
    }
}

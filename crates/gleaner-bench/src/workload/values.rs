//! Values: sizes drawn from a [`ValueSizeSpec`], contents copied out of a random pool.
//!
//! Contents are windows of a pool of random bytes (8 MiB, or twice the largest value if that is
//! more) at random offsets: one `memcpy` per value. On the development machine (the ignored
//! `generation_speed` test, one core, test profile) that gives about 4.5 M keys+values/s for
//! 100-byte values and 1.8 M/s (30 GB/s) for 16 KiB values, where filling from the PRNG 8 bytes
//! at a time manages about 2 GB/s — so generation never limits a run. The price: two values
//! share bytes when their windows overlap — for 100-byte values about a 2·100/8 Mi ≈ 0.002%
//! chance per pair, too rare to let a block compressor find real savings.
//!
//! Compressibility `r` makes the last round(r·len) bytes of each value [`FILLER_BYTE`]: LZ4
//! (or any compressor) shrinks that run to almost nothing and cannot shrink the random part,
//! so a value compresses to about (1 − r) of its size.

use std::sync::Arc;

use rand::{Rng, RngCore, SeedableRng};

use super::seed::WorkloadRng;
use super::size_spec::{
    MIXED_LARGE, MIXED_SMALL_MAX, MIXED_SMALL_MIN, PARETO_MAX, PARETO_SHAPE, ValueSizeSpec,
};

/// The byte that fills the compressible part of a value.
pub const FILLER_BYTE: u8 = b'0';

/// The least size of the random pool.
const POOL_BYTES: usize = 8 << 20;

/// Generates values: sizes per a [`ValueSizeSpec`], contents per a compressibility ratio (see
/// the module documentation). Cloning shares the pool, so each client thread can own a clone.
#[derive(Debug, Clone)]
pub struct ValueGen {
    spec: ValueSizeSpec,
    sizes: Sizes,
    compressible: f64,
    pool: Arc<[u8]>,
}

/// A [`ValueSizeSpec`] with what sampling needs precomputed.
#[derive(Debug, Clone, Copy)]
enum Sizes {
    Fixed(usize),
    Mixed {
        small_fraction: f64,
    },
    /// Generalized Pareto by inversion: x = σ/ξ · ((1 − u)^−ξ − 1).
    Pareto {
        scale_over_shape: f64,
    },
    Uniform {
        min: usize,
        max: usize,
    },
}

impl ValueGen {
    /// A generator of values sized per `spec`, with the fraction `compressible` (in [0, 1]) of
    /// each value filler, and the random pool drawn from `seed`. Panics if `compressible` is
    /// outside [0, 1].
    pub fn new(spec: ValueSizeSpec, compressible: f64, seed: u64) -> Self {
        assert!(
            (0.0..=1.0).contains(&compressible),
            "compressible ratio {compressible} not in [0, 1]"
        );
        let sizes = match spec {
            ValueSizeSpec::Fixed(size) => Sizes::Fixed(size),
            ValueSizeSpec::Mixed { small_fraction } => Sizes::Mixed { small_fraction },
            ValueSizeSpec::Pareto { mean } => {
                // σ = MEAN·(1 − ξ) makes the mean σ/(1 − ξ) equal MEAN.
                let sigma = mean as f64 * (1.0 - PARETO_SHAPE);
                Sizes::Pareto {
                    scale_over_shape: sigma / PARETO_SHAPE,
                }
            }
            ValueSizeSpec::Uniform { min, max } => Sizes::Uniform { min, max },
        };
        let mut pool = vec![0u8; POOL_BYTES.max(2 * spec.max())];
        WorkloadRng::seed_from_u64(seed).fill_bytes(&mut pool);
        ValueGen {
            spec,
            sizes,
            compressible,
            pool: pool.into(),
        }
    }

    /// The size spec.
    pub fn spec(&self) -> ValueSizeSpec {
        self.spec
    }

    /// The compressible fraction of each value.
    pub fn compressible(&self) -> f64 {
        self.compressible
    }

    /// Draws the size of the next value.
    pub fn next_len<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        match self.sizes {
            Sizes::Fixed(size) => size,
            Sizes::Mixed { small_fraction } => {
                if rng.random::<f64>() < small_fraction {
                    rng.random_range(MIXED_SMALL_MIN..=MIXED_SMALL_MAX)
                } else {
                    MIXED_LARGE
                }
            }
            Sizes::Pareto { scale_over_shape } => {
                // 1 − u is in (0, 1], so the power is finite.
                let u: f64 = rng.random();
                let x = scale_over_shape * ((1.0 - u).powf(-PARETO_SHAPE) - 1.0);
                (x.round() as usize).clamp(1, PARETO_MAX)
            }
            Sizes::Uniform { min, max } => rng.random_range(min..=max),
        }
    }

    /// Writes the next value into `buf`, replacing its contents (its capacity is reused, so a
    /// loop that keeps one buffer does not allocate).
    pub fn fill<R: Rng + ?Sized>(&mut self, rng: &mut R, buf: &mut Vec<u8>) {
        let len = self.next_len(rng);
        let filler = (len as f64 * self.compressible).round() as usize;
        let random = len - filler.min(len);
        let offset = rng.random_range(0..=self.pool.len() - random);
        buf.clear();
        buf.extend_from_slice(&self.pool[offset..offset + random]);
        buf.resize(len, FILLER_BYTE);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::workload::seed::thread_rng;

    fn sizes(spec: &str, draws: usize) -> Vec<usize> {
        let values = ValueGen::new(spec.parse().unwrap(), 0.0, 1);
        let mut rng = thread_rng(11, 0);
        (0..draws).map(|_| values.next_len(&mut rng)).collect()
    }

    fn small_share(sizes: &[usize]) -> f64 {
        for &s in sizes {
            assert!((100..=512).contains(&s) || s == 16384, "size {s}");
        }
        sizes.iter().filter(|&&s| s <= 512).count() as f64 / sizes.len() as f64
    }

    #[test]
    fn pareto_means() {
        for mean in [1024usize, 4096, 8192] {
            let drawn = sizes(&format!("pareto:{mean}"), 200_000);
            assert!(drawn.iter().all(|s| (1..=PARETO_MAX).contains(s)));
            let sample_mean = drawn.iter().sum::<usize>() as f64 / drawn.len() as f64;
            // Standard error: mean/√(1 − 2ξ)/√200,000 ≈ 0.33% of the mean.
            let error = (sample_mean / mean as f64 - 1.0).abs();
            assert!(error < 0.02, "pareto:{mean}: sample mean {sample_mean}");
        }
    }

    #[test]
    fn mixed_proportions() {
        let share = small_share(&sizes("mixed8k", 200_000));
        assert!((0.49..=0.51).contains(&share), "mixed8k: {share}");
        let share = small_share(&sizes("mixed:0.25", 200_000));
        assert!((0.24..=0.26).contains(&share), "mixed:0.25: {share}");
        assert_eq!(small_share(&sizes("mixed:0", 1000)), 0.0);
        assert_eq!(small_share(&sizes("mixed:1", 1000)), 1.0);
        // Small sizes cover their whole range.
        let small: HashSet<usize> = sizes("mixed:1", 100_000).into_iter().collect();
        assert!(small.contains(&100) && small.contains(&512) && small.len() == 413);
    }

    #[test]
    fn uniform_and_fixed_sizes() {
        let drawn = sizes("uniform:100-200", 10_000);
        assert!(drawn.iter().all(|s| (100..=200).contains(s)));
        assert!(drawn.contains(&100) && drawn.contains(&200));
        assert!(sizes("fixed:16k", 100).iter().all(|&s| s == 16384));
        assert!(sizes("uniform:7-7", 100).iter().all(|&s| s == 7));
    }

    #[test]
    fn incompressible_values_look_random() {
        let mut values = ValueGen::new(ValueSizeSpec::Fixed(16384), 0.0, 3);
        let mut rng = thread_rng(3, 0);
        let mut value = Vec::new();
        for _ in 0..4 {
            values.fill(&mut rng, &mut value);
            assert_eq!(value.len(), 16384);
            let distinct: HashSet<u8> = value.iter().copied().collect();
            assert!(distinct.len() >= 250, "{} distinct bytes", distinct.len());
            let mut runs = HashSet::new();
            for run in value.windows(64) {
                assert!(runs.insert(run), "a 64-byte run repeats");
            }
        }
    }

    #[test]
    fn half_compressible_values_are_half_filler() {
        let mut values = ValueGen::new(ValueSizeSpec::Fixed(16384), 0.5, 3);
        let mut rng = thread_rng(3, 0);
        let mut value = Vec::new();
        values.fill(&mut rng, &mut value);
        assert!(value[8192..].iter().all(|&b| b == FILLER_BYTE));
        let filler = value.iter().filter(|&&b| b == FILLER_BYTE).count();
        // The random half holds about 8192/256 = 32 filler bytes by chance.
        assert!(
            (8192..8192 + 100).contains(&filler),
            "{filler} filler bytes"
        );
        let distinct: HashSet<u8> = value[..8192].iter().copied().collect();
        assert!(distinct.len() >= 250);

        let mut all = ValueGen::new(ValueSizeSpec::Fixed(100), 1.0, 3);
        all.fill(&mut rng, &mut value);
        assert_eq!(value, vec![FILLER_BYTE; 100]);
    }

    #[test]
    fn same_seed_same_values() {
        let run = |pool_seed, rng_seed| {
            let mut values = ValueGen::new("mixed8k".parse().unwrap(), 0.25, pool_seed);
            let mut rng = thread_rng(rng_seed, 0);
            let mut buf = Vec::new();
            (0..50)
                .map(|_| {
                    values.fill(&mut rng, &mut buf);
                    buf.clone()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1, 1), run(1, 1));
        assert_ne!(run(1, 1), run(2, 1));
        assert_ne!(run(1, 1), run(1, 2));
    }

    #[test]
    fn values_larger_than_the_default_pool() {
        let mut values = ValueGen::new(ValueSizeSpec::Fixed(12 << 20), 0.0, 1);
        let mut buf = Vec::new();
        values.fill(&mut thread_rng(1, 0), &mut buf);
        assert_eq!(buf.len(), 12 << 20);
    }
}

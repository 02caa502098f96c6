//! Workload generators: keys, key choice, value sizes and contents, phases and YCSB mixes.
//!
//! Everything here is pure and deterministic: given the run's `u64` seed, a run produces the
//! same keys, load order, operations and values every time, so each engine under test sees
//! the identical workload. Client thread `t` draws from [`thread_rng`]`(seed, t)`; the load
//! order ([`LoadOrder`]) and the value pool ([`ValueGen`]) are built from the seed itself.
//!
//! The specs ([`ValueSizeSpec`], [`KeyDistSpec`], [`PhaseSpec`]) parse from the command-line
//! text and print back their canonical text, which is what `results.json` records.

pub mod delete_range;
mod dist;
mod key_spec;
mod keys;
mod load;
mod mixgraph;
mod permute;
mod phase;
mod seed;
mod size_spec;
mod spec;
mod values;
mod ycsb;
mod zipf;

pub use dist::KeyChooser;
pub use key_spec::{DEFAULT_ZIPF_THETA, KeyDistSpec};
pub use keys::{DEFAULT_KEY_LEN, KeyFormat, KeyFormatError, MIN_KEY_LEN};
pub use load::LoadOrder;
pub use mixgraph::{MAX_KEYRANGES, Mixgraph, MixgraphParams, MixgraphSpec};
pub use phase::{PhaseSpec, YcsbWorkload};
pub use seed::{WorkloadRng, thread_rng, thread_seed};
pub use size_spec::{
    MAX_VALUE_SIZE, MIXED_LARGE, MIXED_SMALL_MAX, MIXED_SMALL_MIN, PARETO_MAX, PARETO_SHAPE,
    ValueSizeSpec,
};
pub use spec::{SpecError, format_size, parse_size};
pub use values::{FILLER_BYTE, ValueGen};
pub use ycsb::{DEFAULT_MAX_SCAN, OpKind, OpMix, OpMixError, ScanLength, YCSB_MAX_SCAN};

#[cfg(test)]
mod tests {
    use std::hint::black_box;
    use std::time::Instant;

    use super::*;

    /// Keys and values per second on one core, for the harness author to run by hand:
    /// `cargo test --release -p gleaner-bench workload::tests::generation_speed -- --ignored --nocapture`.
    /// Not asserted: shared machines are too noisy for a speed threshold.
    #[test]
    #[ignore]
    fn generation_speed() {
        let count = 100_000_000;
        for (value_spec, dist) in [
            ("fixed:100", "uniform"),
            ("fixed:100", "zipf:0.99"),
            ("pareto:1k", "zipf:0.99"),
            ("fixed:16k", "zipf:0.99"),
            ("mixed8k", "zipf:0.99"),
        ] {
            let value_spec: ValueSizeSpec = value_spec.parse().unwrap();
            let dist: KeyDistSpec = dist.parse().unwrap();
            let keys = KeyFormat::default();
            let mut chooser = KeyChooser::new(dist, count);
            let mut values = ValueGen::new(value_spec, 0.0, 1);
            let mut rng = thread_rng(1, 0);
            let (mut key, mut value) = (Vec::new(), Vec::new());
            let ops = 2_000_000;
            let mut bytes = 0;
            let start = Instant::now();
            for _ in 0..ops {
                keys.write(chooser.next(&mut rng), &mut key);
                values.fill(&mut rng, &mut value);
                bytes += black_box(&key).len() + black_box(&value).len();
            }
            let seconds = start.elapsed().as_secs_f64();
            eprintln!(
                "{value_spec} {dist}: {:.2} M keys+values/s, {:.0} MB/s",
                ops as f64 / seconds / 1e6,
                bytes as f64 / seconds / 1e6
            );
        }
        // The alternative to the value pool, for comparison: 16 KiB straight from the PRNG.
        let mut rng = thread_rng(1, 0);
        let mut value = vec![0u8; 16384];
        let start = Instant::now();
        for _ in 0..200_000 {
            rand::RngCore::fill_bytes(&mut rng, &mut value);
            black_box(&value);
        }
        let seconds = start.elapsed().as_secs_f64();
        eprintln!(
            "PRNG fill of 16 KiB (not used): {:.0} MB/s",
            200_000.0 * 16384.0 / seconds / 1e6
        );
        let start = Instant::now();
        black_box(KeyChooser::new(KeyDistSpec::Zipf { theta: 0.99 }, count));
        eprintln!(
            "zipf chooser over {count} keys built in {:?}",
            start.elapsed()
        );
        let order = LoadOrder::new(count, 1);
        let start = Instant::now();
        let sum: u64 = order
            .part(0, 1)
            .take(10_000_000)
            .fold(0, |a, n| a.wrapping_add(black_box(n)));
        eprintln!(
            "load order: {:.1} M keys/s ({sum})",
            10.0 / start.elapsed().as_secs_f64()
        );
    }
}

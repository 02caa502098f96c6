//! RocksDB db_bench's `mixgraph` workload (Cao et al., FAST '20), the workload of the DP-KV
//! evaluation: the key space cut into `keyrange_num` ranges whose access frequencies follow
//! the two-term exponential `f(x) = a·e^(b·x) + c·e^(d·x)` over x = 1…`keyrange_num`, keys
//! within a range by a power law, and a get / put / seek mix with Pareto scan lengths.
//!
//! Parameters carry db_bench's flag names. Where db_bench's generator is wrong this one is not,
//! and docs/benchmarks.md ("mixgraph") says so:
//!
//! - db_bench turns the weights into integers (`floor(amplify·p)`, RocksDB #8355), which skews
//!   small weights by up to 2× and overflows for the DP-KV paper's parameters (`e^(1.2·100)`);
//!   here they are normalised in floating point, scaled by the largest exponent first.
//! - db_bench ignores the ranges when `key_dist_a` or `key_dist_b` is 0 (#8356); here the
//!   ranges always apply, and keys within a range are then uniform.
//! - db_bench's power mode takes a signed modulo, so some ids fall outside the loaded keys;
//!   here an offset is always within its range.
//! - db_bench drives the key, the operation, the value size and the scan length of an
//!   operation from one random number, which ties them together (the hottest keys are also
//!   always the same operation); here each is drawn on its own.
//! - db_bench shuffles the ranges with a biased swap loop; here it is a seeded Fisher–Yates.
//!
//! Value sizes are the run's `--value-size`: `pareto:MEAN` is db_bench's generalized Pareto
//! (`value_theta` 0, `value_k` 0.2615, `value_sigma` = MEAN·(1 − 0.2615); db_bench's defaults
//! are `pareto:34`), so a run can keep its model and scale its mean to the values the store is
//! for.

use std::fmt;
use std::str::FromStr;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::seed::WorkloadRng;
use super::spec::SpecError;
use super::ycsb::{OpKind, OpMix};

/// Most key ranges.
pub const MAX_KEYRANGES: u32 = 1 << 20;

/// The parameters, by db_bench's flag names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixgraphParams {
    /// `keyrange_dist_a`: the first term's factor (≥ 0).
    pub keyrange_dist_a: f64,
    /// `keyrange_dist_b`: the first term's exponent.
    pub keyrange_dist_b: f64,
    /// `keyrange_dist_c`: the second term's factor (≥ 0).
    pub keyrange_dist_c: f64,
    /// `keyrange_dist_d`: the second term's exponent.
    pub keyrange_dist_d: f64,
    /// `keyrange_num`: ranges the key space is cut into.
    pub keyrange_num: u32,
    /// `key_dist_a`: within a range, a key's rank r is drawn with P(rank ≤ r) = a·r^b
    /// (0: uniform within the range).
    pub key_dist_a: f64,
    /// `key_dist_b`: that power law's exponent (0: uniform within the range).
    pub key_dist_b: f64,
    /// `iter_theta`: scan lengths' Pareto location.
    pub iter_theta: f64,
    /// `iter_k`: scan lengths' Pareto shape.
    pub iter_k: f64,
    /// `iter_sigma`: scan lengths' Pareto scale.
    pub iter_sigma: f64,
    /// `mix_max_scan_len`: scan lengths wrap at this many entries.
    pub mix_max_scan_len: u32,
    /// `mix_get_ratio`: share of gets.
    pub mix_get_ratio: f64,
    /// `mix_put_ratio`: share of puts.
    pub mix_put_ratio: f64,
    /// `mix_seek_ratio`: share of seeks (a scan of a Pareto length).
    pub mix_seek_ratio: f64,
}

impl MixgraphParams {
    /// The FAST '20 parameters db_bench's documentation gives for mixgraph (fitted to
    /// Facebook's UDB traces): 30 ranges with a = 14.18, b = −2.917, c = 0.0164,
    /// d = −0.08082 (the first ranges hottest), keys by a = 0.002312, b = 0.3467, and a
    /// 0.83 / 0.14 / 0.03 get / put / seek mix.
    pub const FAST20: MixgraphParams = MixgraphParams {
        keyrange_dist_a: 14.18,
        keyrange_dist_b: -2.917,
        keyrange_dist_c: 0.0164,
        keyrange_dist_d: -0.08082,
        keyrange_num: 30,
        key_dist_a: 0.002312,
        key_dist_b: 0.3467,
        iter_theta: 0.0,
        iter_k: 2.517,
        iter_sigma: 14.236,
        mix_max_scan_len: 10_000,
        mix_get_ratio: 0.83,
        mix_put_ratio: 0.14,
        mix_seek_ratio: 0.03,
    };

    /// The DP-KV evaluation's: 100 ranges weighted by 0.5·e^(d·x) (a = 0, c = 0.5, so the last
    /// ranges take most accesses), the rest as [`MixgraphParams::FAST20`].
    pub const fn dpkv(d: f64) -> MixgraphParams {
        MixgraphParams {
            keyrange_dist_a: 0.0,
            keyrange_dist_b: 0.0,
            keyrange_dist_c: 0.5,
            keyrange_dist_d: d,
            keyrange_num: 100,
            ..MixgraphParams::FAST20
        }
    }

    /// The parameters by name, for parsing and printing.
    fn fields(&mut self) -> [(&'static str, Field<'_>); 14] {
        [
            ("keyrange_dist_a", Field::F(&mut self.keyrange_dist_a)),
            ("keyrange_dist_b", Field::F(&mut self.keyrange_dist_b)),
            ("keyrange_dist_c", Field::F(&mut self.keyrange_dist_c)),
            ("keyrange_dist_d", Field::F(&mut self.keyrange_dist_d)),
            ("keyrange_num", Field::U(&mut self.keyrange_num)),
            ("key_dist_a", Field::F(&mut self.key_dist_a)),
            ("key_dist_b", Field::F(&mut self.key_dist_b)),
            ("iter_theta", Field::F(&mut self.iter_theta)),
            ("iter_k", Field::F(&mut self.iter_k)),
            ("iter_sigma", Field::F(&mut self.iter_sigma)),
            ("mix_max_scan_len", Field::U(&mut self.mix_max_scan_len)),
            ("mix_get_ratio", Field::F(&mut self.mix_get_ratio)),
            ("mix_put_ratio", Field::F(&mut self.mix_put_ratio)),
            ("mix_seek_ratio", Field::F(&mut self.mix_seek_ratio)),
        ]
    }

    /// Why these parameters cannot run, if they cannot.
    fn check(&self) -> Result<(), String> {
        let all_finite = [
            self.keyrange_dist_a,
            self.keyrange_dist_b,
            self.keyrange_dist_c,
            self.keyrange_dist_d,
            self.key_dist_a,
            self.key_dist_b,
            self.iter_theta,
            self.iter_k,
            self.iter_sigma,
        ]
        .iter()
        .all(|v| v.is_finite());
        if !all_finite {
            return Err("every parameter must be a finite number".into());
        }
        if self.keyrange_dist_a < 0.0 || self.keyrange_dist_c < 0.0 {
            return Err("keyrange_dist_a and keyrange_dist_c must be ≥ 0".into());
        }
        if self.keyrange_dist_a == 0.0 && self.keyrange_dist_c == 0.0 {
            return Err("keyrange_dist_a or keyrange_dist_c must be above 0".into());
        }
        if !(1..=MAX_KEYRANGES).contains(&self.keyrange_num) {
            return Err(format!("keyrange_num must be 1 to {MAX_KEYRANGES}"));
        }
        if self.key_dist_a < 0.0 || self.key_dist_b < 0.0 {
            return Err("key_dist_a and key_dist_b must be ≥ 0".into());
        }
        if self.iter_sigma <= 0.0 || self.mix_max_scan_len == 0 {
            return Err("iter_sigma and mix_max_scan_len must be above 0".into());
        }
        self.mix().map(|_| ()).map_err(|e| e.to_string())
    }

    fn mix(&self) -> Result<OpMix, super::ycsb::OpMixError> {
        OpMix::new(&[
            (OpKind::Read, self.mix_get_ratio),
            (OpKind::Update, self.mix_put_ratio),
            (OpKind::Scan, self.mix_seek_ratio),
        ])
    }

    /// The ranges' access shares, by x = 1…`keyrange_num` (before the shuffle): f(x)
    /// normalised, computed with the largest exponent factored out so no term overflows.
    pub fn range_shares(&self) -> Vec<f64> {
        let n = self.keyrange_num;
        let exponents = |x: f64| {
            [
                (self.keyrange_dist_a, self.keyrange_dist_b * x),
                (self.keyrange_dist_c, self.keyrange_dist_d * x),
            ]
        };
        let top = (1..=n)
            .flat_map(|x| exponents(f64::from(x)))
            .filter(|&(factor, _)| factor > 0.0)
            .map(|(factor, e)| factor.ln() + e)
            .fold(f64::NEG_INFINITY, f64::max);
        let raw: Vec<f64> = (1..=n)
            .map(|x| {
                exponents(f64::from(x))
                    .iter()
                    .filter(|&&(factor, _)| factor > 0.0)
                    .map(|&(factor, e)| (factor.ln() + e - top).exp())
                    .sum()
            })
            .collect();
        let sum: f64 = raw.iter().sum();
        raw.iter().map(|w| w / sum).collect()
    }
}

enum Field<'a> {
    F(&'a mut f64),
    U(&'a mut u32),
}

/// A mixgraph spec as given to `--mixgraph`: a preset, then `name=value` overrides with
/// db_bench's names, comma-separated. Presets: `dpkv-0.9` and `dpkv-1.2` (the DP-KV
/// evaluation, [`MixgraphParams::dpkv`]) and `fast20` ([`MixgraphParams::FAST20`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixgraphSpec(pub MixgraphParams);

impl Default for MixgraphSpec {
    /// `dpkv-0.9`.
    fn default() -> Self {
        MixgraphSpec(MixgraphParams::dpkv(0.9))
    }
}

const SPEC: &str = "mixgraph spec";
const EXPECTED: &str = "a preset (`dpkv-0.9`, `dpkv-1.2`, `fast20`) then `,NAME=VALUE` with \
     db_bench's names (keyrange_dist_a..d, keyrange_num, key_dist_a, key_dist_b, iter_theta, \
     iter_k, iter_sigma, mix_max_scan_len, mix_get_ratio, mix_put_ratio, mix_seek_ratio)";

impl FromStr for MixgraphSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let err = |why: &str| SpecError::new(SPEC, text, format!("{EXPECTED}; {why}"));
        let mut parts = text.split(',');
        let preset = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut params = match preset.as_str() {
            "dpkv-0.9" => MixgraphParams::dpkv(0.9),
            "dpkv-1.2" => MixgraphParams::dpkv(1.2),
            "fast20" => MixgraphParams::FAST20,
            _ => return Err(err("unknown preset")),
        };
        for part in parts {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| err(&format!("`{part}` is not NAME=VALUE")))?;
            let (name, value) = (name.trim(), value.trim());
            let mut fields = params.fields();
            let (_, field) = fields
                .iter_mut()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| err(&format!("no parameter `{name}`")))?;
            let bad = || err(&format!("`{value}` is not a value of {name}"));
            match field {
                Field::F(v) => **v = value.parse().map_err(|_| bad())?,
                Field::U(v) => **v = value.parse().map_err(|_| bad())?,
            }
        }
        params.check().map_err(|why| err(&why))?;
        Ok(MixgraphSpec(params))
    }
}

impl fmt::Display for MixgraphSpec {
    /// Every parameter after the preset they are relative to (`fast20`), so the text parses
    /// back to the same spec whatever preset it came from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("fast20")?;
        let mut p = self.0;
        for (name, field) in p.fields() {
            match field {
                Field::F(v) => write!(f, ",{name}={v}")?,
                Field::U(v) => write!(f, ",{name}={v}")?,
            }
        }
        Ok(())
    }
}

/// One key range: its first key number and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeyRange {
    start: u64,
    size: u64,
}

/// The generator over `keys` keys numbered `0..keys`.
#[derive(Debug, Clone)]
pub struct Mixgraph {
    params: MixgraphParams,
    mix: OpMix,
    /// The ranges in key order, and each one's cumulative access share in that order.
    ranges: Vec<KeyRange>,
    cumulative: Vec<f64>,
}

impl Mixgraph {
    /// The generator for `keys` keys (at least 1); the ranges' order in the key space is a
    /// shuffle seeded by `seed`, the same for every engine of a run. Ranges are
    /// `keys / keyrange_num` keys each, the last taking the remainder (fewer keys than
    /// ranges: one key a range).
    pub fn new(spec: MixgraphSpec, keys: u64, seed: u64) -> Self {
        let params = spec.0;
        let keys = keys.max(1);
        let n = u64::from(params.keyrange_num).min(keys);
        let size = keys / n;
        let ranges: Vec<KeyRange> = (0..n)
            .map(|i| KeyRange {
                start: i * size,
                size: if i + 1 == n { keys - i * size } else { size },
            })
            .collect();
        // Shares of x = 1…n, placed at shuffled positions in the key space.
        let shares = MixgraphParams {
            keyrange_num: n as u32,
            ..params
        }
        .range_shares();
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.shuffle(&mut WorkloadRng::seed_from_u64(
            seed ^ 0x6D69_7867_7261_7068,
        ));
        let mut placed = vec![0.0; ranges.len()];
        for (x, &position) in order.iter().enumerate() {
            placed[position] = shares[x];
        }
        let mut acc = 0.0;
        let cumulative = placed
            .iter()
            .map(|s| {
                acc += s;
                acc
            })
            .collect();
        Mixgraph {
            params,
            mix: params.mix().expect("checked when parsed"),
            ranges,
            cumulative,
        }
    }

    /// The next operation's kind: [`OpKind::Read`] (get), [`OpKind::Update`] (put) or
    /// [`OpKind::Scan`] (seek).
    pub fn op<R: Rng + ?Sized>(&self, rng: &mut R) -> OpKind {
        self.mix.next(rng)
    }

    /// The next key number: a range by the shares, then a key within it.
    pub fn key<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.random();
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let i = self
            .cumulative
            .partition_point(|&c| c <= u * total)
            .min(self.ranges.len() - 1);
        let range = self.ranges[i];
        let (a, b) = (self.params.key_dist_a, self.params.key_dist_b);
        if a == 0.0 || b == 0.0 {
            return range.start + rng.random_range(0..range.size);
        }
        // The rank of P(rank ≤ r) = a·r^b, then hashed to an offset, so a range's hot keys are
        // spread over it rather than at its start (db_bench hashes with a seeded mt19937_64).
        let u: f64 = rng.random();
        let rank = (u / a).powf(1.0 / b).ceil();
        let rank = if rank.is_finite() {
            rank as u64
        } else {
            u64::MAX
        };
        range.start + mix64(rank) % range.size
    }

    /// The next seek's length: db_bench's Pareto inversion
    /// `ceil(θ + σ·(u^(−k) − 1)/k)` (`θ − σ·ln u` when k = 0) wrapped at
    /// `mix_max_scan_len`, at least 1.
    pub fn scan_len<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let p = &self.params;
        // In (0, 1]: u = 0 would be an infinite length.
        let u = 1.0 - rng.random::<f64>();
        let x = if p.iter_k == 0.0 {
            p.iter_theta - p.iter_sigma * u.ln()
        } else {
            p.iter_theta + p.iter_sigma * (u.powf(-p.iter_k) - 1.0) / p.iter_k
        };
        let x = x.ceil().max(0.0);
        let x = if x < u64::MAX as f64 {
            x as u64
        } else {
            u64::MAX
        };
        (x % u64::from(p.mix_max_scan_len)).max(1) as usize
    }

    /// Access share of each range, in key order.
    pub fn shares_in_key_order(&self) -> Vec<f64> {
        let mut last = 0.0;
        self.cumulative
            .iter()
            .map(|&c| {
                let s = c - last;
                last = c;
                s
            })
            .collect()
    }

    /// The range holding key number `key`.
    pub fn range_of(&self, key: u64) -> usize {
        self.ranges.partition_point(|r| r.start <= key) - 1
    }
}

/// A 64-bit mixer (splitmix64's finaliser): an integer hash with every input bit reaching
/// every output bit.
fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::seed::thread_rng;

    #[test]
    fn the_dpkv_shares_are_the_normalised_exponential() {
        for d in [0.9, 1.2] {
            let s = MixgraphParams::dpkv(d).range_shares();
            assert_eq!(s.len(), 100);
            assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            // f(x) ∝ e^(d·x): each range is e^d times the one before; the last takes
            // 1 − e^(−d) of all accesses.
            assert!((s[99] - (1.0 - (-d).exp())).abs() < 1e-9, "{}", s[99]);
            assert!((s[98] / s[97] - d.exp()).abs() < 1e-9);
        }
        // FAST '20: decreasing, the first range the hottest.
        let s = MixgraphParams::FAST20.range_shares();
        assert_eq!(s.len(), 30);
        assert!(s.windows(2).all(|w| w[0] > w[1]));
    }

    #[test]
    fn keys_follow_the_range_shares() {
        let spec = MixgraphSpec(MixgraphParams::dpkv(0.9));
        let g = Mixgraph::new(spec, 1_000_000, 42);
        let shares = g.shares_in_key_order();
        let mut rng = thread_rng(1, 0);
        let draws = 400_000;
        let mut counts = vec![0u64; 100];
        for _ in 0..draws {
            let k = g.key(&mut rng);
            assert!(k < 1_000_000);
            counts[g.range_of(k)] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let expected = shares[i] * draws as f64;
            // Within 5 standard deviations of a binomial count (and 3 absolute for the rare).
            let sd = (expected * (1.0 - shares[i])).sqrt();
            assert!(
                (c as f64 - expected).abs() <= 5.0 * sd + 3.0,
                "range {i}: {c} draws, {expected:.0} expected"
            );
        }
        // The hot range is somewhere in the key space, not necessarily last: the shuffle.
        let hottest = (0..100)
            .max_by(|&a, &b| shares[a].total_cmp(&shares[b]))
            .expect("ranges");
        assert!(shares[hottest] > 0.5);
        assert_eq!(
            Mixgraph::new(spec, 1_000_000, 42).shares_in_key_order(),
            shares
        );
        assert_ne!(
            Mixgraph::new(spec, 1_000_000, 43).shares_in_key_order(),
            shares
        );
    }

    #[test]
    fn keys_within_a_range_follow_the_power_law() {
        // One range: P(rank ≤ r) = a·r^b, so about a of the draws take the hottest key.
        let spec: MixgraphSpec = "fast20,keyrange_num=1".parse().expect("spec");
        let g = Mixgraph::new(spec, 10_000_000, 1);
        let mut rng = thread_rng(2, 0);
        let mut counts = std::collections::HashMap::new();
        let draws = 500_000;
        for _ in 0..draws {
            *counts.entry(g.key(&mut rng)).or_insert(0u64) += 1;
        }
        let top = counts.values().copied().max().expect("draws");
        let expected = 0.002312 * draws as f64;
        assert!(
            (top as f64 - expected).abs() < 5.0 * expected.sqrt(),
            "{top} against {expected}"
        );
        // Uniform within ranges when a power-law parameter is 0 (not db_bench's #8356).
        let flat: MixgraphSpec = "dpkv-1.2,key_dist_a=0".parse().expect("spec");
        let g = Mixgraph::new(flat, 1000, 1);
        let hot = (0..1000u64)
            .filter(|&k| g.range_of(k) == g.range_of(0))
            .count();
        assert_eq!(hot, 10);
    }

    #[test]
    fn scan_lengths_and_the_mix() {
        let g = Mixgraph::new(MixgraphSpec::default(), 1000, 1);
        let mut rng = thread_rng(3, 0);
        let lens: Vec<usize> = (0..100_000).map(|_| g.scan_len(&mut rng)).collect();
        assert!(lens.iter().all(|&l| (1..10_000).contains(&l)));
        // The median of θ + σ·(u^(−k) − 1)/k is at u = 1/2: 14.236·(2^2.517 − 1)/2.517 ≈ 26.
        let mut sorted = lens.clone();
        sorted.sort_unstable();
        assert!((20..=32).contains(&sorted[50_000]), "{}", sorted[50_000]);
        let mut kinds = std::collections::HashMap::new();
        for _ in 0..100_000 {
            *kinds.entry(g.op(&mut rng)).or_insert(0u32) += 1;
        }
        let get = f64::from(kinds[&OpKind::Read]) / 100_000.0;
        let seek = f64::from(kinds[&OpKind::Scan]) / 100_000.0;
        assert!(
            (get - 0.83).abs() < 0.01 && (seek - 0.03).abs() < 0.005,
            "{kinds:?}"
        );
    }

    #[test]
    fn specs_parse_print_and_refuse_with_the_name() {
        for text in [
            "dpkv-0.9",
            "dpkv-1.2",
            "fast20",
            "fast20,keyrange_num=7,mix_put_ratio=1",
        ] {
            let spec: MixgraphSpec = text.parse().expect(text);
            assert_eq!(spec.to_string().parse::<MixgraphSpec>(), Ok(spec), "{text}");
        }
        assert_eq!(
            "dpkv-1.2"
                .parse::<MixgraphSpec>()
                .expect("spec")
                .0
                .keyrange_dist_d,
            1.2
        );
        for (bad, why) in [
            ("zipf", "unknown preset"),
            ("fast20,keyrange_num", "NAME=VALUE"),
            ("fast20,bogus=1", "no parameter `bogus`"),
            ("fast20,keyrange_num=x", "not a value of keyrange_num"),
            ("fast20,keyrange_num=0", "keyrange_num must be"),
            (
                "fast20,keyrange_dist_a=0,keyrange_dist_c=0",
                "must be above 0",
            ),
            (
                "fast20,mix_get_ratio=0,mix_put_ratio=0,mix_seek_ratio=0",
                "positive sum",
            ),
            ("fast20,iter_k=inf", "finite"),
        ] {
            let e = bad.parse::<MixgraphSpec>().expect_err(bad).to_string();
            assert!(e.contains(why) && e.contains("mixgraph spec"), "{bad}: {e}");
        }
    }
}

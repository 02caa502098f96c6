//! Key choice: which existing key number the next operation touches.

use rand::Rng;

use super::key_spec::KeyDistSpec;
use super::permute::Permutation;
use super::zipf::Zipfian;

/// The scramble of `zipf` is one fixed bijection (per key count), not seeded: the hot keys are
/// then the same for every seed and every engine, and a run's hot set can be reproduced from
/// the spec alone.
const SCRAMBLE_SEED: u64 = 0x5CA7_7E4E_D5EE_D001;

/// Draws key numbers in `0..count` following a [`KeyDistSpec`]; every draw is O(1).
///
/// - `uniform`: `rng.random_range(0..count)`.
/// - `zipf:θ`: a Zipfian rank (module `zipf`: YCSB's algorithm of Gray et al., ζ precomputed
///   once — exactly up to 2^20 keys, with an Euler–Maclaurin tail beyond, so construction takes
///   at most ≈ 20 ms whatever the count) mapped through a fixed pseudo-random bijection of the
///   key space (a 4-round Feistel network with splitmix64 rounds, cycle-walked to the count).
///   YCSB scrambles with FNV-1a modulo the count instead; a bijection carries the rank distribution
///   over to keys unchanged (with hash-mod, colliding ranks pile onto one key and about 1/e of
///   the keys are never drawn) while still spreading hot keys over the key space.
/// - `hotspot:OPS:DATA`: with probability OPS a uniform key among the first
///   round(DATA·count) key numbers, otherwise a uniform key among the rest.
/// - `latest`: rank r Zipfian (θ = 0.99) over the count, key `count − 1 − r`: the newest key is
///   the hottest. [`KeyChooser::set_count`] follows inserts in O(1) amortised (YCSB's
///   incremental ζ).
#[derive(Debug, Clone)]
pub struct KeyChooser {
    count: u64,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Uniform,
    /// Ranks and scramble cover `capacity ≥ count` keys; draws at or above the count are
    /// redrawn (YCSB's way of keeping the hot set still while inserts grow the count).
    Zipf {
        zipf: Zipfian,
        scramble: Permutation,
    },
    Hotspot {
        ops_fraction: f64,
        data_fraction: f64,
        hot: u64,
    },
    Latest {
        zipf: Zipfian,
    },
}

impl KeyChooser {
    /// A chooser over key numbers `0..count` (count ≥ 1). Panics on count 0.
    pub fn new(spec: KeyDistSpec, count: u64) -> Self {
        Self::with_capacity(spec, count, count)
    }

    /// Like [`KeyChooser::new`], but for a key space expected to grow to `capacity` keys (YCSB
    /// D and E insert). For `zipf` the ranks and the scramble are laid over `capacity` keys
    /// and draws of keys not inserted yet are redrawn, so the hot keys stay where they are as
    /// the count grows; the other distributions ignore the capacity.
    pub fn with_capacity(spec: KeyDistSpec, count: u64, capacity: u64) -> Self {
        assert!(count >= 1, "choosing among no keys");
        let capacity = capacity.max(count);
        let kind = match spec {
            KeyDistSpec::Uniform => Kind::Uniform,
            KeyDistSpec::Zipf { theta } => Kind::Zipf {
                zipf: Zipfian::new(capacity, theta),
                scramble: Permutation::new(capacity, SCRAMBLE_SEED),
            },
            KeyDistSpec::Hotspot {
                ops_fraction,
                data_fraction,
            } => Kind::Hotspot {
                ops_fraction,
                data_fraction,
                hot: hot_keys(count, data_fraction),
            },
            KeyDistSpec::Latest => Kind::Latest {
                zipf: Zipfian::new(count, super::key_spec::DEFAULT_ZIPF_THETA),
            },
        };
        KeyChooser { count, kind }
    }

    /// The number of keys chosen among.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Changes the number of keys (after inserts). Cheap for `uniform`, `hotspot` and `latest`,
    /// and for `zipf` within the capacity; a `zipf` count beyond the capacity rebuilds the
    /// ranks and scramble over the new count, which moves the hot keys.
    pub fn set_count(&mut self, count: u64) {
        assert!(count >= 1, "choosing among no keys");
        self.count = count;
        match &mut self.kind {
            Kind::Uniform => {}
            Kind::Zipf { zipf, scramble } => {
                if count > scramble.count() {
                    zipf.set_count(count);
                    *scramble = Permutation::new(count, SCRAMBLE_SEED);
                }
            }
            Kind::Hotspot {
                data_fraction, hot, ..
            } => *hot = hot_keys(count, *data_fraction),
            Kind::Latest { zipf } => zipf.set_count(count),
        }
    }

    /// The next key number, in `0..count`.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        match &self.kind {
            Kind::Uniform => rng.random_range(0..self.count),
            Kind::Zipf { zipf, scramble } => loop {
                let key = scramble.apply(zipf.rank(rng.random()));
                if key < self.count {
                    return key;
                }
            },
            &Kind::Hotspot {
                ops_fraction, hot, ..
            } => {
                if hot == 0 || hot == self.count {
                    rng.random_range(0..self.count)
                } else if rng.random::<f64>() < ops_fraction {
                    rng.random_range(0..hot)
                } else {
                    rng.random_range(hot..self.count)
                }
            }
            Kind::Latest { zipf } => self.count - 1 - zipf.rank(rng.random()),
        }
    }
}

/// The number of hot keys: DATA of the count, rounded, but at least one hot and one cold key
/// whenever there are two keys, so both kinds of draw have somewhere to go.
fn hot_keys(count: u64, data_fraction: f64) -> u64 {
    if count < 2 {
        return count;
    }
    ((count as f64 * data_fraction).round() as u64).clamp(1, count - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::seed::thread_rng;

    fn histogram(spec: KeyDistSpec, count: u64, draws: usize) -> Vec<u64> {
        let mut chooser = KeyChooser::new(spec, count);
        let mut rng = thread_rng(1, 0);
        let mut hits = vec![0u64; count as usize];
        for _ in 0..draws {
            hits[chooser.next(&mut rng) as usize] += 1;
        }
        hits
    }

    /// The share of draws that went to the hottest `top` keys.
    fn top_share(hits: &[u64], top: usize) -> f64 {
        let mut sorted = hits.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted[..top].iter().sum::<u64>() as f64 / hits.iter().sum::<u64>() as f64
    }

    #[test]
    fn zipf_skew_matches_theory() {
        // θ = 0.99 over 10,000 keys: exactly Zipfian, the hottest 100 keys get
        // H(100, 0.99)/H(10000, 0.99) = 51.8%; Gray's approximation gives 52.9%. The sampling
        // error of a 1,000,000-draw share is about 0.05%, so ±2.5% is loose only for the model.
        let hits = histogram(KeyDistSpec::Zipf { theta: 0.99 }, 10_000, 1_000_000);
        let skewed = top_share(&hits, 100);
        assert!(
            (0.505..0.555).contains(&skewed),
            "θ 0.99: top 1% got {skewed}"
        );
        // θ = 0.5: theory 9.4% (Gray 9.5%), much flatter.
        let flat = top_share(
            &histogram(KeyDistSpec::Zipf { theta: 0.5 }, 10_000, 1_000_000),
            100,
        );
        assert!((0.085..0.105).contains(&flat), "θ 0.5: top 1% got {flat}");
        // θ = 1.2: theory 75.1% (Gray 76.5%).
        let steep = top_share(
            &histogram(KeyDistSpec::Zipf { theta: 1.2 }, 10_000, 1_000_000),
            100,
        );
        assert!((0.735..0.785).contains(&steep), "θ 1.2: top 1% got {steep}");
    }

    #[test]
    fn zipf_hot_keys_are_scattered() {
        let hits = histogram(KeyDistSpec::Zipf { theta: 0.99 }, 10_000, 1_000_000);
        let mut order: Vec<usize> = (0..hits.len()).collect();
        order.sort_unstable_by(|&a, &b| hits[b].cmp(&hits[a]));
        let mut hottest = order[..100].to_vec();
        hottest.sort_unstable();
        // Contiguous would mean a span of 99; scattered keys span most of the key space.
        assert!(hottest[99] - hottest[0] > 5_000, "{hottest:?}");
        let adjacent = hottest.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(
            adjacent < 10,
            "{adjacent} adjacent pairs among the hottest 100"
        );
        // Every key is reachable (a bijection, unlike hash-mod scrambling).
        assert!(hits.iter().filter(|&&h| h == 0).count() < 50);
    }

    #[test]
    fn zipf_capacity_keeps_hot_keys_as_count_grows() {
        let spec = KeyDistSpec::Zipf { theta: 0.99 };
        let mut chooser = KeyChooser::with_capacity(spec, 9_000, 10_000);
        let mut rng = thread_rng(3, 0);
        for _ in 0..10_000 {
            assert!(chooser.next(&mut rng) < 9_000);
        }
        let mut full = KeyChooser::new(spec, 10_000);
        chooser.set_count(10_000);
        let (mut a, mut b) = (thread_rng(4, 0), thread_rng(4, 0));
        for _ in 0..1000 {
            assert_eq!(chooser.next(&mut a), full.next(&mut b));
        }
    }

    #[test]
    fn hotspot_fractions() {
        let spec: KeyDistSpec = "hotspot:0.9:0.1".parse().unwrap();
        let mut chooser = KeyChooser::new(spec, 1_000_000);
        let mut rng = thread_rng(5, 0);
        let draws = 100_000;
        let hot = (0..draws)
            .filter(|_| chooser.next(&mut rng) < 100_000)
            .count();
        let share = hot as f64 / draws as f64;
        assert!((0.89..=0.91).contains(&share), "{share}");
    }

    #[test]
    fn hotspot_edge_counts() {
        let spec = KeyDistSpec::Hotspot {
            ops_fraction: 0.9,
            data_fraction: 0.01,
        };
        let mut rng = thread_rng(6, 0);
        let mut one = KeyChooser::new(spec, 1);
        assert_eq!(one.next(&mut rng), 0);
        let mut few = KeyChooser::new(spec, 3);
        for _ in 0..100 {
            assert!(few.next(&mut rng) < 3);
        }
    }

    #[test]
    fn uniform_is_flat() {
        let hits = histogram(KeyDistSpec::Uniform, 100, 100_000);
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
    }

    #[test]
    fn latest_prefers_new_keys_and_follows_inserts() {
        let mut chooser = KeyChooser::new(KeyDistSpec::Latest, 10_000);
        let mut rng = thread_rng(7, 0);
        let newest = (0..100_000)
            .filter(|_| chooser.next(&mut rng) >= 9_900)
            .count();
        assert!(
            newest > 45_000,
            "{newest} of 100,000 draws on the newest 1%"
        );
        for count in 10_001..=11_000 {
            chooser.set_count(count);
            assert!(chooser.next(&mut rng) < count);
        }
        let newest = (0..10_000)
            .filter(|_| chooser.next(&mut rng) >= 10_900)
            .count();
        assert!(newest > 4_500, "{newest}");
    }

    #[test]
    fn same_seed_same_keys() {
        for spec in ["uniform", "zipf:0.99", "hotspot:0.8:0.2", "latest"] {
            let spec: KeyDistSpec = spec.parse().unwrap();
            let draw = |seed| {
                let mut chooser = KeyChooser::new(spec, 1_000_000);
                let mut rng = thread_rng(seed, 0);
                (0..100)
                    .map(|_| chooser.next(&mut rng))
                    .collect::<Vec<u64>>()
            };
            assert_eq!(draw(1), draw(1), "{spec}");
            assert_ne!(draw(1), draw(2), "{spec}");
        }
    }
}

//! Operation mixes (the YCSB core workloads) and scan lengths.

use std::fmt;

use rand::{Rng, RngCore};

use super::key_spec::KeyDistSpec;
use super::phase::YcsbWorkload;

/// The kind of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Point read of an existing key.
    Read,
    /// Overwrite of an existing key with a new value.
    Update,
    /// Insert of a new key (the next key number after the current count).
    Insert,
    /// Range scan from an existing key ([`ScanLength`] entries).
    Scan,
    /// Read an existing key, then write it back with a new value.
    ReadModifyWrite,
}

/// A weighted choice among operation kinds, drawn with the caller's (seeded) generator in O(k)
/// for k kinds (at most five).
#[derive(Debug, Clone, PartialEq)]
pub struct OpMix {
    /// Kinds with cumulative thresholds out of 2^64: a uniform `u64` below the first threshold
    /// picks the first kind, and so on; the last threshold is `u64::MAX` so every draw lands.
    kinds: Vec<(OpKind, u64)>,
}

/// A mix whose weights are not finite, non-negative and with a positive sum.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMixError(Vec<(OpKind, f64)>);

impl fmt::Display for OpMixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid operation mix {:?}: weights must be finite, ≥ 0, with a positive sum",
            self.0
        )
    }
}

impl std::error::Error for OpMixError {}

impl OpMix {
    /// A mix with the given relative weights (normalised to their sum; zero weights dropped).
    pub fn new(weights: &[(OpKind, f64)]) -> Result<Self, OpMixError> {
        let total: f64 = weights.iter().map(|&(_, w)| w).sum();
        let valid = weights.iter().all(|&(_, w)| w.is_finite() && w >= 0.0);
        if !(valid && total.is_finite() && total > 0.0) {
            return Err(OpMixError(weights.to_vec()));
        }
        let mut cumulative = 0.0;
        let mut kinds: Vec<(OpKind, u64)> = Vec::new();
        for &(kind, weight) in weights.iter().filter(|&&(_, w)| w > 0.0) {
            cumulative += weight / total;
            // 2^64 as f64; the `as` cast saturates at u64::MAX.
            kinds.push((kind, (cumulative * 18_446_744_073_709_551_616.0) as u64));
        }
        if let Some(last) = kinds.last_mut() {
            last.1 = u64::MAX;
        }
        Ok(OpMix { kinds })
    }

    /// A mix of one kind only (the single-operation phases).
    pub fn only(kind: OpKind) -> Self {
        OpMix {
            kinds: vec![(kind, u64::MAX)],
        }
    }

    /// The operation mix of a YCSB core workload: A 50% read / 50% update, B 95/5 read/update,
    /// C 100% read, D 95% read / 5% insert, E 95% scan / 5% insert, F 50% read / 50%
    /// read-modify-write.
    pub fn ycsb(workload: YcsbWorkload) -> Self {
        use OpKind::*;
        let weights: &[(OpKind, f64)] = match workload {
            YcsbWorkload::A => &[(Read, 0.5), (Update, 0.5)],
            YcsbWorkload::B => &[(Read, 0.95), (Update, 0.05)],
            YcsbWorkload::C => &[(Read, 1.0)],
            YcsbWorkload::D => &[(Read, 0.95), (Insert, 0.05)],
            YcsbWorkload::E => &[(Scan, 0.95), (Insert, 0.05)],
            YcsbWorkload::F => &[(Read, 0.5), (ReadModifyWrite, 0.5)],
        };
        OpMix::new(weights).expect("the YCSB weights are valid")
    }

    /// The kinds this mix can draw and their probabilities.
    pub fn probabilities(&self) -> Vec<(OpKind, f64)> {
        let mut previous = 0u64;
        self.kinds
            .iter()
            .map(|&(kind, threshold)| {
                let p = (threshold - previous) as f64 / u64::MAX as f64;
                previous = threshold;
                (kind, p)
            })
            .collect()
    }

    /// The kind of the next operation.
    pub fn next<R: RngCore + ?Sized>(&self, rng: &mut R) -> OpKind {
        let x = rng.next_u64();
        self.kinds
            .iter()
            .find(|&&(_, threshold)| x < threshold)
            .map_or(self.kinds[self.kinds.len() - 1].0, |&(kind, _)| kind)
    }
}

impl YcsbWorkload {
    /// The operation mix ([`OpMix::ycsb`]).
    pub fn op_mix(self) -> OpMix {
        OpMix::ycsb(self)
    }

    /// The key distribution the workload prescribes, if it overrides the run's: D reads the
    /// latest inserted keys; the others use the run's distribution (YCSB's default is
    /// Zipfian, as in the Scavenger runs).
    pub fn key_dist(self) -> Option<KeyDistSpec> {
        (self == YcsbWorkload::D).then_some(KeyDistSpec::Latest)
    }

    /// The scan length of E (uniform 1..=100, YCSB's `maxscanlength`); `None` for workloads
    /// without scans.
    pub fn scan_length(self) -> Option<ScanLength> {
        (self == YcsbWorkload::E).then_some(ScanLength::new(YCSB_MAX_SCAN))
    }
}

/// The longest scan of YCSB E.
pub const YCSB_MAX_SCAN: usize = 100;
/// The longest scan of the `scan` phase (Scavenger §4.2: uniform 1 to 1000).
pub const DEFAULT_MAX_SCAN: usize = 1000;

/// Scan lengths, uniform in `1..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanLength {
    max: usize,
}

impl Default for ScanLength {
    /// The `scan` phase's lengths: uniform 1..=1000.
    fn default() -> Self {
        ScanLength::new(DEFAULT_MAX_SCAN)
    }
}

impl ScanLength {
    /// Lengths uniform in `1..=max`. Panics if `max` is 0.
    pub fn new(max: usize) -> Self {
        assert!(max >= 1, "scans of at most 0 entries");
        ScanLength { max }
    }

    /// The longest scan.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The length of the next scan.
    pub fn next<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        rng.random_range(1..=self.max)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::workload::seed::thread_rng;

    fn shares(mix: &OpMix, draws: usize) -> HashMap<OpKind, f64> {
        let mut rng = thread_rng(9, 0);
        let mut counts = HashMap::new();
        for _ in 0..draws {
            *counts.entry(mix.next(&mut rng)).or_insert(0usize) += 1;
        }
        counts
            .into_iter()
            .map(|(k, c)| (k, c as f64 / draws as f64))
            .collect()
    }

    #[test]
    fn ycsb_mixes() {
        use OpKind::*;
        let expected: [(YcsbWorkload, &[(OpKind, f64)]); 6] = [
            (YcsbWorkload::A, &[(Read, 0.5), (Update, 0.5)]),
            (YcsbWorkload::B, &[(Read, 0.95), (Update, 0.05)]),
            (YcsbWorkload::C, &[(Read, 1.0)]),
            (YcsbWorkload::D, &[(Read, 0.95), (Insert, 0.05)]),
            (YcsbWorkload::E, &[(Scan, 0.95), (Insert, 0.05)]),
            (YcsbWorkload::F, &[(Read, 0.5), (ReadModifyWrite, 0.5)]),
        ];
        for (workload, weights) in expected {
            let got = shares(&workload.op_mix(), 200_000);
            assert_eq!(got.len(), weights.len(), "{workload}: {got:?}");
            for &(kind, p) in weights {
                let share = got[&kind];
                assert!(
                    (share - p).abs() < 0.005,
                    "{workload} {kind:?}: {share} vs {p}"
                );
            }
            for (kind, p) in workload.op_mix().probabilities() {
                assert!(
                    weights
                        .iter()
                        .any(|&(k, q)| k == kind && (p - q).abs() < 1e-9)
                );
            }
        }
        assert_eq!(YcsbWorkload::D.key_dist(), Some(KeyDistSpec::Latest));
        assert_eq!(YcsbWorkload::A.key_dist(), None);
        assert_eq!(YcsbWorkload::E.scan_length(), Some(ScanLength::new(100)));
        assert_eq!(YcsbWorkload::C.scan_length(), None);
    }

    #[test]
    fn custom_mixes() {
        let mix = OpMix::new(&[
            (OpKind::Read, 3.0),
            (OpKind::Update, 1.0),
            (OpKind::Scan, 0.0),
        ])
        .unwrap();
        let got = shares(&mix, 100_000);
        assert!((got[&OpKind::Read] - 0.75).abs() < 0.01);
        assert!(!got.contains_key(&OpKind::Scan));
        assert!(shares(&OpMix::only(OpKind::Scan), 100).len() == 1);
        for bad in [
            vec![],
            vec![(OpKind::Read, 0.0)],
            vec![(OpKind::Read, -1.0), (OpKind::Update, 2.0)],
            vec![(OpKind::Read, f64::NAN)],
        ] {
            assert!(OpMix::new(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scan_lengths() {
        let mut rng = thread_rng(2, 0);
        let lengths: Vec<usize> = (0..100_000)
            .map(|_| ScanLength::default().next(&mut rng))
            .collect();
        assert!(lengths.iter().all(|l| (1..=1000).contains(l)));
        assert!(lengths.contains(&1) && lengths.contains(&1000));
        let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
        assert!((mean - 500.5).abs() < 5.0, "{mean}");
        assert!((0..1000).all(|_| ScanLength::new(100).next(&mut rng) <= 100));
    }
}

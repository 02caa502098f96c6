//! Lifetime points (DumpKV §4.3.1): the TTLs of the short, long and default value tables,
//! read from two lifetime histograms at percentiles the GC garbage ratio moves, and the labels
//! of training samples (§4.3.2).

use super::features::{Features, window_index};
use crate::key::SeqNo;

/// Sub-buckets per power of two of a [`LifetimeHistogram`].
const SUB_BUCKETS: usize = 8;
/// Buckets of a histogram: lifetimes up to 2^64 writes.
const BUCKETS: usize = 64 * SUB_BUCKETS;

/// A histogram of lifetimes in writes, with 8 logarithmic sub-buckets per power of two (an
/// error of at most 1/8 of a value), aged by halving every count once `window` lifetimes were
/// added since the last halving, so it follows a workload that changes. The halving happens
/// in [`LifetimeHistogram::settle`], at the end of a job: within a job additions commute, so
/// a job whose verdicts arrive from several threads counts alike in any order.
#[derive(Debug, Clone)]
pub struct LifetimeHistogram {
    counts: Vec<f64>,
    total: f64,
    added: u64,
    window: u64,
}

impl LifetimeHistogram {
    /// An empty histogram halved every `window` additions (at least 1).
    pub fn new(window: u64) -> Self {
        LifetimeHistogram {
            counts: vec![0.0; BUCKETS],
            total: 0.0,
            added: 0,
            window: window.max(1),
        }
    }

    fn index(v: u64) -> usize {
        if v < SUB_BUCKETS as u64 {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros() as usize; // v in [2^exp, 2^(exp+1)), exp >= 3
        let sub = ((v >> (exp - 3)) & (SUB_BUCKETS as u64 - 1)) as usize;
        (exp - 2) * SUB_BUCKETS + sub
    }

    /// The smallest value of bucket `i`.
    fn lower(i: usize) -> u64 {
        if i < SUB_BUCKETS {
            return i as u64;
        }
        let exp = i / SUB_BUCKETS + 2;
        let sub = (i % SUB_BUCKETS) as u64;
        (SUB_BUCKETS as u64 + sub) << (exp - 3)
    }

    /// Counts one lifetime.
    pub fn add(&mut self, lifetime: SeqNo) {
        self.counts[Self::index(lifetime)] += 1.0;
        self.total += 1.0;
        self.added += 1;
    }

    /// Halves every count if `window` lifetimes were added since the last halving.
    pub fn settle(&mut self) {
        if self.added >= self.window {
            self.added = 0;
            for c in &mut self.counts {
                *c /= 2.0;
            }
            self.total /= 2.0;
        }
    }

    /// Lifetimes counted (after ageing, so a weight rather than a count).
    pub fn weight(&self) -> f64 {
        self.total
    }

    /// The lifetime below which `percent` % of the counted ones lie (the lower bound of its
    /// bucket); `None` when empty.
    pub fn percentile(&self, percent: f64) -> Option<SeqNo> {
        if self.total <= 0.0 {
            return None;
        }
        let target = self.total * (percent / 100.0).clamp(0.0, 1.0);
        let mut seen = 0.0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= target && *c > 0.0 {
                return Some(Self::lower(i));
            }
        }
        let last = self.counts.iter().rposition(|c| *c > 0.0)?;
        Some(Self::lower(last))
    }
}

/// `1 / (1 + e^−x)`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The paper's constants (§5.1): steepness `α_s = α_l = 10`, midpoints `β_0 = 0.25`,
/// `β_1 = 0.75`, base and extra percentages 60 / 40 (short) and 80 / 20 (long).
const ALPHA: f64 = 10.0;
const BETA0: f64 = 0.25;
const BETA1: f64 = 0.75;
const INI_SP: (f64, f64) = (60.0, 40.0);
const INI_LP: (f64, f64) = (80.0, 20.0);

/// Lifetimes counted in a histogram before its percentiles replace the initial points.
pub const MIN_HISTOGRAM_WEIGHT: f64 = 64.0;

/// The TTLs of the three classes of value tables, in writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifetimePoints {
    /// `l_s`: tables of values predicted to die soon.
    pub short: SeqNo,
    /// `l_l`: tables of values predicted to live long.
    pub long: SeqNo,
    /// `l_d`: tables a flush writes.
    pub default: SeqNo,
}

impl LifetimePoints {
    /// The points before anything was learned: the authors' code starts at 2M / 10M / 2M
    /// writes for a unit of 1M, so 2, 10 and 2 units.
    pub fn initial(unit: u64) -> Self {
        LifetimePoints {
            short: unit.saturating_mul(2),
            long: unit.saturating_mul(10),
            default: unit.saturating_mul(2),
        }
    }

    /// The points for GC garbage ratio `r` (paper Eqs. 3, 4 and 6): `l_s` is the percentile
    /// `60·σ(α(1−r−β0)) + 40·σ(α(1−r−β1))` of the short histogram, `l_l` the percentile
    /// `80·σ(α(1−r−β0)) + 20·σ(α(1−r−β1))` of the long one, and `l_d = l_s + (l_l − l_s)·σ(1 − r
    /// − β1)` (as the paper writes it; the authors' code has `α` inside that sigmoid too). A
    /// histogram with less than [`MIN_HISTOGRAM_WEIGHT`] keeps the point of `previous`; `l_l`
    /// is never below `l_s`.
    pub fn compute(
        short: &LifetimeHistogram,
        long: &LifetimeHistogram,
        r: f64,
        previous: LifetimePoints,
    ) -> LifetimePoints {
        let r = r.clamp(0.0, 1.0);
        let (p0, p1) = (
            sigmoid(ALPHA * (1.0 - r - BETA0)),
            sigmoid(ALPHA * (1.0 - r - BETA1)),
        );
        let point = |h: &LifetimeHistogram, (a, b): (f64, f64), old: SeqNo| {
            if h.weight() < MIN_HISTOGRAM_WEIGHT {
                old
            } else {
                h.percentile(a * p0 + b * p1).unwrap_or(old).max(1)
            }
        };
        let l_s = point(short, INI_SP, previous.short);
        let l_l = point(long, INI_LP, previous.long).max(l_s);
        let l_d = l_s as f64 + (l_l - l_s) as f64 * sigmoid(1.0 - r - BETA1);
        LifetimePoints {
            short: l_s,
            long: l_l,
            default: l_d.round() as SeqNo,
        }
    }
}

/// The label of a sample from a compaction out of L0 (queue A): a version with `features`
/// lived `lifetime` writes. `None` for a lifetime shorter than `l_d` (such values die in the
/// default tables before any GC sees them, paper §4.3.2); else, seen at age `l_d`, 1 (long)
/// when what remained, `lifetime − l_d`, exceeds `l_s` (Eq. 7), 0 (short) otherwise.
pub fn compaction_label(lifetime: SeqNo, points: &LifetimePoints) -> Option<bool> {
    if lifetime < points.default {
        return None;
    }
    Some(lifetime - points.default > points.short)
}

/// The label of a sample from a GC job (queue B): a live version with `features`, `age`
/// writes old. A key written once is long (1). Otherwise the key is long when its counter of
/// window `s_idx` (the first window reaching `l_s`), decayed to now, is at most 1: fewer than
/// one write in that window, an inactive key (paper Eq. 8's window). Eq. 8 as printed labels
/// such a key 0, short; its prose ("deem this key as inactive if keys have fewer than one
/// write operation in the `l_s` window, implying a long remaining lifetime") and the authors'
/// code (`DBImpl::GetNewLabel`: a counter above 1.0 is label 0, short) put it on the long
/// side, as here. (That code reads the counter of `l_l`'s window, Eq. 8 that of `l_s`'s; at
/// its newest commit the code adds GC samples of keys written once only, so its rule is never
/// used there. We follow Eq. 8's window.)
pub fn gc_label(features: &Features, age: SeqNo, points: &LifetimePoints, unit: u64) -> bool {
    if features.written_once() {
        return true;
    }
    let i = window_index(points.short, unit);
    features.decayed(age, unit)[i] <= 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_cover_every_value_within_an_eighth() {
        for v in [0u64, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 1 << 20, u64::MAX] {
            let i = LifetimeHistogram::index(v);
            assert!(i < BUCKETS, "{v}");
            let lo = LifetimeHistogram::lower(i);
            assert!(lo <= v, "{v}: {lo}");
            assert!(v - lo <= v / 8, "{v}: {lo}");
            assert_eq!(LifetimeHistogram::index(lo), i, "{v}");
        }
        let mut h = LifetimeHistogram::new(1 << 30);
        assert_eq!(h.percentile(50.0), None);
        for v in 1..=1000u64 {
            h.add(v * 100);
        }
        let median = h.percentile(50.0).unwrap();
        assert!((43_000..=50_000).contains(&median), "{median}");
        assert!(h.percentile(0.0).unwrap() <= 100);
        assert!(h.percentile(100.0).unwrap() >= 87_500);
    }

    #[test]
    fn histograms_age_by_halving() {
        let mut h = LifetimeHistogram::new(100);
        for _ in 0..100 {
            h.add(10);
        }
        assert_eq!(h.weight(), 100.0);
        h.settle();
        assert_eq!(h.weight(), 50.0);
        for _ in 0..100 {
            h.add(1000);
        }
        h.settle();
        // The newer lifetimes weigh twice the older ones.
        assert_eq!(h.weight(), 75.0);
        assert!(h.percentile(50.0).unwrap() >= 896);
    }

    #[test]
    fn points_follow_the_papers_equations_by_hand() {
        // Short lifetimes 1..=100, long 1000..=100_000 (step 1000): percentiles by hand.
        let mut s = LifetimeHistogram::new(1 << 30);
        let mut l = LifetimeHistogram::new(1 << 30);
        for v in 1..=100u64 {
            s.add(v);
            l.add(v * 1000);
        }
        let old = LifetimePoints::initial(1 << 20);
        // r = 0.5: sp = 60·σ(2.5) + 40·σ(−2.5) = 60·0.92414 + 40·0.07586 = 58.483 %.
        let p = LifetimePoints::compute(&s, &l, 0.5, old);
        let sp = 60.0 * sigmoid(2.5) + 40.0 * sigmoid(-2.5);
        assert!((sp - 58.483).abs() < 1e-3);
        assert_eq!(p.short, s.percentile(sp).unwrap());
        assert!((56..=59).contains(&p.short), "{p:?}");
        // lp = 80·0.92414 + 20·0.07586 = 75.448 %: about 75 000 writes.
        let lp = 80.0 * sigmoid(2.5) + 20.0 * sigmoid(-2.5);
        assert_eq!(p.long, l.percentile(lp).unwrap());
        assert!((65_536..=76_000).contains(&p.long), "{p:?}");
        // l_d = l_s + (l_l − l_s)·σ(−0.25) = l_s + 0.43782·(l_l − l_s).
        let ld = p.short as f64 + (p.long - p.short) as f64 * sigmoid(-0.25);
        assert_eq!(p.default, ld.round() as u64);
        // Much garbage found (r → 1): points move to low percentiles; little (r → 0): high.
        let busy = LifetimePoints::compute(&s, &l, 0.95, old);
        let idle = LifetimePoints::compute(&s, &l, 0.0, old);
        assert!(busy.short < p.short && p.short < idle.short, "{busy:?} {idle:?}");
        assert!(busy.long < p.long && p.long <= idle.long);
        assert!(busy.default < idle.default);
        // Too little in a histogram: the previous points stay, l_d follows them.
        let empty = LifetimeHistogram::new(1 << 30);
        let kept = LifetimePoints::compute(&empty, &empty, 0.5, old);
        assert_eq!((kept.short, kept.long), (old.short, old.long));
        let ld = old.short as f64 + (old.long - old.short) as f64 * sigmoid(-0.25);
        assert_eq!(kept.default, ld.round() as u64);
    }

    #[test]
    fn labels_follow_the_rules() {
        let unit = 1000;
        let points = LifetimePoints {
            short: 2000,
            long: 10_000,
            default: 3000,
        };
        // Eq. 7: below l_d no sample; remaining beyond l_s is long.
        assert_eq!(compaction_label(2999, &points), None);
        assert_eq!(compaction_label(5000, &points), Some(false));
        assert_eq!(compaction_label(5001, &points), Some(true));
        // Written once: long.
        assert!(gc_label(&Features::first_write(true), 1, &points, unit));
        // A key written every 100 writes for a while: its window for l_s = 2000 (window 1,
        // 2000 writes) holds about 14 writes (1 / (1 − 2^−0.05)); shortly after, that counts
        // more than one write: short; long after (decayed by 2^−5 over 10 000 writes), long.
        let mut f = Features::first_write(true);
        for _ in 0..20 {
            f = f.next_write(100, unit);
        }
        assert_eq!(window_index(points.short, unit), 1);
        assert!(!gc_label(&f, 1000, &points, unit));
        assert!(gc_label(&f, 10_000, &points, unit));
        // A key rewritten every 5000 writes, found live 3000 writes after its write: its
        // counter of window 1 decayed to about 0.36: inactive, long.
        let g = Features::first_write(true).next_write(5000, unit);
        assert!(gc_label(&g, 3000, &points, unit));
    }
}

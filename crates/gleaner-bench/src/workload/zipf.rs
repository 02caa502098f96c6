//! Zipfian ranks by the algorithm of Gray et al. ("Quickly generating billion-record synthetic
//! databases", SIGMOD '94) as YCSB's `ZipfianGenerator` implements it: O(1) per draw once the
//! normalising constant ζ(n, θ) = Σᵢ₌₁ⁿ i^−θ is known.
//!
//! A draw takes u uniform in [0, 1): rank 0 if u·ζ(n) < 1, rank 1 if u·ζ(n) < 1 + 2^−θ (exact
//! for the two hottest items), otherwise ⌊n·(η·u − η + 1)^α⌋ with α = 1/(1 − θ) and
//! η = (1 − (2/n)^(1−θ)) / (1 − ζ(2)/ζ(n)) — a continuous approximation of the tail. It is the
//! generator the papers' YCSB runs used, including its bias: rank 2 is about 15–20% too likely,
//! and over 10,000 keys at θ = 0.99 the hottest 1% get ≈ 52.9% of draws where the exact
//! distribution gives 51.8%. The formula also holds for θ > 1 (α < 0 and η < 0 keep it
//! monotone), with similar accuracy; θ = 1 is excluded because α is undefined.

/// Up to this many items ζ is summed term by term (≈ 20 ms once); beyond, the first
/// `EXACT_TERMS` terms are summed and the rest approximated by Euler–Maclaurin (below).
const EXACT_TERMS: u64 = 1 << 20;

/// Zipfian ranks `0..n` (rank 0 hottest) with constant θ.
#[derive(Debug, Clone)]
pub(crate) struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
    /// Σᵢ₌₁ᵐ i^−θ for m = `summed`, the exact part of ζ(n): kept so that a growing (or
    /// shrinking) n — YCSB "latest" — only adds (or removes) the terms in between, as YCSB's
    /// incremental `zeta(st, n, …)` does.
    summed: u64,
    partial: f64,
}

impl Zipfian {
    /// Ranks `0..n` (n ≥ 1) with constant θ > 0, θ ≠ 1.
    pub(crate) fn new(n: u64, theta: f64) -> Self {
        assert!(
            theta > 0.0 && theta != 1.0 && theta.is_finite(),
            "Zipfian θ = {theta}"
        );
        let mut z = Zipfian {
            n: 0,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2: 1.0 + 0.5f64.powf(theta),
            zetan: 0.0,
            eta: 0.0,
            summed: 0,
            partial: 0.0,
        };
        z.set_count(n);
        z
    }

    /// Changes the number of ranks to `n` (≥ 1). Costs O(|Δn|) term additions while n is at
    /// most 2^20 and O(1) beyond.
    pub(crate) fn set_count(&mut self, n: u64) {
        assert!(n >= 1, "Zipfian over no items");
        if n == self.n {
            return;
        }
        let target = n.min(EXACT_TERMS);
        while self.summed < target {
            self.summed += 1;
            self.partial += (self.summed as f64).powf(-self.theta);
        }
        while self.summed > target {
            self.partial -= (self.summed as f64).powf(-self.theta);
            self.summed -= 1;
        }
        self.n = n;
        self.zetan = self.partial + euler_maclaurin_tail(self.summed, n, self.theta);
        // With n ≤ 2 a draw never reaches the η formula (and its denominator would be 0).
        self.eta = if n <= 2 {
            0.0
        } else {
            (1.0 - (2.0 / n as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
        };
    }

    /// The rank for a uniform `u` in [0, 1).
    pub(crate) fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.zeta2 {
            return 1;
        }
        let r = self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
        // `as` saturates (and maps NaN to 0); the min guards u → 1 rounding to rank n.
        (r as u64).min(self.n - 1)
    }
}

/// Σᵢ₌ₘ₊₁ⁿ i^−θ by Euler–Maclaurin: ∫ₘⁿ x^−θ dx + (f(n) − f(m))/2 + (f′(n) − f′(m))/12 with
/// f(x) = x^−θ. For m = 2^20 the first omitted term is below θ³·m^−θ−3/720 ≈ 10^−21, so ζ is as
/// exact as the summed part, in O(1) for any n. (0 when n ≤ m.)
fn euler_maclaurin_tail(m: u64, n: u64, theta: f64) -> f64 {
    if n <= m {
        return 0.0;
    }
    let (m, n) = (m as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = (n.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta);
    integral + (f(n) - f(m)) / 2.0 + (df(n) - df(m)) / 12.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact_zeta(n: u64, theta: f64) -> f64 {
        (1..=n).map(|i| (i as f64).powf(-theta)).sum()
    }

    #[test]
    fn euler_maclaurin_matches_the_sum() {
        for theta in [0.2, 0.5, 0.99, 1.2] {
            let m = 1000;
            let n = 3_000_000;
            let approx = exact_zeta(m, theta) + euler_maclaurin_tail(m, n, theta);
            let exact = exact_zeta(n, theta);
            assert!(
                ((approx - exact) / exact).abs() < 1e-12,
                "θ {theta}: {approx} vs {exact}"
            );
        }
    }

    #[test]
    fn growing_and_shrinking_keep_zeta_right() {
        let mut z = Zipfian::new(10, 0.99);
        z.set_count(5000);
        assert!((z.zetan - exact_zeta(5000, 0.99)).abs() < 1e-9);
        z.set_count(EXACT_TERMS + 12_345);
        let big = Zipfian::new(EXACT_TERMS + 12_345, 0.99);
        assert!((z.zetan - big.zetan).abs() < 1e-9);
        z.set_count(77);
        assert!((z.zetan - exact_zeta(77, 0.99)).abs() < 1e-9);
    }

    #[test]
    fn ranks_stay_in_range() {
        for n in [1, 2, 3, 10, 1 << 40] {
            for theta in [0.2, 0.99, 1.5, 3.0] {
                let z = Zipfian::new(n, theta);
                for u in [0.0, 1e-9, 0.3, 0.5, 0.999_999, 1.0 - f64::EPSILON] {
                    assert!(z.rank(u) < n, "n {n} θ {theta} u {u}");
                }
                assert_eq!(z.rank(0.0), 0);
            }
        }
    }

    #[test]
    fn large_n_is_built_quickly() {
        // 10^12 keys: the Euler–Maclaurin tail, not 10^12 terms.
        let z = Zipfian::new(1_000_000_000_000, 0.99);
        assert_eq!(z.n, 1_000_000_000_000);
        assert!(z.zetan > 20.0 && z.zetan < 40.0, "{}", z.zetan);
    }
}

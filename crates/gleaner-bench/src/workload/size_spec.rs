//! `ValueSizeSpec`: how long values are, as given on the command line (`--value-size`).

use std::fmt;
use std::str::FromStr;

use super::spec::{SpecError, format_size, parse_f64, parse_size};

/// Smallest "small" value of the Mixed workloads (Scavenger §2.4 and §4.5.1: uniform 100–512 B).
pub const MIXED_SMALL_MIN: usize = 100;
/// Largest "small" value of the Mixed workloads.
pub const MIXED_SMALL_MAX: usize = 512;
/// The "large" value of the Mixed workloads: exactly 16 KiB.
pub const MIXED_LARGE: usize = 16 << 10;

/// Shape ξ of the generalized Pareto value sizes: the value RocksDB's trace-based workload
/// generator uses (`db_bench -value_k=0.2615`), fitted to Facebook's production traces (Cao et
/// al., FAST '20) and used by the Scavenger and DumpKV evaluations (their "Pareto-1K/4K/8K").
pub const PARETO_SHAPE: f64 = 0.2615;
/// Pareto samples are clamped to at most this many bytes (1 MiB), so one rare huge draw cannot
/// dominate a phase; the mass above it is below 10⁻⁶ for means up to 8 KiB.
pub const PARETO_MAX: usize = 1 << 20;

/// The largest value size a spec may ask for (64 MiB): the value pool of [`super::ValueGen`]
/// holds at least twice the largest value, and no engine under test stores larger values.
pub const MAX_VALUE_SIZE: u64 = 64 << 20;

/// How value sizes are drawn. Text forms (the canonical one is what `Display` prints):
///
/// - `fixed:SIZE` — every value is SIZE bytes (`fixed:16k` = 16384). SIZE is a byte count with
///   an optional binary suffix (`k`, `KiB`, `m`, `MiB`, `g`, … all powers of 1024).
/// - `mixed8k` — Scavenger's Mixed-8K (ByteDance OLTP): half the values uniform in
///   100..=512 bytes, half exactly 16 KiB; mean ≈ 8.3 KiB. Same as `mixed:0.5`.
/// - `mixed:RATIO` — RATIO (in [0, 1]) of values small (uniform 100..=512 B), the rest 16 KiB;
///   Scavenger Fig. 16c uses small:large = 1:9, 3:7, 5:5, 7:3 and 9:1, i.e. `mixed:0.1` …
///   `mixed:0.9`.
/// - `pareto:MEAN` — generalized Pareto with location 0, shape ξ = [`PARETO_SHAPE`] and scale
///   σ = MEAN·(1 − ξ), so the mean σ/(1 − ξ) is MEAN bytes; samples rounded to whole bytes and
///   clamped to [1, [`PARETO_MAX`]].
/// - `uniform:MIN-MAX` — uniform in MIN..=MAX bytes (`uniform:100-512`).
///
/// Sizes are at least 1 byte and at most [`MAX_VALUE_SIZE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueSizeSpec {
    /// Every value has this many bytes.
    Fixed(usize),
    /// A fraction of small values (uniform 100..=512 B), the rest [`MIXED_LARGE`].
    Mixed {
        /// Fraction of values that are small, in [0, 1].
        small_fraction: f64,
    },
    /// Generalized Pareto with this mean in bytes (see the type's documentation).
    Pareto {
        /// Mean value size in bytes (before clamping).
        mean: usize,
    },
    /// Uniform in `min..=max` bytes.
    Uniform {
        /// Smallest size.
        min: usize,
        /// Largest size.
        max: usize,
    },
}

impl ValueSizeSpec {
    /// Scavenger's Mixed-8K: [`ValueSizeSpec::Mixed`] with half the values small.
    pub const MIXED_8K: ValueSizeSpec = ValueSizeSpec::Mixed {
        small_fraction: 0.5,
    };

    /// The mean value size in bytes, which the harness needs to size phases (bytes loaded,
    /// bytes updated). For Pareto it is the mean of the clamped, rounded distribution
    /// (within a fraction of a byte of MEAN for the papers' means).
    pub fn mean(&self) -> f64 {
        match *self {
            ValueSizeSpec::Fixed(size) => size as f64,
            ValueSizeSpec::Mixed { small_fraction } => {
                let small = (MIXED_SMALL_MIN + MIXED_SMALL_MAX) as f64 / 2.0;
                small_fraction * small + (1.0 - small_fraction) * MIXED_LARGE as f64
            }
            ValueSizeSpec::Pareto { mean } => pareto_clamped_mean(mean as f64),
            ValueSizeSpec::Uniform { min, max } => (min + max) as f64 / 2.0,
        }
    }

    /// The largest size this spec can produce.
    pub fn max(&self) -> usize {
        match *self {
            ValueSizeSpec::Fixed(size) => size,
            ValueSizeSpec::Mixed { small_fraction } if small_fraction >= 1.0 => MIXED_SMALL_MAX,
            ValueSizeSpec::Mixed { .. } => MIXED_LARGE,
            ValueSizeSpec::Pareto { .. } => PARETO_MAX,
            ValueSizeSpec::Uniform { max, .. } => max,
        }
    }
}

/// Mean of `clamp(X, 1, PARETO_MAX)` for X generalized-Pareto(0, σ = mean·(1 − ξ), ξ):
/// E = 1 + ∫₁^M S(x) dx with survival S(x) = (1 + ξx/σ)^(−1/ξ), which integrates to
/// σ/(1 − ξ) · [(1 + ξ/σ)^(1 − 1/ξ) − (1 + ξM/σ)^(1 − 1/ξ)]. Rounding to whole bytes moves the
/// mean by far less than a byte, so it is ignored.
fn pareto_clamped_mean(mean: f64) -> f64 {
    let xi = PARETO_SHAPE;
    let sigma = mean * (1.0 - xi);
    let tail = |x: f64| (1.0 + xi * x / sigma).powf(1.0 - 1.0 / xi);
    1.0 + sigma / (1.0 - xi) * (tail(1.0) - tail(PARETO_MAX as f64))
}

const SPEC: &str = "value-size spec";
const EXPECTED: &str = "`fixed:SIZE`, `mixed8k`, `mixed:RATIO` (RATIO in [0, 1]), \
     `pareto:MEAN` or `uniform:MIN-MAX`, with sizes from 1 byte to 64 MiB like 100, 16k, 1MiB";

impl FromStr for ValueSizeSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let err = |expected: &str| SpecError::new(SPEC, text, expected);
        let size = |s: &str, what: &str| {
            parse_size(s)
                .filter(|&n| (1..=MAX_VALUE_SIZE).contains(&n))
                .map(|n| n as usize)
                .ok_or_else(|| {
                    err(&format!(
                        "{what} as a size from 1 byte to 64 MiB (like 100, 16k, 1MiB)"
                    ))
                })
        };
        let (kind, arg) = match text.split_once(':') {
            Some((kind, arg)) => (kind, Some(arg)),
            None => (text, None),
        };
        match (kind, arg) {
            ("fixed", Some(arg)) => Ok(ValueSizeSpec::Fixed(size(arg, "`fixed:SIZE` with SIZE")?)),
            ("mixed8k", None) => Ok(ValueSizeSpec::MIXED_8K),
            ("mixed", Some(arg)) => parse_f64(arg)
                .filter(|r| (0.0..=1.0).contains(r))
                .map(|small_fraction| ValueSizeSpec::Mixed { small_fraction })
                .ok_or_else(|| {
                    err("`mixed:RATIO` with RATIO, the fraction of small values, in [0, 1]")
                }),
            ("pareto", Some(arg)) => Ok(ValueSizeSpec::Pareto {
                mean: size(arg, "`pareto:MEAN` with MEAN")?,
            }),
            ("uniform", Some(arg)) => {
                let what = "`uniform:MIN-MAX` with MIN <= MAX";
                let (min, max) = arg.split_once('-').ok_or_else(|| err(what))?;
                let (min, max) = (size(min, what)?, size(max, what)?);
                if min > max {
                    return Err(err(what));
                }
                Ok(ValueSizeSpec::Uniform { min, max })
            }
            _ => Err(err(EXPECTED)),
        }
    }
}

impl fmt::Display for ValueSizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = |n: usize| format_size(n as u64);
        match *self {
            ValueSizeSpec::Fixed(n) => write!(f, "fixed:{}", size(n)),
            ValueSizeSpec::Mixed {
                small_fraction: 0.5,
            } => f.write_str("mixed8k"),
            // `f64`'s Display is the shortest text that parses back to the same number.
            ValueSizeSpec::Mixed { small_fraction } => write!(f, "mixed:{small_fraction}"),
            ValueSizeSpec::Pareto { mean } => write!(f, "pareto:{}", size(mean)),
            ValueSizeSpec::Uniform { min, max } => write!(f, "uniform:{}-{}", size(min), size(max)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ValueSizeSpec {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn valid_forms_parse_and_round_trip() {
        let cases = [
            ("fixed:16k", ValueSizeSpec::Fixed(16384), "fixed:16KiB"),
            ("fixed:100", ValueSizeSpec::Fixed(100), "fixed:100"),
            ("fixed:1MiB", ValueSizeSpec::Fixed(1 << 20), "fixed:1MiB"),
            ("mixed8k", ValueSizeSpec::MIXED_8K, "mixed8k"),
            ("mixed:0.5", ValueSizeSpec::MIXED_8K, "mixed8k"),
            (
                "mixed:0.25",
                ValueSizeSpec::Mixed {
                    small_fraction: 0.25,
                },
                "mixed:0.25",
            ),
            (
                "mixed:0",
                ValueSizeSpec::Mixed {
                    small_fraction: 0.0,
                },
                "mixed:0",
            ),
            (
                "mixed:1",
                ValueSizeSpec::Mixed {
                    small_fraction: 1.0,
                },
                "mixed:1",
            ),
            (
                "pareto:1k",
                ValueSizeSpec::Pareto { mean: 1024 },
                "pareto:1KiB",
            ),
            (
                "pareto:1000",
                ValueSizeSpec::Pareto { mean: 1000 },
                "pareto:1000",
            ),
            (
                "uniform:100-512",
                ValueSizeSpec::Uniform { min: 100, max: 512 },
                "uniform:100-512",
            ),
            (
                "uniform:1k-4k",
                ValueSizeSpec::Uniform {
                    min: 1024,
                    max: 4096,
                },
                "uniform:1KiB-4KiB",
            ),
            (
                "uniform:7-7",
                ValueSizeSpec::Uniform { min: 7, max: 7 },
                "uniform:7-7",
            ),
        ];
        for (text, spec, canonical) in cases {
            assert_eq!(parse(text), spec, "{text}");
            assert_eq!(spec.to_string(), canonical, "{text}");
            assert_eq!(parse(canonical), spec, "{canonical}");
        }
        for ratio in [0.1, 0.3, 0.7, 0.9, 1.0 / 3.0] {
            let spec = ValueSizeSpec::Mixed {
                small_fraction: ratio,
            };
            assert_eq!(parse(&spec.to_string()), spec);
        }
    }

    #[test]
    fn invalid_forms_name_the_spec() {
        for bad in [
            "fixed:",
            "fixed:-1",
            "fixed:0",
            "fixed:1g",
            "fixed",
            "mixed:1.5",
            "mixed:-0.1",
            "mixed:NaN",
            "mixed",
            "mixed8k:1",
            "pareto:0",
            "pareto:",
            "uniform:10-5",
            "uniform:10",
            "uniform:0-5",
            "bogus",
            "",
        ] {
            let err = bad.parse::<ValueSizeSpec>().expect_err(bad);
            let message = err.to_string();
            assert!(message.contains("value-size spec"), "{message}");
            assert!(message.contains(&format!("`{bad}`")), "{message}");
            assert!(message.contains("expected"), "{message}");
        }
    }

    #[test]
    fn means() {
        assert_eq!(ValueSizeSpec::Fixed(4096).mean(), 4096.0);
        assert_eq!(ValueSizeSpec::MIXED_8K.mean(), (306.0 + 16384.0) / 2.0);
        assert_eq!(
            ValueSizeSpec::Mixed {
                small_fraction: 1.0
            }
            .mean(),
            306.0
        );
        assert_eq!(ValueSizeSpec::Uniform { min: 100, max: 200 }.mean(), 150.0);
        for mean in [1024, 4096, 8192] {
            let m = ValueSizeSpec::Pareto { mean }.mean();
            assert!((m - mean as f64).abs() < 0.5, "{mean}: {m}");
        }
    }
}

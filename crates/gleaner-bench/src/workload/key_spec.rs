//! `KeyDistSpec`: which keys operations touch, as given on the command line (`--dist`).

use std::fmt;
use std::str::FromStr;

use super::spec::{SpecError, parse_f64};

/// The Zipfian constant YCSB and the Scavenger evaluation use by default.
pub const DEFAULT_ZIPF_THETA: f64 = 0.99;

/// How operations choose among the existing keys. Text forms (the canonical one is what
/// `Display` prints):
///
/// - `uniform` — every key equally likely.
/// - `zipf:THETA` — scrambled Zipfian with constant θ in (0, 1) or (1, ∞) (θ = 1 is excluded:
///   the YCSB formula divides by 1 − θ). Key ranks are drawn Zipfian and then spread over the
///   key space by a fixed bijection, so the hot keys are not neighbours (see
///   [`super::KeyChooser`]). Scavenger uses θ = 0.99, DumpKV 0.2, 0.5 and 0.9.
/// - `hotspot:OPS:DATA` — OPS of the operations (in [0, 1]) go uniformly to a contiguous DATA
///   fraction of the key space (in (0, 1)), the lowest key numbers; the rest go uniformly to
///   the other keys. `hotspot:0.9:0.1`: 90% of operations on 10% of the keys.
/// - `latest` — YCSB's "latest": Zipfian over recency, the most recently inserted key hottest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyDistSpec {
    /// Every key equally likely.
    Uniform,
    /// Scrambled Zipfian.
    Zipf {
        /// The Zipfian constant θ.
        theta: f64,
    },
    /// A hot, contiguous part of the key space gets a fixed share of the operations.
    Hotspot {
        /// Fraction of operations that go to the hot keys.
        ops_fraction: f64,
        /// Fraction of the key space that is hot.
        data_fraction: f64,
    },
    /// Zipfian over recency: the newest key is the most likely.
    Latest,
}

const SPEC: &str = "key-distribution spec";
const EXPECTED: &str = "`uniform`, `zipf:THETA` (THETA > 0, not 1), `hotspot:OPS:DATA` or `latest`";

impl FromStr for KeyDistSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let err = |expected: &str| SpecError::new(SPEC, text, expected);
        let (kind, arg) = match text.split_once(':') {
            Some((kind, arg)) => (kind, Some(arg)),
            None => (text, None),
        };
        match (kind, arg) {
            ("uniform", None) => Ok(KeyDistSpec::Uniform),
            ("latest", None) => Ok(KeyDistSpec::Latest),
            ("zipf", Some(arg)) => parse_f64(arg)
                .filter(|&theta| theta > 0.0 && theta != 1.0)
                .map(|theta| KeyDistSpec::Zipf { theta })
                .ok_or_else(|| err("`zipf:THETA` with THETA in (0, 1) or above 1, like 0.99")),
            ("hotspot", Some(arg)) => {
                let what = "`hotspot:OPS:DATA` with OPS, the fraction of operations on the hot \
                            keys, in [0, 1] and DATA, the fraction of keys that are hot, in (0, 1)";
                let (ops, data) = arg.split_once(':').ok_or_else(|| err(what))?;
                let ops_fraction = parse_f64(ops)
                    .filter(|x| (0.0..=1.0).contains(x))
                    .ok_or_else(|| err(what))?;
                let data_fraction = parse_f64(data)
                    .filter(|&x| x > 0.0 && x < 1.0)
                    .ok_or_else(|| err(what))?;
                Ok(KeyDistSpec::Hotspot {
                    ops_fraction,
                    data_fraction,
                })
            }
            _ => Err(err(EXPECTED)),
        }
    }
}

impl fmt::Display for KeyDistSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `f64`'s Display is the shortest text that parses back to the same number.
        match *self {
            KeyDistSpec::Uniform => f.write_str("uniform"),
            KeyDistSpec::Zipf { theta } => write!(f, "zipf:{theta}"),
            KeyDistSpec::Hotspot {
                ops_fraction,
                data_fraction,
            } => {
                write!(f, "hotspot:{ops_fraction}:{data_fraction}")
            }
            KeyDistSpec::Latest => f.write_str("latest"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_forms_round_trip() {
        let cases = [
            ("uniform", KeyDistSpec::Uniform),
            ("latest", KeyDistSpec::Latest),
            ("zipf:0.99", KeyDistSpec::Zipf { theta: 0.99 }),
            ("zipf:0.2", KeyDistSpec::Zipf { theta: 0.2 }),
            ("zipf:1.2", KeyDistSpec::Zipf { theta: 1.2 }),
            (
                "hotspot:0.9:0.1",
                KeyDistSpec::Hotspot {
                    ops_fraction: 0.9,
                    data_fraction: 0.1,
                },
            ),
            (
                "hotspot:1:0.2",
                KeyDistSpec::Hotspot {
                    ops_fraction: 1.0,
                    data_fraction: 0.2,
                },
            ),
        ];
        for (text, spec) in cases {
            assert_eq!(text.parse::<KeyDistSpec>(), Ok(spec), "{text}");
            assert_eq!(spec.to_string(), text);
        }
        assert_eq!(
            "zipf:.5".parse::<KeyDistSpec>(),
            Ok(KeyDistSpec::Zipf { theta: 0.5 })
        );
    }

    #[test]
    fn invalid_forms_name_the_spec() {
        for bad in [
            "zipf:1",
            "zipf:abc",
            "zipf:0",
            "zipf:-0.5",
            "zipf:inf",
            "zipf",
            "hotspot:0.9",
            "hotspot:1.5:0.1",
            "hotspot:0.9:0",
            "hotspot:0.9:1",
            "hotspot:0.9:0.1:0.2",
            "uniform:1",
            "latest:2",
            "bogus",
            "",
        ] {
            let message = bad.parse::<KeyDistSpec>().expect_err(bad).to_string();
            assert!(message.contains("key-distribution spec"), "{message}");
            assert!(message.contains(&format!("`{bad}`")), "{message}");
        }
    }
}

//! What the text specs have in common: the parse error, and parsing of byte sizes and fractions.

use std::fmt;

/// A spec that does not parse: names the kind of spec, the text given and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Which kind of spec (e.g. "value-size spec").
    pub spec: &'static str,
    /// The text that was given.
    pub input: String,
    /// What a valid spec looks like.
    pub expected: String,
}

impl SpecError {
    pub(crate) fn new(spec: &'static str, input: &str, expected: impl Into<String>) -> Self {
        SpecError {
            spec,
            input: input.to_owned(),
            expected: expected.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {} `{}`: expected {}",
            self.spec, self.input, self.expected
        )
    }
}

impl std::error::Error for SpecError {}

/// Parses a byte count: decimal digits and an optional binary-multiple suffix, case-insensitive:
/// none or `b` (bytes), `k`/`kb`/`kib` (1024), `m`/`mb`/`mib` (1024²), `g`/`gb`/`gib` (1024³).
/// `kb` means 1024 like `kib`: benchmark sizes in the papers (16 KB values, 1 KB Pareto mean)
/// are powers of two, so a decimal reading would only ever surprise.
pub fn parse_size(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (number, suffix) = text.split_at(digits);
    let multiple: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(multiple)
}

/// Formats a byte count so [`parse_size`] reads it back: with the largest binary suffix that
/// divides it exactly (`16KiB`, `1MiB`), otherwise plain bytes.
pub fn format_size(bytes: u64) -> String {
    const SUFFIXES: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, suffix) in SUFFIXES {
        if bytes != 0 && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// Parses a finite decimal number (`0.99`, `1e-3`); `None` for anything else, including NaN and
/// infinities, which `f64::from_str` would accept.
pub(crate) fn parse_f64(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|x| x.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("16k"), Some(16384));
        assert_eq!(parse_size("16K"), Some(16384));
        assert_eq!(parse_size("16KiB"), Some(16384));
        assert_eq!(parse_size("16kb"), Some(16384));
        assert_eq!(parse_size("1m"), Some(1 << 20));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("7B"), Some(7));
        for bad in ["", "k", "-1", "1.5k", "16x", "16 k", "99999999999999999999"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(parse_size("99999999999G"), None, "overflow");
    }

    #[test]
    fn sizes_format_back() {
        for bytes in [1, 100, 1000, 1024, 16384, 1 << 20, 3 << 30, 1536] {
            assert_eq!(parse_size(&format_size(bytes)), Some(bytes));
        }
        assert_eq!(format_size(16384), "16KiB");
        assert_eq!(format_size(1536), "1536");
    }

    #[test]
    fn error_names_the_spec() {
        let e = SpecError::new("value-size spec", "fixed:", "`fixed:SIZE`");
        assert_eq!(
            e.to_string(),
            "invalid value-size spec `fixed:`: expected `fixed:SIZE`"
        );
    }
}

//! Number formatting for the report. Every function is deterministic and total: a value that
//! cannot be shown (NaN, infinity, a ratio with a zero denominator) becomes [`NONE`], so a bad
//! figure in `results.json` shows up as a dash instead of a panic or a misleading number.

/// What a cell shows when there is no meaningful value.
pub const NONE: &str = "—";

/// Groups the digits of `n` by thousands: `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `x` with `decimals` fixed decimals and the integer part grouped by thousands:
/// `1234.56` with 1 → `1,234.6`; 0 decimals rounds to an integer (ops/s).
pub fn fixed(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return NONE.to_string();
    }
    // Format first, then group: rounding can carry into the integer part (999.96 → 1,000.0).
    let text = format!("{:.*}", decimals, x.abs());
    let (int, frac) = match text.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (text.as_str(), None),
    };
    let mut out = String::new();
    // "-0" and "-0.0" read as noise in a table; only show a sign when something nonzero remains.
    if x < 0.0 && text.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        out.push('-');
    }
    match int.parse::<u64>() {
        Ok(n) => out.push_str(&thousands(n)),
        // Beyond u64 (absurd, but possible in a corrupt file): print the digits ungrouped.
        Err(_) => out.push_str(int),
    }
    if let Some(frac) = frac {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// A byte count in binary units with one decimal: `512 B`, `1.5 KiB`, `3.0 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    // Move up while the value would print as 1024.0 or more, so 1,048,575 bytes reads
    // `1.0 MiB` rather than `1024.0 KiB`.
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A ratio with two decimals and a multiplication sign: `1.83×`.
pub fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}×")
    } else {
        NONE.to_string()
    }
}

/// `value ÷ reference` as [`ratio`] text, or [`NONE`] when either side is missing, not finite,
/// or the reference is zero (e.g. write amplification of a read-only phase).
pub fn ratio_of(value: Option<f64>, reference: Option<f64>) -> String {
    match (value, reference) {
        (Some(v), Some(r)) if v.is_finite() && r.is_finite() && r != 0.0 => ratio(v / r),
        _ => NONE.to_string(),
    }
}

/// A short axis label: `950`, `12.5k`, `800k`, `1.2M`, `3G`; plot axes have no room for
/// full digits.
pub fn compact(x: f64) -> String {
    if !x.is_finite() {
        return NONE.to_string();
    }
    let a = x.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (x / 1e9, "G")
    } else if a >= 1e6 {
        (x / 1e6, "M")
    } else if a >= 1e3 {
        (x / 1e3, "k")
    } else {
        // Below 1000 the axis steps can be fractions (amplification 0.2, 0.4, ...).
        let text = format!("{x:.2}");
        return text.trim_end_matches('0').trim_end_matches('.').to_string();
    };
    let text = format!("{scaled:.1}");
    format!("{}{suffix}", text.strip_suffix(".0").unwrap_or(&text))
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(unix_seconds: u64) -> String {
    let days = unix_seconds / 86_400;
    let rem = unix_seconds % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `civil_from_days`).
/// Done by hand because the crate has no date dependency and needs only this one conversion.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// Escapes text for a Markdown table cell: a `|` would end the cell and a newline the row.
pub fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn fixed_rounds_and_groups() {
        assert_eq!(fixed(12_345.6, 0), "12,346");
        assert_eq!(fixed(999.96, 1), "1,000.0");
        assert_eq!(fixed(0.04, 1), "0.0");
        assert_eq!(fixed(-0.04, 1), "0.0");
        assert_eq!(fixed(-1234.5, 1), "-1,234.5");
        assert_eq!(fixed(f64::NAN, 1), NONE);
        assert_eq!(fixed(f64::INFINITY, 0), NONE);
        assert_eq!(fixed(1e30, 0), "1000000000000000019884624838656");
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(1_048_575), "1.0 MiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn ratios_need_a_nonzero_reference() {
        assert_eq!(ratio(1.834), "1.83×");
        assert_eq!(ratio_of(Some(3.0), Some(2.0)), "1.50×");
        assert_eq!(ratio_of(Some(3.0), Some(0.0)), NONE);
        assert_eq!(ratio_of(None, Some(2.0)), NONE);
        assert_eq!(ratio_of(Some(f64::NAN), Some(2.0)), NONE);
    }

    #[test]
    fn compact_axis_labels() {
        assert_eq!(compact(950.0), "950");
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(1.25), "1.25");
        assert_eq!(compact(0.4), "0.4");
        assert_eq!(compact(12_500.0), "12.5k");
        assert_eq!(compact(800_000.0), "800k");
        assert_eq!(compact(1_234_567.0), "1.2M");
        assert_eq!(compact(3e9), "3G");
        assert_eq!(compact(f64::NAN), NONE);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn cells_escape_pipes_and_newlines() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}

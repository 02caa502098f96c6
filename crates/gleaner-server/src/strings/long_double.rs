//! A software model of the C `long double` that Redis computes `INCRBYFLOAT` with on x86-64
//! Linux: the x87 80-bit extended format, a 64-bit mantissa (leading bit explicit), exponents
//! down to the subnormal 2^-16445 and up to just below 2^16384.
//!
//! It has only the three operations `INCRBYFLOAT` needs, each exact or correctly rounded the way
//! glibc and the x87 unit do it:
//!
//! - [`parse`]: glibc's `strtold` in the C locale, under the conditions of Redis's `string2ld`
//!   (whole text consumed, no leading space, at most [`MAX_TEXT_LEN`] bytes, no NaN, no overflow,
//!   no nonzero text that underflows to zero), rounded to nearest, ties to even;
//! - [`add`]: one addition rounded to nearest, ties to even, as `fadd` with the x87 precision
//!   control at 64 bits (the Linux default);
//! - [`LongDouble::format_human`]: glibc's exact `%.17Lf` (the exact binary value rounded to 17
//!   decimals, ties to even) with Redis's `LD_STR_HUMAN` trimming.
//!
//! Exactness costs arbitrary-precision integers ([`Big`]), but the input length bound keeps them
//! small: at most about 34,000 bits, whatever the text.

use std::cmp::Ordering;

/// Longest text `string2ld` accepts: its buffer is `MAX_LONG_DOUBLE_CHARS` (5 KiB) with the NUL.
pub(crate) const MAX_TEXT_LEN: usize = 5 * 1024 - 1;

/// Weight of the last mantissa bit of the subnormals and of the smallest normals.
const EXP_MIN: i64 = -16445;
/// Weight of the last mantissa bit of the largest values: the largest finite value is
/// (2^64 - 1) * 2^16320.
const EXP_MAX: i64 = 16320;
/// Exponents saturate here while being read: far beyond any that matters, far below overflow.
const EXP_TEXT_CAP: i64 = 1_000_000_000;

/// A finite x87 extended value: `(-1)^negative * mantissa * 2^exponent`, in one canonical form:
/// zero has mantissa 0 and exponent 0; any other value has `exponent >= EXP_MIN` and either a
/// normalized mantissa (top bit set) or, for subnormals, `exponent == EXP_MIN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LongDouble {
    negative: bool,
    mantissa: u64,
    exponent: i64,
}

/// What [`parse`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A finite value.
    Finite(LongDouble),
    /// `inf` or `infinity` (any case, either sign): `strtold` returns an infinity without
    /// `ERANGE`, so `string2ld` accepts it, and any sum with it is NaN or infinite.
    Infinite,
}

impl LongDouble {
    /// Zero with the given sign.
    pub(crate) const fn zero(negative: bool) -> LongDouble {
        LongDouble {
            negative,
            mantissa: 0,
            exponent: 0,
        }
    }

    /// Redis's `ld2string(.., LD_STR_HUMAN)`: `%.17Lf`, then trailing zeros and a trailing dot
    /// removed, and `-0` written `0`.
    pub(crate) fn format_human(&self) -> Vec<u8> {
        let (integer, fraction) = if self.exponent >= 0 {
            let integer = Big::from_u64(self.mantissa).shl(self.exponent as u64);
            (integer.to_decimal(), 0)
        } else {
            let (integer, fraction) = self.split_fraction();
            (integer.to_string().into_bytes(), fraction)
        };
        let mut out = Vec::with_capacity(integer.len() + 19);
        if self.negative {
            out.push(b'-');
        }
        out.extend_from_slice(&integer);
        if fraction != 0 {
            let digits = format!(".{fraction:017}");
            out.extend_from_slice(digits.trim_end_matches('0').as_bytes());
        }
        if out == b"-0" {
            out.remove(0);
        }
        out
    }

    /// For a negative exponent: the integer part and the 17 decimals of `%.17Lf` as an integer
    /// below 10^17, the exact value rounded to 17 decimals, ties to even (glibc's `printf` in the
    /// default rounding mode).
    fn split_fraction(&self) -> (u128, u128) {
        const SCALE: u128 = 100_000_000_000_000_000; // 10^17
        let k = (-self.exponent) as u64;
        let mantissa = u128::from(self.mantissa);
        let (mut integer, fraction_bits) = if k >= 64 {
            (0, mantissa)
        } else {
            (mantissa >> k, mantissa & ((1 << k) - 1))
        };
        // fraction_bits < 2^64 and 10^17 < 2^57, so the product fits.
        let scaled = fraction_bits * SCALE;
        let mut digits = if k >= 122 {
            // scaled < 2^121 <= 2^(k - 1): below half a unit of the 17th decimal.
            0
        } else {
            let digits = scaled >> k;
            let rest = scaled & ((1 << k) - 1);
            let half = 1u128 << (k - 1);
            match rest.cmp(&half) {
                Ordering::Greater => digits + 1,
                Ordering::Equal => digits + (digits & 1),
                Ordering::Less => digits,
            }
        };
        if digits == SCALE {
            digits = 0;
            integer += 1;
        }
        (integer, digits)
    }
}

/// Redis's `string2ld`: the text as glibc's `strtold` reads it, or `None` where Redis answers
/// "value is not a valid float": empty, longer than [`MAX_TEXT_LEN`], a leading white space,
/// anything left unread (spaces, a NUL byte, junk), NaN, an overflow, or a nonzero number that
/// rounds to zero. Accepted: an optional sign, then decimal digits with an optional dot and
/// `e` exponent, or `0x` hexadecimal digits with an optional dot and `p` exponent, or
/// `inf`/`infinity` in any case.
pub(crate) fn parse(text: &[u8]) -> Option<Parsed> {
    if text.is_empty() || text.len() > MAX_TEXT_LEN || is_c_space(text[0]) {
        return None;
    }
    let (negative, rest) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if starts_with_ignore_case(rest, b"inf") {
        let whole = rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity");
        return whole.then_some(Parsed::Infinite);
    }
    // `nan` and `nan(chars)` are NaN, refused; anything after them is left unread, refused.
    // Neither is a digit, so the readers below refuse them.
    let value = if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        // Without a hexadecimal digit after it, `strtold` reads just the `0`, leaving the `x`.
        parse_hex(negative, &rest[2..])?
    } else {
        parse_decimal(negative, rest)?
    };
    Some(Parsed::Finite(value))
}

/// `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ignore_case(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// The significant digits of a mantissa (leading zeros dropped) and the power of the base
/// that the digits after the dot scale it by, as `(digits, -fraction_digits, rest)`; `None`
/// without any digit.
fn read_mantissa(text: &[u8], hex: bool) -> Option<(Vec<u8>, i64, &[u8])> {
    let digit = |b: u8| -> Option<u8> {
        if hex {
            (b as char).to_digit(16).map(|d| d as u8)
        } else {
            b.is_ascii_digit().then(|| b - b'0')
        }
    };
    let mut digits = Vec::new();
    let mut scale = 0i64;
    let mut seen = false;
    let mut i = 0;
    while let Some(d) = text.get(i).and_then(|&b| digit(b)) {
        seen = true;
        if d != 0 || !digits.is_empty() {
            digits.push(d);
        }
        i += 1;
    }
    if text.get(i) == Some(&b'.') {
        i += 1;
        while let Some(d) = text.get(i).and_then(|&b| digit(b)) {
            seen = true;
            if d != 0 || !digits.is_empty() {
                digits.push(d);
            }
            scale -= 1;
            i += 1;
        }
    }
    seen.then_some((digits, scale, &text[i..]))
}

/// An exponent part (`e` or `p` already matched and removed): an optional sign and at least one
/// decimal digit, saturating at [`EXP_TEXT_CAP`]; `None` when it is not exactly that.
fn read_exponent(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0i64, |acc, &d| {
        (acc * 10 + i64::from(d - b'0')).min(EXP_TEXT_CAP)
    });
    Some(if negative { -magnitude } else { magnitude })
}

/// The digits and exponent of a whole decimal number: `d.ddd[e[+-]ddd]`.
fn parse_decimal(negative: bool, text: &[u8]) -> Option<LongDouble> {
    let (mut digits, mut exp10, rest) = read_mantissa(text, false)?;
    if let Some((&marker, exponent)) = rest.split_first() {
        if marker | 0x20 != b'e' {
            return None;
        }
        exp10 += read_exponent(exponent)?;
    }
    while digits.last() == Some(&0) {
        digits.pop();
        exp10 += 1;
    }
    if digits.is_empty() {
        return Some(LongDouble::zero(negative));
    }
    let count = digits.len() as i64;
    // The value lies in [10^(count - 1 + exp10), 10^(count + exp10)). The largest finite value
    // is about 1.19e4932 and half the smallest subnormal about 1.82e-4951: beyond these bounds
    // the answer is known without computing (and the numbers below stay small).
    if count - 1 + exp10 >= 4933 || count + exp10 <= -4952 {
        return None;
    }
    let mantissa = Big::from_digits(&digits, 10);
    let (q, x, sticky) = if exp10 >= 0 {
        let mut n = mantissa;
        n.mul_pow10(exp10 as u64);
        n.top_bits()
    } else {
        let mut p = Big::from_u64(1);
        p.mul_pow10((-exp10) as u64);
        divide(&mantissa, &p)
    };
    finish(negative, q, x, sticky)
}

/// The digits and exponent of a hexadecimal number after its `0x`: `h.hhh[p[+-]ddd]`.
fn parse_hex(negative: bool, text: &[u8]) -> Option<LongDouble> {
    let (mut digits, scale, rest) = read_mantissa(text, true)?;
    let mut exp2 = scale * 4;
    if let Some((&marker, exponent)) = rest.split_first() {
        if marker | 0x20 != b'p' {
            return None;
        }
        exp2 += read_exponent(exponent)?;
    }
    while digits.last() == Some(&0) {
        digits.pop();
        exp2 += 4;
    }
    if digits.is_empty() {
        return Some(LongDouble::zero(negative));
    }
    let mantissa = Big::from_digits(&digits, 16);
    let bits = mantissa.bit_len() as i64;
    // The value lies in [2^(bits - 1 + exp2), 2^(bits + exp2)).
    if bits - 1 + exp2 >= 16384 || bits + exp2 < -16446 {
        return None;
    }
    let (q, x, sticky) = mantissa.top_bits();
    finish(negative, q, x + exp2, sticky)
}

/// Rounds a parsed nonzero number, refusing what `string2ld` refuses: an overflow, or an
/// underflow to zero.
fn finish(negative: bool, q: u128, x: i64, sticky: bool) -> Option<LongDouble> {
    match round(negative, q, x, sticky) {
        Some(value) if value.mantissa != 0 => Some(value),
        _ => None,
    }
}

/// `numerator / denominator` as `(q, x, sticky)` for [`round`]: `q` holds the quotient's
/// leading 67 or 68 bits, `2^x` its scale, `sticky` whether anything was left over.
fn divide(numerator: &Big, denominator: &Big) -> (u128, i64, bool) {
    // With k = 67 + bits(d) - bits(n), n * 2^k / d lies in [2^66, 2^68).
    let k = 67 + denominator.bit_len() as i64 - numerator.bit_len() as i64;
    let (mut rest, den) = if k >= 0 {
        (numerator.shl(k as u64), denominator.clone())
    } else {
        (numerator.clone(), denominator.shl((-k) as u64))
    };
    let mut step = den.shl(67);
    let mut q = 0u128;
    for bit in (0..68).rev() {
        if rest.cmp(&step) != Ordering::Less {
            rest.sub_assign(&step);
            q |= 1 << bit;
        }
        step.shr1();
    }
    (q, -k, !rest.is_zero())
}

/// Rounds `(-1)^negative * (q + f) * 2^x` to the format, to nearest with ties to even, where
/// `f` in [0, 1) is nonzero exactly when `sticky`; `None` on overflow. When `sticky`, `q` must
/// have at least 66 bits, so that the rounding point is at least two bits above `f`.
fn round(negative: bool, q: u128, x: i64, sticky: bool) -> Option<LongDouble> {
    if q == 0 {
        debug_assert!(!sticky);
        return Some(LongDouble::zero(negative));
    }
    let bits = 128 - i64::from(q.leading_zeros());
    debug_assert!(!sticky || bits >= 66);
    // Keep 64 bits, or fewer where the last one would weigh less than 2^EXP_MIN (subnormals).
    let shift = (bits - 64).max(EXP_MIN - x);
    let (mantissa, exponent) = if shift <= 0 {
        ((q << (-shift)) as u64, x + shift)
    } else {
        let (kept, rest_vs_half) = match u32::try_from(shift) {
            Ok(s) if s < 128 => {
                let rest = q & ((1u128 << s) - 1);
                (q >> s, rest.cmp(&(1u128 << (s - 1))))
            }
            Ok(128) => (0, q.cmp(&(1u128 << 127))),
            // q < 2^128 <= half of the last kept bit.
            _ => (0, Ordering::Less),
        };
        let rest_vs_half = match rest_vs_half {
            Ordering::Equal if sticky => Ordering::Greater,
            other => other,
        };
        let up = match rest_vs_half {
            Ordering::Greater => true,
            Ordering::Equal => kept & 1 == 1,
            Ordering::Less => false,
        };
        let kept = kept + u128::from(up);
        if kept == 1 << 64 {
            (1u64 << 63, x + shift + 1)
        } else {
            (kept as u64, x + shift)
        }
    };
    if mantissa == 0 {
        return Some(LongDouble::zero(negative));
    }
    if exponent > EXP_MAX {
        return None;
    }
    Some(LongDouble {
        negative,
        mantissa,
        exponent,
    })
}

/// `a + b` rounded to nearest, ties to even; `None` when it overflows to an infinity.
pub(crate) fn add(a: LongDouble, b: LongDouble) -> Option<LongDouble> {
    if a.mantissa == 0 && b.mantissa == 0 {
        // IEEE 754: the sum of two zeros is negative only if both are.
        return Some(LongDouble::zero(a.negative && b.negative));
    }
    if a.mantissa == 0 {
        return Some(b);
    }
    if b.mantissa == 0 {
        return Some(a);
    }
    let (big, small) = if a.exponent >= b.exponent {
        (a, b)
    } else {
        (b, a)
    };
    let signed = |negative: bool, magnitude: i128| if negative { -magnitude } else { magnitude };
    let distance = big.exponent - small.exponent;
    let (sum, x) = if distance <= 62 {
        // Exact: |big| scaled is below 2^126, the sum below 2^127.
        let big_part = i128::from(big.mantissa) << distance;
        (
            signed(big.negative, big_part) + signed(small.negative, i128::from(small.mantissa)),
            small.exponent,
        )
    } else {
        // `big` is normalized (only EXP_MIN holds unnormalized mantissas) and `small` is below
        // 2^-62 of it: scale `big` by 2^62 and fold `small`'s bits below that scale into one
        // sticky bit. The sum has at least 125 bits, so the rounding point stays 61 bits above
        // the sticky bit, and the sum being odd keeps it off every rounding boundary.
        let drop = distance - 62;
        let small_part = if drop >= 64 {
            1
        } else {
            let kept = small.mantissa >> drop;
            let lost = small.mantissa & ((1u64 << drop) - 1);
            kept | u64::from(lost != 0)
        };
        (
            signed(big.negative, i128::from(big.mantissa) << 62)
                + signed(small.negative, i128::from(small_part)),
            big.exponent - 62,
        )
    };
    // An exact zero sum is +0 when rounding to nearest.
    round(sum < 0, sum.unsigned_abs(), x, false)
}

/// A nonnegative arbitrary-precision integer: 32-bit limbs, least significant first, no
/// leading zero limb (zero is empty).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(value: u64) -> Big {
        let mut big = Big(vec![value as u32, (value >> 32) as u32]);
        big.trim();
        big
    }

    /// The number whose digits, most significant first, are `digits` in `base` (10 or 16).
    fn from_digits(digits: &[u8], base: u32) -> Big {
        // Feed as many digits at once as fit a limb: 9 decimal or 7 hexadecimal ones.
        let per_chunk = if base == 10 { 9 } else { 7 };
        let mut big = Big(Vec::with_capacity(digits.len() / 9 + 2));
        for chunk in digits.chunks(per_chunk) {
            let value = chunk.iter().fold(0u32, |acc, &d| acc * base + u32::from(d));
            big.mul_add_small(base.pow(chunk.len() as u32), value);
        }
        big
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn bit_len(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => 32 * self.0.len() as u64 - u64::from(top.leading_zeros()),
        }
    }

    /// `self = self * factor + addend`.
    fn mul_add_small(&mut self, factor: u32, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.0 {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32;
            carry = product >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    /// `self *= 10^exponent`.
    fn mul_pow10(&mut self, mut exponent: u64) {
        while exponent > 0 {
            let step = exponent.min(9);
            self.mul_add_small(10u32.pow(step as u32), 0);
            exponent -= step;
        }
    }

    fn shl(&self, bits: u64) -> Big {
        if self.is_zero() {
            return Big(Vec::new());
        }
        let limbs = (bits / 32) as usize;
        let bits = (bits % 32) as u32;
        let mut out = vec![0u32; limbs];
        out.reserve(self.0.len() + 1);
        if bits == 0 {
            out.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &limb in &self.0 {
                out.push((limb << bits) | carry);
                carry = limb >> (32 - bits);
            }
            out.push(carry);
        }
        let mut big = Big(out);
        big.trim();
        big
    }

    fn shr1(&mut self) {
        let mut carry = 0u32;
        for limb in self.0.iter_mut().rev() {
            let next = *limb & 1;
            *limb = (*limb >> 1) | (carry << 31);
            carry = next;
        }
        self.trim();
    }

    /// The leading (up to) 128 bits as `(q, x, sticky)` for [`round`]: `self` lies in
    /// `[q * 2^x, (q + 1) * 2^x)`, exactly `q * 2^x` unless `sticky`.
    fn top_bits(&self) -> (u128, i64, bool) {
        let bits = self.bit_len();
        let dropped = bits.saturating_sub(128);
        let first_limb = (dropped / 32) as usize;
        let offset = dropped % 32;
        let mut q = 0u128;
        // Gather the limbs from the one holding bit `dropped` upwards (at most 5 limbs).
        for (i, &limb) in self.0[first_limb..].iter().enumerate().take(5) {
            let value = u128::from(limb);
            let position = 32 * i as i64 - offset as i64;
            if position >= 0 {
                if position < 128 {
                    q |= value << position;
                }
            } else {
                q |= value >> (-position);
            }
        }
        let sticky = self.0[..first_limb].iter().any(|&l| l != 0)
            || (offset > 0 && self.0[first_limb] & ((1u32 << offset) - 1) != 0);
        (q, dropped as i64, sticky)
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// `self -= other`, where `other <= self`.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for (i, limb) in self.0.iter_mut().enumerate() {
            let subtrahend = i64::from(other.0.get(i).copied().unwrap_or(0)) + borrow;
            let difference = i64::from(*limb) - subtrahend;
            if difference < 0 {
                *limb = (difference + (1 << 32)) as u32;
                borrow = 1;
            } else {
                *limb = difference as u32;
                borrow = 0;
            }
        }
        debug_assert_eq!(borrow, 0);
        self.trim();
    }

    /// `self /= divisor`, returning the remainder.
    fn div_small(&mut self, divisor: u32) -> u32 {
        let mut rest = 0u64;
        for limb in self.0.iter_mut().rev() {
            let value = (rest << 32) | u64::from(*limb);
            *limb = (value / u64::from(divisor)) as u32;
            rest = value % u64::from(divisor);
        }
        self.trim();
        rest as u32
    }

    fn to_decimal(&self) -> Vec<u8> {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(1_000_000_000));
        }
        let mut out = match chunks.pop() {
            None => return b"0".to_vec(),
            Some(top) => top.to_string().into_bytes(),
        };
        for chunk in chunks.iter().rev() {
            out.extend_from_slice(format!("{chunk:09}").as_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finite(text: &str) -> LongDouble {
        match parse(text.as_bytes()) {
            Some(Parsed::Finite(v)) => v,
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }

    fn show(text: &str) -> String {
        String::from_utf8(finite(text).format_human()).unwrap()
    }

    #[test]
    fn parses_exact_small_values() {
        assert_eq!(
            finite("1"),
            LongDouble {
                negative: false,
                mantissa: 1 << 63,
                exponent: -63
            }
        );
        assert_eq!(
            finite("-2"),
            LongDouble {
                negative: true,
                mantissa: 1 << 63,
                exponent: -62
            }
        );
        assert_eq!(finite("0x1.8p1"), finite("3"));
        assert_eq!(finite("0x.8"), finite("0.5"));
        assert_eq!(finite(".5"), finite("5e-1"));
        assert_eq!(finite("5."), finite("5"));
        assert_eq!(finite("0"), LongDouble::zero(false));
        assert_eq!(finite("-0.000"), LongDouble::zero(true));
        assert_eq!(finite("0e-99999999999999999999"), LongDouble::zero(false));
        assert_eq!(finite("1e0000000000000000000000000001"), finite("10"));
    }

    #[test]
    fn parse_refusals() {
        for text in [
            "",
            " 1",
            "1 ",
            "\t1",
            "+",
            "-",
            ".",
            "e1",
            "1e",
            "1e+",
            "0x",
            "0x.",
            "0x1p",
            "0xg",
            "nan",
            "-nan",
            "NaN(123)",
            "infinit",
            "infx",
            "1\u{0}2",
            "1,5",
            "++1",
            "1e5000",
            "1e-5000",
            "0x1p16384",
            "0x1p-16446",
            "1.18973149535723176508e+4932",
        ] {
            assert_eq!(parse(text.as_bytes()), None, "{text:?}");
        }
        assert_eq!(parse(&[b'1'; MAX_TEXT_LEN + 1]), None);
        assert!(parse(&[b'1'; MAX_TEXT_LEN]).is_none()); // 10^5118 overflows
        let mut long = vec![b'0'; MAX_TEXT_LEN];
        long[MAX_TEXT_LEN - 1] = b'7';
        assert_eq!(parse(&long), Some(Parsed::Finite(finite("7"))));
        for text in ["inf", "-INF", "+Infinity", "infinity"] {
            assert_eq!(parse(text.as_bytes()), Some(Parsed::Infinite), "{text:?}");
        }
    }

    #[test]
    fn parse_edges_of_the_range() {
        // The smallest subnormal, and a number three quarters of it (rounds up to it).
        let smallest = LongDouble {
            negative: false,
            mantissa: 1,
            exponent: EXP_MIN,
        };
        assert_eq!(finite("0x1p-16445"), smallest);
        assert_eq!(finite("0x1.8p-16446"), smallest);
        // The largest finite value, as glibc prints it with %Le (rounded down to 21 digits).
        let largest = LongDouble {
            negative: false,
            mantissa: u64::MAX,
            exponent: EXP_MAX,
        };
        assert_eq!(finite("1.18973149535723176502e+4932"), largest);
        assert_eq!(finite("0x1.fffffffffffffffep16383"), largest);
        assert_eq!(finite("3.6451995318824746025e-4951"), smallest);
    }

    #[test]
    fn formats_as_glibc_does() {
        assert_eq!(show("0"), "0");
        assert_eq!(show("-0"), "0");
        assert_eq!(show("1.5"), "1.5");
        assert_eq!(show("-1.1"), "-1.1");
        // 1000.1 is 1000.0999999999999999777955... in the format.
        assert_eq!(show("1000.1"), "1000.09999999999999998");
        assert_eq!(show("1e-20"), "0");
        assert_eq!(show("-1e-20"), "0");
        // Ties at the 17th decimal go to even.
        assert_eq!(show("0x1p-18"), "0.00000381469726562");
        assert_eq!(show("0x3p-18"), "0.00001144409179688");
        assert_eq!(show("0.999999999999999999"), "1");
        assert_eq!(show("1e30"), "1000000000000000000024696061952");
        assert_eq!(show("18446744073709551615"), "18446744073709551615");
    }

    #[test]
    fn adds_with_one_rounding() {
        let sum = |a: &str, b: &str| add(finite(a), finite(b)).map(|v| v.format_human());
        assert_eq!(sum("1", "-1.1").unwrap(), b"-0.1");
        assert_eq!(sum("1000", "0.1").unwrap(), b"1000.09999999999999998");
        assert_eq!(sum("1", "-1").unwrap(), b"0");
        assert_eq!(
            add(finite("1"), finite("-1")),
            Some(LongDouble::zero(false))
        );
        assert_eq!(
            add(finite("-0"), finite("-0")),
            Some(LongDouble::zero(true))
        );
        // Far apart: the small one only rounds.
        assert_eq!(
            sum("1e30", "1e-30").unwrap(),
            b"1000000000000000000024696061952"
        );
        assert_eq!(add(finite("1"), finite("1e-30")), Some(finite("1")));
        // 2^64 - 1 is exact, 2^64 + 1 is not (ties to even: down to 2^64).
        assert_eq!(
            sum("18446744073709551614", "1").unwrap(),
            b"18446744073709551615"
        );
        assert_eq!(
            sum("18446744073709551616", "1").unwrap(),
            b"18446744073709551616"
        );
        assert_eq!(
            sum("18446744073709551616", "3").unwrap(),
            b"18446744073709551620"
        );
        // Overflow.
        assert_eq!(
            add(finite("1.18973149535723176502e+4932"), finite("1e4932")),
            None
        );
        assert!(add(finite("1.18973149535723176502e+4932"), finite("1")).is_some());
    }

    #[test]
    fn big_integers() {
        let n = Big::from_digits(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3], 10);
        assert_eq!(n.to_decimal(), b"1234567890123");
        let mut p = Big::from_u64(1);
        p.mul_pow10(40);
        assert_eq!(p.to_decimal(), format!("1{}", "0".repeat(40)).into_bytes());
        assert_eq!(Big::from_digits(&[0xf, 0xf], 16), Big::from_u64(255));
        assert_eq!(Big::from_u64(1).shl(100).bit_len(), 101);
        let (q, x, sticky) = Big::from_u64(1).shl(200).top_bits();
        assert_eq!((q, x, sticky), (1 << 127, 73, false));
        let mut odd = Big::from_u64(1).shl(200);
        odd.mul_add_small(1, 1);
        assert_eq!(odd.top_bits(), (1 << 127, 73, true));
        assert_eq!(Big::from_u64(12345).top_bits(), (12345, 0, false));
    }
}

//! The value arithmetic of Redis 7.0's string commands (`INCR*`, `APPEND`, `SETRANGE`, bits,
//! `LCS`), as pure functions: the command layer reads a value, calls one, writes what it returns.
//!
//! Every function answers what Redis 7.0 answers, errors included (their texts are
//! [`StringError::message`]); where Redis checks things in an order that involves the key's
//! lookup (a `WRONGTYPE` against an argument error), the function's documentation says which
//! part the caller runs first. Nothing here touches the database, the connection or the
//! server's state.
//!
//! | command | functions |
//! | --- | --- |
//! | `INCR DECR INCRBY DECRBY` | [`parse_i64`], [`decrby_delta`], [`incr_by`] |
//! | `INCRBYFLOAT` | [`incr_by_float`] |
//! | `APPEND` | [`append`] |
//! | `SETRANGE` | [`parse_setrange_offset`], [`setrange`] |
//! | `GETBIT SETBIT` | [`parse_bit_offset`], [`parse_bit_value`], [`getbit`], [`setbit`] |
//! | `BITCOUNT` | [`parse_bitcount_args`], [`bitcount`] |
//! | `LCS` | [`parse_lcs_options`], [`lcs`] |
//!
//! (`GETRANGE` is in the command layer, `exec/string_cmds.rs`.)
//!
//! # `INCRBYFLOAT` and `long double`
//!
//! Redis adds in C `long double`: on x86-64 Linux the x87 80-bit format (64-bit mantissa),
//! parsed by glibc's `strtold` and printed with `%.17Lf`, then trimmed. Rust has no such type,
//! and neither `f64` nor exact decimal arithmetic gives Redis's answers: `f64` turns `1 + -1.1`
//! into `-0.10000000000000009` where Redis says `-0.1`, and decimal arithmetic turns
//! `1000 + 0.1` into `1000.1` where Redis says `1000.09999999999999998` (1000.1 is not exact in
//! binary, and at that magnitude the 80-bit error shows in the 17th decimal). So the private
//! module `long_double` models that format in software: correctly rounded parsing (as glibc),
//! one correctly rounded addition (as the x87 unit with its default 64-bit precision), and
//! exact `%.17Lf` printing (as glibc, ties to even), with arbitrary-precision integers where
//! exactness needs them. Inputs are bounded by Redis's own limit (5,119 bytes, beyond which
//! Redis answers "not a valid float"), so the work per call is bounded too.
//!
//! It should therefore equal Redis 7.0 on x86-64 Linux with glibc (the usual build) for every
//! input, digit for digit, errors included. It was compared with a C program doing what Redis
//! does (`strtold` under `string2ld`'s conditions, a `long double` addition, `%.17Lf` trimmed as
//! `ld2string` does) on 300,000 pairs of random numbers, hexadecimal floats, exact rounding
//! midpoints, subnormals, overflows and malformed texts, with no difference; 1,020 of those
//! pairs are kept in `src/strings/incrbyfloat_vectors.txt` and tested. Where Redis itself
//! computes differently, this does not follow it: where `long double` is the 128-bit IEEE quad
//! (aarch64 Linux: there `1000 + 0.1` gives `1000.1`) or plain `double` (macOS on Apple
//! silicon), or with a C library whose `strtold` or `printf` rounds otherwise than glibc's
//! (correctly, ties to even).

mod long_double;

use std::fmt;

use crate::resp::parser::parse_strict_i64;

/// Longest number text `INCRBYFLOAT` reads, for the old value and the increment alike: Redis's
/// `string2ld` works in a 5 KiB buffer with its NUL, and answers "not a valid float" beyond.
pub const MAX_FLOAT_TEXT_LEN: usize = long_double::MAX_TEXT_LEN;

/// An error reply of a string command. [`message`](Self::message) is the exact text of Redis
/// 7.0 (including its `ERR` prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringError {
    /// An integer argument or value that [`parse_i64`] refuses.
    NotAnInteger,
    /// `INCR`/`INCRBY`/`DECR`/`DECRBY` whose result leaves the 64-bit range.
    IncrOverflow,
    /// `DECRBY key -9223372036854775808`: the decrement cannot be negated.
    DecrementOverflow,
    /// `INCRBYFLOAT` with an old value or increment that is not a number.
    NotAFloat,
    /// `INCRBYFLOAT` whose result is infinite or NaN (including an `inf` operand).
    NanOrInfinity,
    /// `APPEND`/`SETRANGE` whose result would exceed the maximum string length.
    TooLarge,
    /// `SETRANGE` with a negative offset.
    OffsetOutOfRange,
    /// `GETBIT`/`SETBIT` with an offset that is not an integer, is negative, or reaches past
    /// the maximum string length.
    BitOffsetOutOfRange,
    /// `SETBIT` with a bit other than `0` or `1`.
    BitValueOutOfRange,
    /// A malformed option list (`BITCOUNT`, `LCS`).
    Syntax,
    /// `LCS` where a key holds something other than a string (Redis's own text for it).
    LcsWrongType,
    /// `LCS` with both `LEN` and `IDX`.
    LcsLenAndIdx,
    /// `LCS` with a string of 2^32 - 2 bytes or more.
    LcsStringTooLong,
    /// `LCS` whose table would exceed the limit (Redis's is `proto-max-bulk-len`).
    LcsTableTooLarge,
    /// `LCS` whose table cannot be allocated.
    LcsAllocationFailed,
}

impl StringError {
    /// The error reply's text, as Redis 7.0 writes it.
    pub fn message(self) -> &'static str {
        match self {
            StringError::NotAnInteger => "ERR value is not an integer or out of range",
            StringError::IncrOverflow => "ERR increment or decrement would overflow",
            StringError::DecrementOverflow => "ERR decrement would overflow",
            StringError::NotAFloat => "ERR value is not a valid float",
            StringError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
            StringError::TooLarge => "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
            StringError::OffsetOutOfRange => "ERR offset is out of range",
            StringError::BitOffsetOutOfRange => "ERR bit offset is not an integer or out of range",
            StringError::BitValueOutOfRange => "ERR bit is not an integer or out of range",
            StringError::Syntax => "ERR syntax error",
            StringError::LcsWrongType => "ERR The specified keys must contain string values",
            StringError::LcsLenAndIdx => {
                "ERR If you want both the length and indexes, please just use IDX."
            }
            StringError::LcsStringTooLong => "ERR String too long for LCS",
            StringError::LcsTableTooLarge => {
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
            }
            StringError::LcsAllocationFailed => {
                "ERR Insufficient memory, failed allocating transient memory for LCS"
            }
        }
    }
}

impl fmt::Display for StringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for StringError {}

// ---------------------------------------------------------------------------------------------
// Integers: INCR DECR INCRBY DECRBY

/// Redis's `string2ll`, which reads every integer argument and integer value of the string
/// commands: an optional `-`, then decimal digits, the first not `0` unless the text is just
/// `0`; nothing else (no `+`, no space, no `-0`, at most 20 bytes), within the `i64` range.
///
/// This is [`crate::resp::parser::parse_strict_i64`], which already follows `string2ll`
/// exactly: its limit of 19 digits after the sign refuses what `string2ll`'s 20-byte limit or
/// its overflow check refuse (the smallest 20-digit number exceeds `i64::MAX`).
pub fn parse_i64(text: &[u8]) -> Option<i64> {
    parse_strict_i64(text)
}

/// The delta `DECRBY key decrement` adds: `-decrement`. [`StringError::DecrementOverflow`]
/// for `i64::MIN`, which Redis checks after parsing the argument and before looking up the
/// key. (`DECR` is a delta of -1, `INCR` of 1, `INCRBY` its argument as [`parse_i64`] reads it,
/// [`StringError::NotAnInteger`] otherwise, also before the lookup.)
pub fn decrby_delta(decrement: i64) -> Result<i64, StringError> {
    decrement
        .checked_neg()
        .ok_or(StringError::DecrementOverflow)
}

/// `INCR`, `DECR`, `INCRBY`, `DECRBY`: the old value (`None` for a missing key, which counts as
/// 0) plus `delta`, as the new integer (the reply) and its decimal text (the new value).
///
/// Errors: [`StringError::NotAnInteger`] when the old value is not what [`parse_i64`] reads
/// (spaces, a fraction, 21 bytes, out of range...), [`StringError::IncrOverflow`] when the sum
/// leaves the `i64` range.
pub fn incr_by(old: Option<&[u8]>, delta: i64) -> Result<(i64, Vec<u8>), StringError> {
    let old = match old {
        None => 0,
        Some(text) => parse_i64(text).ok_or(StringError::NotAnInteger)?,
    };
    let new = old.checked_add(delta).ok_or(StringError::IncrOverflow)?;
    Ok((new, new.to_string().into_bytes()))
}

// ---------------------------------------------------------------------------------------------
// INCRBYFLOAT

/// `INCRBYFLOAT key increment`: the old value (`None` for a missing key: 0) plus the increment,
/// computed as Redis does in x87 `long double` (see the module documentation), as the text
/// that Redis both stores and replies: `%.17Lf` with trailing zeros and a trailing dot removed,
/// `-0` written `0` (e.g. `10.5`, `-0.1`, `3`, `1000.09999999999999998`, `0`).
///
/// Both texts are read as glibc's `strtold` reads them (decimal or `0x` hexadecimal, an
/// exponent, `inf`), entirely, and at most [`MAX_FLOAT_TEXT_LEN`] bytes each; the result has
/// no length limit of its own (it is at most 4,952 bytes, for numbers near 1.19e4932).
///
/// Errors, the old value checked first: [`StringError::NotAFloat`] for a text that is empty,
/// too long, begins with a space, has anything after the number (spaces, a NUL byte), is NaN,
/// overflows, or underflows to zero from a nonzero number; then
/// [`StringError::NanOrInfinity`] when an operand is infinite (`inf`, `+inf`, `-Infinity`) or
/// the sum overflows.
pub fn incr_by_float(old: Option<&[u8]>, increment: &[u8]) -> Result<Vec<u8>, StringError> {
    use long_double::Parsed;
    let old = match old {
        None => Parsed::Finite(long_double::LongDouble::zero(false)),
        Some(text) => long_double::parse(text).ok_or(StringError::NotAFloat)?,
    };
    let increment = long_double::parse(increment).ok_or(StringError::NotAFloat)?;
    match (old, increment) {
        (Parsed::Finite(a), Parsed::Finite(b)) => long_double::add(a, b)
            .map(|sum| sum.format_human())
            .ok_or(StringError::NanOrInfinity),
        _ => Err(StringError::NanOrInfinity),
    }
}

// ---------------------------------------------------------------------------------------------
// APPEND, SETRANGE

/// `APPEND key value`: the old value (`None` for a missing key) followed by `tail`; the reply
/// is its length.
///
/// [`StringError::TooLarge`] when the result would exceed `max_len` bytes (Redis's
/// `proto-max-bulk-len`). Redis checks only an existing key; a missing key's result is the
/// argument itself, which the protocol already limits to that length, so checking it too only
/// matters to a caller whose `max_len` is below its protocol limit.
pub fn append(old: Option<&[u8]>, tail: &[u8], max_len: u64) -> Result<Vec<u8>, StringError> {
    let old = old.unwrap_or_default();
    check_length(old.len() as u64, tail.len() as u64, max_len)?;
    let mut value = Vec::with_capacity(old.len() + tail.len());
    value.extend_from_slice(old);
    value.extend_from_slice(tail);
    Ok(value)
}

/// Redis's `checkStringLength`: `size + append` bytes must not exceed `max_len`.
fn check_length(size: u64, append: u64, max_len: u64) -> Result<(), StringError> {
    match size.checked_add(append) {
        Some(total) if total <= max_len => Ok(()),
        _ => Err(StringError::TooLarge),
    }
}

/// The offset argument of `SETRANGE key offset value`: [`StringError::NotAnInteger`] when
/// [`parse_i64`] refuses it, [`StringError::OffsetOutOfRange`] when negative. Redis checks both
/// before looking up the key (so before a `WRONGTYPE`).
pub fn parse_setrange_offset(text: &[u8]) -> Result<u64, StringError> {
    let offset = parse_i64(text).ok_or(StringError::NotAnInteger)?;
    u64::try_from(offset).map_err(|_| StringError::OffsetOutOfRange)
}

/// What `SETRANGE` does with the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetRange {
    /// Nothing to write (the value argument is empty): reply `len`, the existing string's
    /// length, or 0 for a missing key, which stays missing.
    Unchanged {
        /// The reply.
        len: u64,
    },
    /// Write this value (even where its bytes are unchanged: Redis counts it as a change);
    /// reply its length.
    Write(Vec<u8>),
}

impl SetRange {
    /// The integer reply: the string's length after the command.
    pub fn reply(&self) -> u64 {
        match self {
            SetRange::Unchanged { len } => *len,
            SetRange::Write(value) => value.len() as u64,
        }
    }
}

/// `SETRANGE key offset value`: the old value (`None` for a missing key) overwritten with
/// `value` from `offset` (from [`parse_setrange_offset`]), zero bytes padding any gap.
///
/// An empty `value` writes nothing, whatever the offset, and is never an error. Otherwise
/// [`StringError::TooLarge`] when `offset + value.len()` exceeds `max_len` (Redis's
/// `proto-max-bulk-len`), even where the old value is longer.
pub fn setrange(
    old: Option<&[u8]>,
    offset: u64,
    value: &[u8],
    max_len: u64,
) -> Result<SetRange, StringError> {
    if value.is_empty() {
        return Ok(SetRange::Unchanged {
            len: old.map_or(0, |old| old.len() as u64),
        });
    }
    check_length(offset, value.len() as u64, max_len)?;
    // Within max_len, so within memory the caller agreed to spend.
    let offset = usize::try_from(offset).map_err(|_| StringError::TooLarge)?;
    let old = old.unwrap_or_default();
    let end = offset + value.len();
    let mut new = Vec::with_capacity(old.len().max(end));
    new.extend_from_slice(old);
    if new.len() < end {
        new.resize(end, 0);
    }
    new[offset..end].copy_from_slice(value);
    Ok(SetRange::Write(new))
}

// ---------------------------------------------------------------------------------------------
// GETBIT SETBIT

/// The offset argument of `GETBIT`/`SETBIT`: [`StringError::BitOffsetOutOfRange`] when
/// [`parse_i64`] refuses it, when it is negative, or when its byte (`offset / 8`) is not below
/// `max_len` (Redis's `proto-max-bulk-len`, 512 MiB by default: offsets up to 2^32 - 1). Redis
/// checks it before looking up the key.
pub fn parse_bit_offset(text: &[u8], max_len: u64) -> Result<u64, StringError> {
    let offset = parse_i64(text)
        .and_then(|offset| u64::try_from(offset).ok())
        .ok_or(StringError::BitOffsetOutOfRange)?;
    if offset >> 3 >= max_len {
        return Err(StringError::BitOffsetOutOfRange);
    }
    Ok(offset)
}

/// The bit argument of `SETBIT`: `0` or `1` (as [`parse_i64`] reads them), else
/// [`StringError::BitValueOutOfRange`]. Redis checks it after the offset and before looking
/// up the key.
pub fn parse_bit_value(text: &[u8]) -> Result<bool, StringError> {
    match parse_i64(text) {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        _ => Err(StringError::BitValueOutOfRange),
    }
}

/// `GETBIT key offset`: bit `offset` of `value` (bit 0 is the most significant bit of the
/// first byte), 0 past its end (and for a missing key: pass an empty value).
pub fn getbit(value: &[u8], offset: u64) -> u8 {
    let Some(&byte) = usize::try_from(offset >> 3)
        .ok()
        .and_then(|index| value.get(index))
    else {
        return 0;
    };
    (byte >> (7 - (offset & 7))) & 1
}

/// What `SETBIT` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetBit {
    /// The reply: the bit's value before.
    pub old_bit: u8,
    /// The value to write, or `None` when nothing changed (the string already had the bit and
    /// was long enough): Redis then neither writes nor signals the key.
    pub new_value: Option<Vec<u8>>,
}

/// `SETBIT key offset bit`: the old value (`None` for a missing key) with bit `offset` (from
/// [`parse_bit_offset`], which bounds the memory this takes) set to `bit`, zero bytes padding
/// it to reach that bit.
pub fn setbit(old: Option<&[u8]>, offset: u64, bit: bool) -> SetBit {
    let old_bit = getbit(old.unwrap_or_default(), offset);
    let byte = usize::try_from(offset >> 3).expect("a bounded bit offset fits in memory");
    let grows = old.is_none_or(|old| old.len() <= byte);
    if !grows && (old_bit == 1) == bit {
        return SetBit {
            old_bit,
            new_value: None,
        };
    }
    let mut value = old.unwrap_or_default().to_vec();
    if value.len() <= byte {
        value.resize(byte + 1, 0);
    }
    let mask = 1u8 << (7 - (offset & 7));
    if bit {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    SetBit {
        old_bit,
        new_value: Some(value),
    }
}

// ---------------------------------------------------------------------------------------------
// BITCOUNT

/// The unit of a `BITCOUNT` range (Redis 7.0 added `BIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitUnit {
    /// Byte indices (the default).
    Byte,
    /// Bit indices.
    Bit,
}

/// A `BITCOUNT key start end [BYTE|BIT]` range: inclusive, negative indices counting from the
/// end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitRange {
    /// The first index.
    pub start: i64,
    /// The last index.
    pub end: i64,
    /// What the indices count.
    pub unit: BitUnit,
}

/// The arguments of `BITCOUNT` after the key: none (`None`: the whole string), or `start end`
/// with an optional `BYTE` or `BIT` (any case).
///
/// Errors in Redis's order: [`StringError::Syntax`] for one argument or more than three;
/// [`StringError::NotAnInteger`] for `start`, then `end`; [`StringError::Syntax`] for another
/// unit, except that when both indices are negative with `start > end` Redis replies 0 before
/// looking at the unit, so the unit is then not checked (the range counts 0 in any unit).
///
/// Redis looks up the key before parsing any of this: for a missing key it replies 0 whatever
/// the arguments (a `WRONGTYPE` comes first too), so the caller runs this only on a string.
pub fn parse_bitcount_args<A: AsRef<[u8]>>(args: &[A]) -> Result<Option<BitRange>, StringError> {
    match args {
        [] => Ok(None),
        [start, end, unit @ ..] if unit.len() <= 1 => {
            let start = parse_i64(start.as_ref()).ok_or(StringError::NotAnInteger)?;
            let end = parse_i64(end.as_ref()).ok_or(StringError::NotAnInteger)?;
            let unit = match unit {
                [] => BitUnit::Byte,
                _ if start < 0 && end < 0 && start > end => BitUnit::Byte,
                [unit] if unit.as_ref().eq_ignore_ascii_case(b"bit") => BitUnit::Bit,
                [unit] if unit.as_ref().eq_ignore_ascii_case(b"byte") => BitUnit::Byte,
                _ => return Err(StringError::Syntax),
            };
            Ok(Some(BitRange { start, end, unit }))
        }
        _ => Err(StringError::Syntax),
    }
}

/// `BITCOUNT key [start end [BYTE|BIT]]`: the number of set bits of `value` (an empty value
/// for a missing key), within `range` if given. As in `GETRANGE`, negative indices count from
/// the end, indices are clamped to the string, and an empty range counts 0.
pub fn bitcount(value: &[u8], range: Option<BitRange>) -> i64 {
    let Some(BitRange { start, end, unit }) = range else {
        return popcount(value);
    };
    if start < 0 && end < 0 && start > end {
        return 0;
    }
    let total = match unit {
        BitUnit::Byte => value.len() as i64,
        BitUnit::Bit => value.len() as i64 * 8,
    };
    let start = if start < 0 {
        (total + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { (total + end).max(0) } else { end }.min(total - 1);
    if start > end {
        return 0;
    }
    match unit {
        BitUnit::Byte => popcount(&value[start as usize..=end as usize]),
        BitUnit::Bit => {
            let (first, last) = ((start >> 3) as usize, (end >> 3) as usize);
            // Bit 0 is the most significant: the range's bits of the first and last bytes.
            let head = 0xffu8 >> (start & 7);
            let tail = 0xffu8 << (7 - (end & 7));
            // Count whole bytes, then take off the edge bits outside the range (the masks are
            // disjoint when first == last).
            popcount(&value[first..=last])
                - i64::from((value[first] & !head).count_ones())
                - i64::from((value[last] & !tail).count_ones())
        }
    }
}

/// The number of set bits of `bytes`.
fn popcount(bytes: &[u8]) -> i64 {
    let mut words = bytes.chunks_exact(8);
    let mut count: u64 = words
        .by_ref()
        .map(|w| u64::from(u64::from_le_bytes(w.try_into().expect("8 bytes")).count_ones()))
        .sum();
    count += words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    count as i64
}

// ---------------------------------------------------------------------------------------------
// LCS

/// The options of `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LcsOptions {
    /// `LEN`: reply only the length.
    pub len: bool,
    /// `IDX`: reply the matching ranges and the length.
    pub idx: bool,
    /// `MINMATCHLEN len`: with `IDX`, list only ranges at least this long (a negative argument
    /// counts as 0; 0 lists all). The last one given counts.
    pub min_match_len: u64,
    /// `WITHMATCHLEN`: with `IDX`, give each range's length.
    pub with_match_len: bool,
}

/// The options of `LCS` after the two keys, in any order and case, each as often as wished.
///
/// Errors: [`StringError::Syntax`] for an unknown word or a `MINMATCHLEN` without a value;
/// [`StringError::NotAnInteger`] for a `MINMATCHLEN` value that [`parse_i64`] refuses;
/// [`StringError::LcsLenAndIdx`] for both `LEN` and `IDX`, once all are read. Redis looks up
/// both keys first: a key holding a non-string gives [`StringError::LcsWrongType`] (not
/// `WRONGTYPE`) before any of these.
pub fn parse_lcs_options<A: AsRef<[u8]>>(args: &[A]) -> Result<LcsOptions, StringError> {
    let mut options = LcsOptions::default();
    let mut i = 0;
    while i < args.len() {
        let word = args[i].as_ref();
        if word.eq_ignore_ascii_case(b"IDX") {
            options.idx = true;
        } else if word.eq_ignore_ascii_case(b"LEN") {
            options.len = true;
        } else if word.eq_ignore_ascii_case(b"WITHMATCHLEN") {
            options.with_match_len = true;
        } else if word.eq_ignore_ascii_case(b"MINMATCHLEN") && i + 1 < args.len() {
            let min = parse_i64(args[i + 1].as_ref()).ok_or(StringError::NotAnInteger)?;
            options.min_match_len = u64::try_from(min).unwrap_or(0);
            i += 1;
        } else {
            return Err(StringError::Syntax);
        }
        i += 1;
    }
    if options.len && options.idx {
        return Err(StringError::LcsLenAndIdx);
    }
    Ok(options)
}

/// One matching range of `LCS ... IDX`: the same bytes at `a.0..=a.1` of the first string and
/// `b.0..=b.1` of the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcsMatch {
    /// Inclusive range in the first string.
    pub a: (u64, u64),
    /// Inclusive range in the second string.
    pub b: (u64, u64),
    /// Its length, given with `WITHMATCHLEN` (then a third element of the match's array).
    pub len: Option<u64>,
}

/// The reply of `LCS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LcsReply {
    /// No option: the longest common subsequence, a bulk string.
    String(Vec<u8>),
    /// `LEN`: its length, an integer.
    Len(u64),
    /// `IDX`: a map of two entries, `matches` (an array of matches, each an array
    /// `[[a_start, a_end], [b_start, b_end]]` plus the length with `WITHMATCHLEN`) then `len`.
    Idx {
        /// The matches, in Redis's order: from the ends of the strings backwards, so the last
        /// match of the strings comes first.
        matches: Vec<LcsMatch>,
        /// The length of the longest common subsequence.
        len: u64,
    },
}

/// Redis refuses strings of this length or more (its table uses 32-bit indices).
const LCS_MAX_STRING_LEN: u64 = u32::MAX as u64 - 1;

/// `LCS key1 key2 ...`: the longest common subsequence of `a` and `b` (an empty string for a
/// missing key), by the dynamic-programming table Redis builds, read back the way Redis reads
/// it, so that among several longest subsequences the same one (and the same ranges) comes
/// out.
///
/// The table has `(a.len() + 1) * (b.len() + 1)` cells of 4 bytes, and Redis refuses to build
/// one larger than `proto-max-bulk-len` bytes: `max_table_bytes` is that limit (a 2,000-byte
/// string against another needs about 16 MB). Errors: [`StringError::LcsStringTooLong`],
/// [`StringError::LcsTableTooLarge`], [`StringError::LcsAllocationFailed`] (the memory is not
/// available).
pub fn lcs(
    a: &[u8],
    b: &[u8],
    options: &LcsOptions,
    max_table_bytes: u64,
) -> Result<LcsReply, StringError> {
    if a.len() as u64 >= LCS_MAX_STRING_LEN || b.len() as u64 >= LCS_MAX_STRING_LEN {
        return Err(StringError::LcsStringTooLong);
    }
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
    let bytes = cells * 4;
    // Redis reports a size that overflows its allocator's type as a failed allocation.
    if bytes >= u128::from(u64::MAX) {
        return Err(StringError::LcsAllocationFailed);
    }
    if bytes > u128::from(max_table_bytes) {
        return Err(StringError::LcsTableTooLarge);
    }
    let cells = usize::try_from(cells).map_err(|_| StringError::LcsAllocationFailed)?;
    if options.len && !options.idx {
        // Only the length: two rows of the table give it (the limit above still applies, as
        // in Redis).
        return Ok(LcsReply::Len(lcs_len(a, b)));
    }
    let mut table: Vec<u32> = Vec::new();
    table
        .try_reserve_exact(cells)
        .map_err(|_| StringError::LcsAllocationFailed)?;
    let width = b.len() + 1;
    table.resize(width, 0);
    for i in 1..=a.len() {
        table.push(0);
        for j in 1..=b.len() {
            let cell = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
            table.push(cell);
        }
    }
    let at = |i: usize, j: usize| table[i * width + j];
    let total = at(a.len(), b.len());

    // Walk back from the end, as Redis does: a match goes diagonally, otherwise towards the
    // larger neighbour, the left one (j - 1) on a tie. Contiguous diagonal steps form a range,
    // listed when it ends.
    let mut result = vec![0u8; if options.idx { 0 } else { total as usize }];
    let mut matches = Vec::new();
    // The current range: (a_start, a_end, b_start, b_end).
    let mut range: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j, mut k) = (a.len(), b.len(), total as usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            if !options.idx {
                result[k - 1] = a[i - 1];
            }
            match &mut range {
                None => range = Some((i - 1, i - 1, j - 1, j - 1)),
                Some(r) if r.0 == i && r.2 == j => {
                    r.0 -= 1;
                    r.2 -= 1;
                }
                // Not reached (a range ends on the first non-diagonal step), kept as in Redis:
                // the range ends and this match starts none.
                Some(_) => emit = true,
            }
            if range.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                emit = true;
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if emit && let Some((a_start, a_end, b_start, b_end)) = range.take() {
            let len = (a_end - a_start + 1) as u64;
            if len >= options.min_match_len {
                matches.push(LcsMatch {
                    a: (a_start as u64, a_end as u64),
                    b: (b_start as u64, b_end as u64),
                    len: options.with_match_len.then_some(len),
                });
            }
        }
    }
    Ok(if options.idx {
        LcsReply::Idx {
            matches,
            len: u64::from(total),
        }
    } else {
        LcsReply::String(result)
    })
}

/// The length of the longest common subsequence, in two rows.
fn lcs_len(a: &[u8], b: &[u8]) -> u64 {
    let mut previous = vec![0u32; b.len() + 1];
    let mut current = vec![0u32; b.len() + 1];
    for &x in a {
        for (j, &y) in b.iter().enumerate() {
            current[j + 1] = if x == y {
                previous[j] + 1
            } else {
                previous[j + 1].max(current[j])
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    u64::from(previous[b.len()])
}

#[cfg(test)]
mod tests;

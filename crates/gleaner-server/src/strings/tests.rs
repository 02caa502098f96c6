//! Tests of [`super`]: the cases of Redis 7.0's `tests/unit/type/incr.tcl`,
//! `tests/unit/type/string.tcl` and the `BITCOUNT` parts of `tests/unit/bitops.tcl` that these
//! functions serve, the error texts, the boundaries, and property checks against simple
//! reference implementations.

use proptest::prelude::*;

use super::*;

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("ASCII")
}

// ---------------------------------------------------------------------------------------------
// Integers

/// `string2ll` restated with the standard library: the rules, then `str::parse`.
fn string2ll_reference(bytes: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(bytes).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    let valid = !digits.is_empty()
        && s.len() <= 20
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (!digits.starts_with('0') || s == "0");
    if valid { s.parse().ok() } else { None }
}

#[test]
fn parse_i64_follows_string2ll() {
    for (input, expected) in [
        ("0", Some(0)),
        ("1", Some(1)),
        ("-1", Some(-1)),
        ("9223372036854775807", Some(i64::MAX)),
        ("-9223372036854775808", Some(i64::MIN)),
        ("9223372036854775808", None),
        ("-9223372036854775809", None),
        ("18446744073709551616", None),
        ("-0", None),
        ("00", None),
        ("01", None),
        ("-01", None),
        ("+1", None),
        (" 1", None),
        ("1 ", None),
        ("", None),
        ("-", None),
        ("1.0", None),
        ("1e3", None),
        ("0x10", None),
        ("1\u{0}", None),
        ("123456789012345678901", None),
    ] {
        assert_eq!(parse_i64(input.as_bytes()), expected, "{input:?}");
        assert_eq!(string2ll_reference(input.as_bytes()), expected, "{input:?}");
    }
}

#[test]
fn incr_cases_of_incr_tcl() {
    // INCR against non existing key, then against the key it created.
    let (one, stored) = incr_by(None, 1).unwrap();
    assert_eq!((one, text(&stored)), (1, "1"));
    assert_eq!(incr_by(Some(&stored), 1).unwrap(), (2, b"2".to_vec()));
    // INCR against key originally set with SET.
    assert_eq!(incr_by(Some(b"100"), 1).unwrap().0, 101);
    // Over 32 bits, with and without an over-32-bit increment.
    assert_eq!(incr_by(Some(b"17179869184"), 1).unwrap().0, 17179869185);
    assert_eq!(
        incr_by(Some(b"17179869184"), 17179869184).unwrap().0,
        34359738368
    );
    // DECRBY over 32bit value with over 32bit increment, negative result.
    let delta = decrby_delta(17179869185).unwrap();
    assert_eq!(
        incr_by(Some(b"17179869184"), delta).unwrap(),
        (-1, b"-1".to_vec())
    );
    // INCR fails against key with spaces (left, right, both).
    for old in ["    11", "11    ", "    11    "] {
        assert_eq!(
            incr_by(Some(old.as_bytes()), 1),
            Err(StringError::NotAnInteger)
        );
    }
    // DECRBY negation overflow.
    assert_eq!(decrby_delta(i64::MIN), Err(StringError::DecrementOverflow));
    assert_eq!(
        StringError::DecrementOverflow.message(),
        "ERR decrement would overflow"
    );
}

#[test]
fn incr_errors_and_boundaries() {
    let max = i64::MAX.to_string();
    let min = i64::MIN.to_string();
    assert_eq!(
        incr_by(Some(max.as_bytes()), 1),
        Err(StringError::IncrOverflow)
    );
    assert_eq!(
        incr_by(Some(min.as_bytes()), -1),
        Err(StringError::IncrOverflow)
    );
    assert_eq!(incr_by(Some(max.as_bytes()), -1).unwrap().0, i64::MAX - 1);
    assert_eq!(incr_by(Some(min.as_bytes()), i64::MAX).unwrap().0, -1);
    assert_eq!(incr_by(None, i64::MIN).unwrap().1, min.as_bytes());
    assert_eq!(incr_by(Some(b"-5"), 5).unwrap(), (0, b"0".to_vec()));
    assert_eq!(decrby_delta(i64::MAX), Ok(-i64::MAX));
    assert_eq!(decrby_delta(-3), Ok(3));
    for old in [
        "",
        "abc",
        "1.5",
        "+1",
        "01",
        "-0",
        "9223372036854775808",
        "1\u{0}",
    ] {
        assert_eq!(
            incr_by(Some(old.as_bytes()), 1),
            Err(StringError::NotAnInteger),
            "{old:?}"
        );
    }
    assert_eq!(
        StringError::NotAnInteger.message(),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        StringError::IncrOverflow.message(),
        "ERR increment or decrement would overflow"
    );
}

proptest! {
    #[test]
    fn parse_i64_matches_the_reference(s in "[-+0-9 a.]{0,22}") {
        prop_assert_eq!(parse_i64(s.as_bytes()), string2ll_reference(s.as_bytes()));
    }

    #[test]
    fn parse_i64_reads_every_i64(n in any::<i64>()) {
        prop_assert_eq!(parse_i64(n.to_string().as_bytes()), Some(n));
    }

    #[test]
    fn incr_by_is_checked_addition(old in any::<i64>(), delta in any::<i64>()) {
        let expected = old
            .checked_add(delta)
            .map(|n| (n, n.to_string().into_bytes()))
            .ok_or(StringError::IncrOverflow);
        prop_assert_eq!(incr_by(Some(old.to_string().as_bytes()), delta), expected);
    }
}

// ---------------------------------------------------------------------------------------------
// INCRBYFLOAT

fn incr_float(old: Option<&str>, increment: &str) -> Result<String, StringError> {
    incr_by_float(old.map(str::as_bytes), increment.as_bytes())
        .map(|v| String::from_utf8(v).expect("ASCII"))
}

#[test]
fn incrbyfloat_cases_of_incr_tcl() {
    // Against a non existing key.
    let first = incr_float(None, "1").unwrap();
    assert_eq!(first, "1");
    assert_eq!(incr_float(Some(&first), "0.25").unwrap(), "1.25");
    // Against a key originally set with SET.
    assert_eq!(incr_float(Some("1.5"), "1.5").unwrap(), "3");
    // Over 32 bits, with and without an over-32-bit increment.
    assert_eq!(
        incr_float(Some("17179869184"), "1.5").unwrap(),
        "17179869185.5"
    );
    assert_eq!(
        incr_float(Some("17179869184"), "17179869184").unwrap(),
        "34359738368"
    );
    // Fails against key with spaces (left, right, both).
    for old in ["    11", "11    ", " 11 "] {
        assert_eq!(incr_float(Some(old), "1.0"), Err(StringError::NotAFloat));
    }
    // Does not allow NaN or Infinity.
    assert_eq!(
        incr_float(Some("0"), "+inf"),
        Err(StringError::NanOrInfinity)
    );
    // Decrement.
    assert_eq!(incr_float(Some("1"), "-1.1").unwrap(), "-0.1");
    // String to double with null terminator (SET foo 1; SETRANGE foo 2 2).
    assert_eq!(
        incr_by_float(Some(b"1\x002"), b"1"),
        Err(StringError::NotAFloat)
    );
    // No negative zero: Tcl's 1/41 and -1/41.
    let third = incr_float(None, "0.024390243902439025").unwrap();
    assert_eq!(third, "0.02439024390243902");
    assert_eq!(
        incr_float(Some(&third), "-0.024390243902439025").unwrap(),
        "0"
    );
}

#[test]
fn incrbyfloat_ordinary_values() {
    // The examples of the INCRBYFLOAT documentation.
    assert_eq!(incr_float(Some("10.50"), "0.1").unwrap(), "10.6");
    assert_eq!(incr_float(Some("10.6"), "-5").unwrap(), "5.6");
    assert_eq!(incr_float(Some("5.0e3"), "2.0e2").unwrap(), "5200");
    assert_eq!(incr_float(Some("10.5"), "0").unwrap(), "10.5");
    assert_eq!(incr_float(Some("0.1"), "0.2").unwrap(), "0.3");
    assert_eq!(incr_float(Some("-0"), "0").unwrap(), "0");
    assert_eq!(incr_float(Some("0x10"), "1").unwrap(), "17");
    assert_eq!(incr_float(Some("1e-20"), "0").unwrap(), "0");
    assert_eq!(incr_float(Some("-1e-20"), "0").unwrap(), "0");
    assert_eq!(
        incr_float(Some("9223372036854775807"), "1").unwrap(),
        "9223372036854775808"
    );
    // Where 80 bits show in the 17th decimal, as Redis shows them.
    assert_eq!(
        incr_float(Some("1000"), "0.1").unwrap(),
        "1000.09999999999999998"
    );
    assert_eq!(
        incr_float(None, "3.14159265358979323846").unwrap(),
        "3.14159265358979324"
    );
    // Texts strtold reads.
    for (increment, expected) in [
        ("1e2", "100"),
        ("1E+2", "100"),
        (".5", "0.5"),
        ("5.", "5"),
        ("+.5e1", "5"),
        ("0X1P-1", "0.5"),
        ("0x.8", "0.5"),
        ("-0x1.8p1", "-3"),
        ("00012", "12"),
        ("1e0000000000000000000000000000000000003", "1000"),
    ] {
        assert_eq!(
            incr_float(None, increment).unwrap(),
            expected,
            "{increment:?}"
        );
    }
}

#[test]
fn incrbyfloat_errors() {
    assert_eq!(
        StringError::NotAFloat.message(),
        "ERR value is not a valid float"
    );
    assert_eq!(
        StringError::NanOrInfinity.message(),
        "ERR increment would produce NaN or Infinity"
    );
    for bad in [
        "",
        " ",
        " 1",
        "1 ",
        "\t1",
        "\n1",
        "abc",
        "nan",
        "NaN",
        "-nan",
        "nan(1)",
        "1e",
        "1e+",
        "0x",
        "0x1p",
        "e5",
        ".",
        "-",
        "+",
        "1,5",
        "1..2",
        "inf ",
        "infin",
        "1\u{0}",
        "1e5000",
        "-1e5000",
        "1e-5000",
        "0x1p-16446",
    ] {
        assert_eq!(
            incr_float(Some(bad), "1"),
            Err(StringError::NotAFloat),
            "old {bad:?}"
        );
        assert_eq!(
            incr_float(Some("1"), bad),
            Err(StringError::NotAFloat),
            "incr {bad:?}"
        );
    }
    // Infinities parse, and then fail the sum.
    for inf in ["inf", "+inf", "-inf", "Infinity", "-INFINITY"] {
        assert_eq!(incr_float(Some(inf), "1"), Err(StringError::NanOrInfinity));
        assert_eq!(incr_float(Some("1"), inf), Err(StringError::NanOrInfinity));
    }
    assert_eq!(
        incr_float(Some("inf"), "-inf"),
        Err(StringError::NanOrInfinity)
    );
    // The old value is read first, then the increment, then the sum checked.
    assert_eq!(incr_float(Some("inf"), "abc"), Err(StringError::NotAFloat));
    // Overflow of the sum (the largest value plus a large one).
    assert_eq!(
        incr_float(Some("1.18973149535723176502e+4932"), "1e4932"),
        Err(StringError::NanOrInfinity)
    );
    // The 5,119-byte limit.
    let longest = format!("{}1", "0".repeat(MAX_FLOAT_TEXT_LEN - 1));
    assert_eq!(incr_float(Some(&longest), "1").unwrap(), "2");
    assert_eq!(incr_float(Some("1"), &longest).unwrap(), "2");
    let too_long = format!("0{longest}");
    assert_eq!(
        incr_float(Some(&too_long), "1"),
        Err(StringError::NotAFloat)
    );
    assert_eq!(
        incr_float(Some("1"), &too_long),
        Err(StringError::NotAFloat)
    );
    let hostile = vec![b'9'; 512 << 10];
    assert_eq!(incr_by_float(None, &hostile), Err(StringError::NotAFloat));
}

#[test]
fn incrbyfloat_large_inputs_stay_cheap() {
    // The most work a call can take: texts at the length limit, at the edges of the range.
    let digits = "7".repeat(MAX_FLOAT_TEXT_LEN - 10);
    for (old, increment) in [
        (format!("0.{digits}e-4900"), "0".to_string()),
        (format!("{digits}e-9000"), format!("-0.{digits}")),
        (format!("0.{digits}e4930"), "1".to_string()),
        (format!("0x{digits}p-16000"), "0".to_string()),
        ("1.18973149535723176502e+4932".to_string(), "-1".to_string()),
    ] {
        let old = &old[..old.len().min(MAX_FLOAT_TEXT_LEN)];
        let started = std::time::Instant::now();
        let _ = incr_float(Some(old), &increment);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
    // The longest result: the largest value, 4,933 digits.
    let largest = incr_float(Some("1.18973149535723176502e+4932"), "0").unwrap();
    assert_eq!(largest.len(), 4933);
    assert!(largest.starts_with("118973149535723176502126385303"));
    let negative = incr_float(Some("-1.18973149535723176502e+4932"), "0").unwrap();
    assert_eq!(negative.len(), 4934);
}

#[test]
fn incrbyfloat_matches_the_glibc_vectors() {
    let mut checked = 0;
    for line in include_str!("incrbyfloat_vectors.txt").lines() {
        if line.starts_with('#') {
            continue;
        }
        let mut fields = line.split('\t');
        let (old, increment, expected) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        let old = (old != "(nil)").then_some(old);
        let got = match incr_float(old, increment) {
            Ok(value) => value,
            Err(error) => error.message().to_string(),
        };
        assert_eq!(got, expected, "{old:?} + {increment:?}");
        checked += 1;
    }
    assert!(checked > 1000);
}

/// `n / 10^10` as `%.17Lf` trimmed writes it.
fn decimal_text(n: i64) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let (integer, fraction) = (
        n.unsigned_abs() / 10_000_000_000,
        n.unsigned_abs() % 10_000_000_000,
    );
    let fraction = format!("{fraction:010}");
    let fraction = fraction.trim_end_matches('0');
    match (integer, fraction) {
        (0, "") => "0".to_string(),
        (_, "") => format!("{sign}{integer}"),
        _ => format!("{sign}{integer}.{fraction}"),
    }
}

proptest! {
    #[test]
    fn incrbyfloat_sums_integers_exactly(a in -(1i64 << 62)..(1i64 << 62), b in -(1i64 << 62)..(1i64 << 62)) {
        let sum = incr_float(Some(&a.to_string()), &b.to_string()).unwrap();
        prop_assert_eq!(sum, (i128::from(a) + i128::from(b)).to_string());
    }

    // Below 8 in magnitude, parsing and adding err by less than 2e-18: a sum of numbers with
    // 10 decimals comes out as the decimal sum.
    #[test]
    fn incrbyfloat_small_decimals_come_out_exact(
        a in -79_999_999_999i64..80_000_000_000,
        b in -79_999_999_999i64..80_000_000_000,
    ) {
        let sum = incr_float(Some(&decimal_text(a)), &decimal_text(b)).unwrap();
        prop_assert_eq!(sum, decimal_text(a + b));
    }

    #[test]
    fn incrbyfloat_never_panics(old in "[-+0-9.eExXpP a-f]{0,40}", increment in "[-+0-9.eExXpP a-f]{0,40}") {
        let _ = incr_float(Some(&old), &increment);
    }
}

// ---------------------------------------------------------------------------------------------
// APPEND, SETRANGE

const MAX: u64 = 512 << 20;

#[test]
fn append_cases() {
    assert_eq!(append(None, b"Hello", MAX).unwrap(), b"Hello");
    assert_eq!(
        append(Some(b"Hello"), b" World", MAX).unwrap(),
        b"Hello World"
    );
    assert_eq!(append(Some(b""), b"", MAX).unwrap(), b"");
    assert_eq!(append(Some(b"1234"), b"", MAX).unwrap(), b"1234");
    assert_eq!(append(Some(b"abc"), b"de", 5).unwrap(), b"abcde");
    assert_eq!(append(Some(b"abc"), b"def", 5), Err(StringError::TooLarge));
    assert_eq!(append(None, b"abcdef", 5), Err(StringError::TooLarge));
    assert_eq!(
        StringError::TooLarge.message(),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
}

fn range(old: Option<&[u8]>, offset: u64, value: &[u8]) -> (u64, Option<Vec<u8>>) {
    let outcome = setrange(old, offset, value, MAX).unwrap();
    let reply = outcome.reply();
    match outcome {
        SetRange::Unchanged { .. } => (reply, None),
        SetRange::Write(new) => (reply, Some(new)),
    }
}

#[test]
fn setrange_cases_of_string_tcl() {
    // Against a non-existing key.
    assert_eq!(range(None, 0, b"foo"), (3, Some(b"foo".to_vec())));
    assert_eq!(range(None, 0, b""), (0, None));
    assert_eq!(range(None, 1, b"foo"), (4, Some(b"\0foo".to_vec())));
    // Against a string.
    assert_eq!(range(Some(b"foo"), 0, b"b"), (3, Some(b"boo".to_vec())));
    assert_eq!(range(Some(b"foo"), 0, b""), (3, None));
    assert_eq!(range(Some(b"foo"), 1, b"b"), (3, Some(b"fbo".to_vec())));
    assert_eq!(
        range(Some(b"foo"), 4, b"bar"),
        (7, Some(b"foo\0bar".to_vec()))
    );
    // Against an integer.
    assert_eq!(range(Some(b"1234"), 0, b"2"), (4, Some(b"2234".to_vec())));
    assert_eq!(range(Some(b"1234"), 0, b""), (4, None));
    assert_eq!(range(Some(b"1234"), 1, b"3"), (4, Some(b"1334".to_vec())));
    assert_eq!(
        range(Some(b"1234"), 5, b"2"),
        (6, Some(b"1234\x002".to_vec()))
    );
    // With out of range offset.
    assert_eq!(
        setrange(None, MAX - 4, b"world", MAX),
        Err(StringError::TooLarge)
    );
    assert_eq!(
        parse_setrange_offset(b"-1"),
        Err(StringError::OffsetOutOfRange)
    );
    assert_eq!(
        setrange(Some(b"hello"), MAX - 4, b"world", MAX),
        Err(StringError::TooLarge)
    );
    // With huge offsets.
    for offset in ["9223372036854775807", "2147483647"] {
        let offset = parse_setrange_offset(offset.as_bytes()).unwrap();
        assert_eq!(
            setrange(None, offset, b"A", MAX),
            Err(StringError::TooLarge)
        );
    }
    assert_eq!(
        setrange(Some(b"x"), u64::MAX, b"A", u64::MAX),
        Err(StringError::TooLarge)
    );
}

#[test]
fn setrange_boundaries() {
    assert_eq!(
        StringError::OffsetOutOfRange.message(),
        "ERR offset is out of range"
    );
    assert_eq!(parse_setrange_offset(b"0"), Ok(0));
    assert_eq!(parse_setrange_offset(b"x"), Err(StringError::NotAnInteger));
    assert_eq!(parse_setrange_offset(b"-0"), Err(StringError::NotAnInteger));
    assert_eq!(
        parse_setrange_offset(b"-9223372036854775808"),
        Err(StringError::OffsetOutOfRange)
    );
    // Exactly max_len is allowed, one more is not; an empty value never fails.
    assert_eq!(range(None, 0, b"").0, 0);
    let at_limit = setrange(None, 6, b"ab", 8).unwrap();
    assert_eq!(at_limit, SetRange::Write(b"\0\0\0\0\0\0ab".to_vec()));
    assert_eq!(setrange(None, 7, b"ab", 8), Err(StringError::TooLarge));
    assert_eq!(
        setrange(Some(b"abc"), u64::MAX, b"", 8).unwrap(),
        SetRange::Unchanged { len: 3 }
    );
    assert_eq!(setrange(None, u64::MAX, b"", 8).unwrap().reply(), 0);
    // A write inside a longer string counts as the longer string's length.
    assert_eq!(
        range(Some(b"abcdef"), 1, b"X"),
        (6, Some(b"aXcdef".to_vec()))
    );
}

proptest! {
    #[test]
    fn setrange_matches_a_naive_model(
        old in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        offset in 0u64..60,
        value in proptest::collection::vec(any::<u8>(), 0..20),
        max_len in 0u64..80,
    ) {
        let got = setrange(old.as_deref(), offset, &value, max_len);
        if value.is_empty() {
            prop_assert_eq!(got, Ok(SetRange::Unchanged { len: old.map_or(0, |o| o.len() as u64) }));
        } else if offset + value.len() as u64 > max_len {
            prop_assert_eq!(got, Err(StringError::TooLarge));
        } else {
            let mut model = old.unwrap_or_default();
            for (i, &b) in value.iter().enumerate() {
                let at = offset as usize + i;
                while model.len() <= at {
                    model.push(0);
                }
                model[at] = b;
            }
            prop_assert_eq!(got, Ok(SetRange::Write(model)));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GETBIT SETBIT

#[test]
fn setbit_cases_of_string_tcl() {
    // Against a non-existing key.
    let set = setbit(None, 1, true);
    assert_eq!(set.old_bit, 0);
    assert_eq!(set.new_value.unwrap(), [0b0100_0000]);
    // Against a string ("@" is 0b01000000).
    let set = setbit(Some(b"@"), 2, true);
    assert_eq!(set.old_bit, 0);
    let value = set.new_value.unwrap();
    assert_eq!(value, [0b0110_0000]);
    let set = setbit(Some(&value), 1, false);
    assert_eq!(set.old_bit, 1);
    assert_eq!(set.new_value.unwrap(), [0b0010_0000]);
    // Against an integer ("1" is 0b00110001).
    let set = setbit(Some(b"1"), 6, true);
    assert_eq!(set.old_bit, 0);
    let value = set.new_value.unwrap();
    assert_eq!(value, [0b0011_0011]);
    let set = setbit(Some(&value), 2, false);
    assert_eq!(set.old_bit, 1);
    assert_eq!(set.new_value.unwrap(), [0b0001_0011]);
    // With out of range bit offset.
    let four_gib = (4u64 << 30).to_string();
    assert_eq!(
        parse_bit_offset(four_gib.as_bytes(), MAX),
        Err(StringError::BitOffsetOutOfRange)
    );
    assert_eq!(
        parse_bit_offset(b"-1", MAX),
        Err(StringError::BitOffsetOutOfRange)
    );
    // With non-bit argument.
    for bit in ["-1", "2", "10", "20"] {
        assert_eq!(
            parse_bit_value(bit.as_bytes()),
            Err(StringError::BitValueOutOfRange)
        );
    }
}

#[test]
fn getbit_cases_of_string_tcl() {
    // Against a non-existing key.
    assert_eq!(getbit(b"", 0), 0);
    // Against a string ("`" has the 2nd and 3rd bits set).
    let bits: Vec<u8> = [0, 1, 2, 3, 8, 100, 10000]
        .iter()
        .map(|&o| getbit(b"`", o))
        .collect();
    assert_eq!(bits, [0, 1, 1, 0, 0, 0, 0]);
    // Against an integer ("1" is 0b00110001).
    let bits: Vec<u8> = [0, 1, 2, 3, 8, 100, 10000]
        .iter()
        .map(|&o| getbit(b"1", o))
        .collect();
    assert_eq!(bits, [0, 0, 1, 1, 0, 0, 0]);
    assert_eq!(getbit(b"\xff", u64::MAX), 0);
}

#[test]
fn bit_arguments_and_boundaries() {
    assert_eq!(
        StringError::BitOffsetOutOfRange.message(),
        "ERR bit offset is not an integer or out of range"
    );
    assert_eq!(
        StringError::BitValueOutOfRange.message(),
        "ERR bit is not an integer or out of range"
    );
    // 512 MiB: the last bit of the 512 MiB-th byte is 2^32 - 1.
    assert_eq!(parse_bit_offset(b"4294967295", MAX), Ok(4294967295));
    assert_eq!(
        parse_bit_offset(b"4294967296", MAX),
        Err(StringError::BitOffsetOutOfRange)
    );
    assert_eq!(parse_bit_offset(b"8191", 1024), Ok(8191));
    assert_eq!(
        parse_bit_offset(b"8192", 1024),
        Err(StringError::BitOffsetOutOfRange)
    );
    assert_eq!(parse_bit_offset(b"0", 1), Ok(0));
    assert_eq!(
        parse_bit_offset(b"0", 0),
        Err(StringError::BitOffsetOutOfRange)
    );
    for bad in [
        "",
        "x",
        "1.0",
        "+1",
        "#1",
        "01",
        "-0",
        "9223372036854775808",
    ] {
        assert_eq!(
            parse_bit_offset(bad.as_bytes(), MAX),
            Err(StringError::BitOffsetOutOfRange),
            "{bad:?}"
        );
    }
    assert_eq!(
        parse_bit_offset(b"9223372036854775807", u64::MAX),
        Ok(i64::MAX as u64)
    );
    assert_eq!(parse_bit_value(b"0"), Ok(false));
    assert_eq!(parse_bit_value(b"1"), Ok(true));
    for bad in ["", "01", "+1", " 1", "true", "-0"] {
        assert_eq!(
            parse_bit_value(bad.as_bytes()),
            Err(StringError::BitValueOutOfRange),
            "{bad:?}"
        );
    }
    // Setting a bit to what it is writes nothing; growing the string always writes.
    assert_eq!(
        setbit(Some(b"\x80"), 0, true),
        SetBit {
            old_bit: 1,
            new_value: None
        }
    );
    assert_eq!(
        setbit(Some(b"\x80"), 9, false),
        SetBit {
            old_bit: 0,
            new_value: Some(vec![0x80, 0])
        }
    );
    assert_eq!(
        setbit(None, 0, false),
        SetBit {
            old_bit: 0,
            new_value: Some(vec![0])
        }
    );
    assert_eq!(
        setbit(Some(b""), 15, true),
        SetBit {
            old_bit: 0,
            new_value: Some(vec![0, 1])
        }
    );
}

proptest! {
    // SETBIT fuzzing (string.tcl): random bits set in a 256-byte string, against a bit vector.
    #[test]
    fn setbit_and_getbit_match_a_bit_vector(
        ops in proptest::collection::vec((0u64..2048, any::<bool>()), 1..200),
    ) {
        let mut model: Vec<bool> = Vec::new();
        let mut value: Option<Vec<u8>> = None;
        for (offset, bit) in ops {
            let at = offset as usize;
            let old_model = model.get(at).copied().unwrap_or(false);
            let set = setbit(value.as_deref(), offset, bit);
            prop_assert_eq!(set.old_bit, u8::from(old_model));
            let grows = model.len() <= at;
            prop_assert_eq!(set.new_value.is_some(), grows || old_model != bit || value.is_none());
            if let Some(new) = set.new_value {
                value = Some(new);
            }
            while model.len() < (at / 8 + 1) * 8 {
                model.push(false);
            }
            model[at] = bit;
            let stored = value.as_deref().unwrap();
            prop_assert_eq!(stored.len() * 8, model.len());
            for (i, &b) in model.iter().enumerate() {
                prop_assert_eq!(getbit(stored, i as u64), u8::from(b));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// BITCOUNT

/// `count_bits` of bitops.tcl.
fn count_bits(s: &[u8]) -> i64 {
    s.iter().map(|b| i64::from(b.count_ones())).sum()
}

/// `count_bits_start_end` of bitops.tcl: the set bits from bit `start` to bit `end`.
fn count_bits_start_end(s: &[u8], start: i64, end: i64) -> i64 {
    (start.max(0)..=end.min(s.len() as i64 * 8 - 1))
        .map(|i| i64::from(getbit(s, i as u64)))
        .sum()
}

fn count(value: &[u8], args: &[&str]) -> Result<i64, StringError> {
    parse_bitcount_args(args).map(|range| bitcount(value, range))
}

#[test]
fn bitcount_cases_of_bitops_tcl() {
    // Returns 0 against a non existing key (an empty value).
    assert_eq!(count(b"", &[]), Ok(0));
    assert_eq!(count(b"", &["0", "1000", "bit"]), Ok(0));
    // Returns 0 with out of range indexes.
    assert_eq!(count(b"xxxx", &["4", "10"]), Ok(0));
    assert_eq!(count(b"xxxx", &["32", "87", "bit"]), Ok(0));
    // Returns 0 with negative indexes where start > end.
    assert_eq!(count(b"xxxx", &["-6", "-7"]), Ok(0));
    assert_eq!(count(b"xxxx", &["-6", "-15", "bit"]), Ok(0));
    // Against the test vectors.
    for vector in [&b""[..], b"\xaa", b"\x00\x00\xff", b"foobar", b"123"] {
        assert_eq!(count(vector, &[]), Ok(count_bits(vector)));
        assert_eq!(count(vector, &["0", "-1", "bit"]), Ok(count_bits(vector)));
    }
    assert_eq!(count_bits(b"foobar"), 26);
    // With start, end.
    let s = b"foobar";
    assert_eq!(count(s, &["0", "-1"]), Ok(count_bits(b"foobar")));
    assert_eq!(count(s, &["1", "-2"]), Ok(count_bits(b"ooba")));
    assert_eq!(count(s, &["-2", "1"]), Ok(0));
    assert_eq!(count(s, &["0", "1000"]), Ok(count_bits(b"foobar")));
    assert_eq!(count(s, &["0", "-1", "bit"]), Ok(count_bits(s)));
    assert_eq!(
        count(s, &["10", "14", "bit"]),
        Ok(count_bits_start_end(s, 10, 14))
    );
    assert_eq!(
        count(s, &["3", "14", "bit"]),
        Ok(count_bits_start_end(s, 3, 14))
    );
    assert_eq!(
        count(s, &["3", "29", "bit"]),
        Ok(count_bits_start_end(s, 3, 29))
    );
    assert_eq!(
        count(s, &["10", "-34", "bit"]),
        Ok(count_bits_start_end(s, 10, 14))
    );
    assert_eq!(
        count(s, &["3", "-34", "bit"]),
        Ok(count_bits_start_end(s, 3, 14))
    );
    assert_eq!(
        count(s, &["3", "-19", "bit"]),
        Ok(count_bits_start_end(s, 3, 29))
    );
    assert_eq!(count(s, &["-2", "1", "bit"]), Ok(0));
    assert_eq!(count(s, &["0", "1000", "bit"]), Ok(count_bits(s)));
    // Syntax errors #1 and #2.
    assert_eq!(count(s, &["0"]), Err(StringError::Syntax));
    assert_eq!(count(s, &["0", "1", "hello"]), Err(StringError::Syntax));
    // Regression test for github issue #582: a range end beyond 32 bits.
    assert_eq!(count(b"\x80", &["0", "4294967296"]), Ok(1));
    // Misaligned prefix; misaligned prefix + full words + remainder.
    assert_eq!(count(b"ab", &["1", "-1"]), Ok(3));
    assert_eq!(count(b"__PPxxxxxxxxxxxxxxxxRR__", &["2", "-3"]), Ok(74));
}

#[test]
fn bitcount_arguments() {
    assert_eq!(StringError::Syntax.message(), "ERR syntax error");
    assert_eq!(parse_bitcount_args::<&str>(&[]), Ok(None));
    assert_eq!(
        parse_bitcount_args(&["1", "2", "BiT"]),
        Ok(Some(BitRange {
            start: 1,
            end: 2,
            unit: BitUnit::Bit
        }))
    );
    assert_eq!(
        parse_bitcount_args(&["1", "2", "BYTE"]),
        Ok(Some(BitRange {
            start: 1,
            end: 2,
            unit: BitUnit::Byte
        }))
    );
    assert_eq!(
        count(b"abc", &["0", "1", "2", "3"]),
        Err(StringError::Syntax)
    );
    assert_eq!(count(b"abc", &["x", "1"]), Err(StringError::NotAnInteger));
    assert_eq!(count(b"abc", &["0", "x"]), Err(StringError::NotAnInteger));
    assert_eq!(
        count(b"abc", &["x", "1", "hello"]),
        Err(StringError::NotAnInteger)
    );
    // Negative indices with start > end answer 0 before the unit is read.
    assert_eq!(count(b"abc", &["-1", "-2", "hello"]), Ok(0));
    assert_eq!(
        count(b"abc", &["-2", "-1", "hello"]),
        Err(StringError::Syntax)
    );
    // Extremes.
    assert_eq!(
        count(
            b"\xff\xff",
            &["-9223372036854775808", "9223372036854775807"]
        ),
        Ok(16)
    );
    assert_eq!(
        count(
            b"\xff\xff",
            &["-9223372036854775808", "9223372036854775807", "bit"]
        ),
        Ok(16)
    );
    assert_eq!(
        count(b"\xff\xff", &["9223372036854775807", "9223372036854775807"]),
        Ok(0)
    );
    assert_eq!(count(b"\xff\xff", &["7", "8", "bit"]), Ok(2));
    assert_eq!(count(b"\xff\xff", &["8", "8", "bit"]), Ok(1));
    assert_eq!(count(b"\x7e", &["1", "6", "bit"]), Ok(6));
    assert_eq!(count(b"\x7e", &["2", "5", "bit"]), Ok(4));
    assert_eq!(count(b"\x81", &["1", "6", "bit"]), Ok(0));
    assert_eq!(count(b"", &["0", "-1"]), Ok(0));
    assert_eq!(count(b"", &["-1", "0", "bit"]), Ok(0));
}

proptest! {
    // BITCOUNT fuzzing with and without start/end, in bytes and bits.
    #[test]
    fn bitcount_matches_a_naive_count(
        value in proptest::collection::vec(any::<u8>(), 0..64),
        start in -600i64..600,
        end in -600i64..600,
        bit_unit in any::<bool>(),
    ) {
        prop_assert_eq!(bitcount(&value, None), count_bits(&value));
        let unit = if bit_unit { BitUnit::Bit } else { BitUnit::Byte };
        let total = if bit_unit { value.len() as i64 * 8 } else { value.len() as i64 };
        // The model: indices from the end, clamped, an inclusive range of bits.
        let expected = if start < 0 && end < 0 && start > end {
            0
        } else {
            let s = if start < 0 { (total + start).max(0) } else { start };
            let e = if end < 0 { (total + end).max(0) } else { end }.min(total - 1);
            if s > e {
                0
            } else if bit_unit {
                count_bits_start_end(&value, s, e)
            } else {
                count_bits_start_end(&value, s * 8, e * 8 + 7)
            }
        };
        prop_assert_eq!(bitcount(&value, Some(BitRange { start, end, unit })), expected);
    }
}

// ---------------------------------------------------------------------------------------------
// LCS

// The sequences of string.tcl's LCS tests (test data).
const RNA1: &[u8] = b"CACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTTCGTCCGGGTGTG";
const RNA2: &[u8] = b"ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTT";
const RNALCS: &[u8] = b"ACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTT";

fn run_lcs(a: &[u8], b: &[u8], args: &[&str]) -> Result<LcsReply, StringError> {
    lcs(a, b, &parse_lcs_options(args)?, MAX)
}

fn m(a: (u64, u64), b: (u64, u64), len: Option<u64>) -> LcsMatch {
    LcsMatch { a, b, len }
}

#[test]
fn lcs_cases_of_string_tcl() {
    // LCS basic.
    assert_eq!(
        run_lcs(RNA1, RNA2, &[]),
        Ok(LcsReply::String(RNALCS.to_vec()))
    );
    // LCS len.
    assert_eq!(
        run_lcs(RNA1, RNA2, &["LEN"]),
        Ok(LcsReply::Len(RNALCS.len() as u64))
    );
    // LCS indexes.
    let len = RNALCS.len() as u64;
    let ranges = [
        ((238, 238), (239, 239), 1),
        ((236, 236), (238, 238), 1),
        ((229, 230), (236, 237), 2),
        ((224, 224), (235, 235), 1),
        ((1, 222), (13, 234), 222),
    ];
    assert_eq!(
        run_lcs(RNA1, RNA2, &["IDX"]),
        Ok(LcsReply::Idx {
            matches: ranges.iter().map(|&(a, b, _)| m(a, b, None)).collect(),
            len
        })
    );
    // LCS indexes with match len.
    assert_eq!(
        run_lcs(RNA1, RNA2, &["IDX", "WITHMATCHLEN"]),
        Ok(LcsReply::Idx {
            matches: ranges.iter().map(|&(a, b, l)| m(a, b, Some(l))).collect(),
            len
        })
    );
    // LCS indexes with match len and minimum match len.
    assert_eq!(
        run_lcs(RNA1, RNA2, &["IDX", "WITHMATCHLEN", "MINMATCHLEN", "5"]),
        Ok(LcsReply::Idx {
            matches: vec![m((1, 222), (13, 234), Some(222))],
            len
        })
    );
}

#[test]
fn lcs_documentation_examples() {
    // The LCS command's documentation: ohmytext / mynewtext.
    let (a, b) = (b"ohmytext", b"mynewtext");
    assert_eq!(run_lcs(a, b, &[]), Ok(LcsReply::String(b"mytext".to_vec())));
    assert_eq!(run_lcs(a, b, &["LEN"]), Ok(LcsReply::Len(6)));
    assert_eq!(
        run_lcs(a, b, &["IDX"]),
        Ok(LcsReply::Idx {
            matches: vec![m((4, 7), (5, 8), None), m((2, 3), (0, 1), None)],
            len: 6
        })
    );
    assert_eq!(
        run_lcs(a, b, &["IDX", "MINMATCHLEN", "4"]),
        Ok(LcsReply::Idx {
            matches: vec![m((4, 7), (5, 8), None)],
            len: 6
        })
    );
    assert_eq!(
        run_lcs(a, b, &["IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]),
        Ok(LcsReply::Idx {
            matches: vec![m((4, 7), (5, 8), Some(4))],
            len: 6
        })
    );
}

#[test]
fn lcs_options_and_limits() {
    assert_eq!(parse_lcs_options::<&str>(&[]), Ok(LcsOptions::default()));
    assert_eq!(
        parse_lcs_options(&["idx", "minMatchLen", "-5", "withmatchlen"]),
        Ok(LcsOptions {
            len: false,
            idx: true,
            min_match_len: 0,
            with_match_len: true
        })
    );
    assert_eq!(
        parse_lcs_options(&["MINMATCHLEN", "3", "MINMATCHLEN", "1"]).map(|o| o.min_match_len),
        Ok(1)
    );
    assert_eq!(
        parse_lcs_options(&["LEN", "IDX"]),
        Err(StringError::LcsLenAndIdx)
    );
    assert_eq!(
        parse_lcs_options(&["IDX", "LEN", "FOO"]),
        Err(StringError::Syntax)
    );
    assert_eq!(
        parse_lcs_options(&["MINMATCHLEN"]),
        Err(StringError::Syntax)
    );
    assert_eq!(
        parse_lcs_options(&["IDX", "MINMATCHLEN"]),
        Err(StringError::Syntax)
    );
    assert_eq!(
        parse_lcs_options(&["MINMATCHLEN", "x"]),
        Err(StringError::NotAnInteger)
    );
    assert_eq!(
        parse_lcs_options(&["MINMATCHLEN", "LEN"]),
        Err(StringError::NotAnInteger)
    );
    assert_eq!(
        StringError::LcsLenAndIdx.message(),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(
        StringError::LcsWrongType.message(),
        "ERR The specified keys must contain string values"
    );
    assert_eq!(
        StringError::LcsStringTooLong.message(),
        "ERR String too long for LCS"
    );
    assert_eq!(
        StringError::LcsTableTooLarge.message(),
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
    );
    assert_eq!(
        StringError::LcsAllocationFailed.message(),
        "ERR Insufficient memory, failed allocating transient memory for LCS"
    );
    // WITHMATCHLEN and MINMATCHLEN change nothing without IDX.
    assert_eq!(
        run_lcs(b"abc", b"xbc", &["WITHMATCHLEN", "MINMATCHLEN", "9"]),
        Ok(LcsReply::String(b"bc".to_vec()))
    );
    assert_eq!(
        run_lcs(b"abc", b"xbc", &["LEN", "WITHMATCHLEN"]),
        Ok(LcsReply::Len(2))
    );
    // Empty and missing strings.
    assert_eq!(run_lcs(b"", b"", &[]), Ok(LcsReply::String(Vec::new())));
    assert_eq!(run_lcs(b"abc", b"", &["LEN"]), Ok(LcsReply::Len(0)));
    assert_eq!(
        run_lcs(b"", b"abc", &["IDX"]),
        Ok(LcsReply::Idx {
            matches: Vec::new(),
            len: 0
        })
    );
    assert_eq!(
        run_lcs(b"abc", b"xyz", &[]),
        Ok(LcsReply::String(Vec::new()))
    );
    // The table of 10 by 10 bytes is 11 * 11 * 4 = 484 bytes: allowed at exactly the limit.
    let ten = b"0123456789";
    let options = LcsOptions::default();
    assert!(lcs(ten, ten, &options, 484).is_ok());
    assert_eq!(
        lcs(ten, ten, &options, 483),
        Err(StringError::LcsTableTooLarge)
    );
    let len_only = LcsOptions {
        len: true,
        ..LcsOptions::default()
    };
    assert_eq!(
        lcs(ten, ten, &len_only, 483),
        Err(StringError::LcsTableTooLarge)
    );
    assert_eq!(
        lcs(ten, b"", &options, 44),
        Ok(LcsReply::String(Vec::new()))
    );
    assert_eq!(
        lcs(ten, b"", &options, 43),
        Err(StringError::LcsTableTooLarge)
    );
}

/// The LCS length, by memoized recursion on suffixes: another formulation than the table.
fn lcs_len_reference(a: &[u8], b: &[u8]) -> u64 {
    fn go(a: &[u8], b: &[u8], i: usize, j: usize, memo: &mut Vec<Vec<Option<u64>>>) -> u64 {
        if i == a.len() || j == b.len() {
            return 0;
        }
        if let Some(v) = memo[i][j] {
            return v;
        }
        let v = if a[i] == b[j] {
            1 + go(a, b, i + 1, j + 1, memo)
        } else {
            go(a, b, i + 1, j, memo).max(go(a, b, i, j + 1, memo))
        };
        memo[i][j] = Some(v);
        v
    }
    let mut memo = vec![vec![None; b.len()]; a.len()];
    go(a, b, 0, 0, &mut memo)
}

fn is_subsequence(needle: &[u8], haystack: &[u8]) -> bool {
    let mut rest = haystack.iter();
    needle.iter().all(|c| rest.any(|h| h == c))
}

proptest! {
    #[test]
    fn lcs_matches_a_reference(
        a in proptest::collection::vec(0u8..4, 0..40),
        b in proptest::collection::vec(0u8..4, 0..40),
        min in 0u64..4,
    ) {
        let expected = lcs_len_reference(&a, &b);
        let options = |args: &[&str]| parse_lcs_options(args).unwrap();
        prop_assert_eq!(lcs(&a, &b, &options(&["LEN"]), MAX), Ok(LcsReply::Len(expected)));
        let Ok(LcsReply::String(common)) = lcs(&a, &b, &options(&[]), MAX) else {
            panic!("a string reply");
        };
        prop_assert_eq!(common.len() as u64, expected);
        prop_assert!(is_subsequence(&common, &a) && is_subsequence(&common, &b));
        // The ranges cover the subsequence, from the end backwards, each the same bytes.
        let Ok(LcsReply::Idx { matches, len }) = lcs(&a, &b, &options(&["IDX", "WITHMATCHLEN"]), MAX) else {
            panic!("an IDX reply");
        };
        prop_assert_eq!(len, expected);
        let mut joined = Vec::new();
        let mut previous: Option<LcsMatch> = None;
        for found in matches.iter().rev() {
            let (a0, a1) = (found.a.0 as usize, found.a.1 as usize);
            let (b0, b1) = (found.b.0 as usize, found.b.1 as usize);
            prop_assert_eq!(&a[a0..=a1], &b[b0..=b1]);
            prop_assert_eq!(found.len, Some((a1 - a0 + 1) as u64));
            if let Some(p) = previous {
                prop_assert!(p.a.1 < found.a.0 && p.b.1 < found.b.0);
            }
            previous = Some(*found);
            joined.extend_from_slice(&a[a0..=a1]);
        }
        prop_assert_eq!(&joined, &common);
        // MINMATCHLEN keeps the long enough ones, in order.
        let min_text = min.to_string();
        let Ok(LcsReply::Idx { matches: kept, .. }) = lcs(&a, &b, &options(&["IDX", "MINMATCHLEN", &min_text]), MAX) else {
            panic!("an IDX reply");
        };
        let expected_kept: Vec<LcsMatch> = matches
            .iter()
            .filter(|found| found.len.unwrap() >= min)
            .map(|found| LcsMatch { len: None, ..*found })
            .collect();
        prop_assert_eq!(kept, expected_kept);
    }
}

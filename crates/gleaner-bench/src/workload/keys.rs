//! Keys: key number → fixed-length key bytes.
//!
//! Format: `user` followed by the key number in decimal, zero-padded on the left to fill the
//! key length. With the default 24 bytes that is `user` and 20 digits
//! (`user00000000000000000042`), enough for every `u64`. Because every key has the same length
//! and the digits are zero-padded, byte order of keys is number order, so a scan from key `n`
//! visits `n + 1, n + 2, …`, and distinct numbers give distinct keys. The `user` prefix follows
//! YCSB's key names and keeps keys printable in engine dumps.

use std::fmt;

/// The key length of the papers' workloads (Scavenger §4.1: 24-byte keys).
pub const DEFAULT_KEY_LEN: usize = 24;
/// Shortest key length: the prefix and four digits.
pub const MIN_KEY_LEN: usize = 8;

const PREFIX: &[u8] = b"user";
/// Decimal digits of `u64::MAX`.
const MAX_DIGITS: usize = 20;

/// Writes keys of one fixed length (see the module documentation for the format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFormat {
    len: usize,
}

/// A key format that cannot hold the requested keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFormatError {
    len: usize,
    count: u64,
}

impl fmt::Display for KeyFormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.len < MIN_KEY_LEN {
            write!(
                f,
                "key length {} is below the minimum of {MIN_KEY_LEN} bytes",
                self.len
            )
        } else {
            write!(
                f,
                "{}-byte keys hold {} decimal digits, too few for {} distinct keys",
                self.len,
                self.len - PREFIX.len(),
                self.count
            )
        }
    }
}

impl std::error::Error for KeyFormatError {}

impl Default for KeyFormat {
    fn default() -> Self {
        KeyFormat {
            len: DEFAULT_KEY_LEN,
        }
    }
}

impl KeyFormat {
    /// A format of `len`-byte keys able to name key numbers `0..count`. Fails if `len` is below
    /// [`MIN_KEY_LEN`] or the `len - 4` digits cannot write `count - 1` (a key number that does
    /// not fit would otherwise have to be truncated and collide with another).
    pub fn new(len: usize, count: u64) -> Result<Self, KeyFormatError> {
        let digits = len.saturating_sub(PREFIX.len());
        let fits = digits >= MAX_DIGITS || count <= 10u64.pow(digits as u32);
        if len < MIN_KEY_LEN || !fits {
            return Err(KeyFormatError { len, count });
        }
        Ok(KeyFormat { len })
    }

    /// The key length in bytes.
    pub fn key_len(&self) -> usize {
        self.len
    }

    /// Writes the key of `number` into `buf` (cleared first; its capacity is reused).
    pub fn write(&self, number: u64, buf: &mut Vec<u8>) {
        buf.clear();
        buf.extend_from_slice(PREFIX);
        buf.resize(self.len, b'0');
        // Digits from the right; what is left of them stays '0'. Digits beyond the key length
        // cannot occur: `new` checked that every number below the count fits.
        let mut rest = number;
        for byte in buf[PREFIX.len()..].iter_mut().rev() {
            if rest == 0 {
                break;
            }
            *byte = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
    }

    /// The key of `number` as a new vector (for tests and one-off use; hot loops use
    /// [`KeyFormat::write`]).
    pub fn key(&self, number: u64) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.len);
        self.write(number, &mut buf);
        buf
    }

    /// Writes into `buf` the exclusive end of a key range whose last key is that of `last`: the
    /// key of `last` with its final byte raised by one (a digit, so at most `:`). It sorts after
    /// the key of `last` and, being of the same length and agreeing with it up to that byte,
    /// not after the key of any larger number; so `[key(first), end)` holds exactly the keys
    /// of `first..=last`. Unlike the key of `last + 1` it exists for every number this format
    /// writes, and keeps the key length (a longer end key could pass an engine's key limit).
    pub fn write_range_end(&self, last: u64, buf: &mut Vec<u8>) {
        self.write(last, buf);
        let final_byte = buf.last_mut().expect("keys are at least MIN_KEY_LEN bytes");
        *final_byte += 1;
    }

    /// The key number of a key in this format, or `None` if `key` is not one.
    pub fn parse(&self, key: &[u8]) -> Option<u64> {
        if key.len() != self.len || !key.starts_with(PREFIX) {
            return None;
        }
        let digits = &key[PREFIX.len()..];
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // Leading zeros beyond 20 digits are padding; what remains must fit a u64.
        let significant = &digits[digits.len().saturating_sub(MAX_DIGITS)..];
        if digits[..digits.len() - significant.len()]
            .iter()
            .any(|&d| d != b'0')
        {
            return None;
        }
        std::str::from_utf8(significant).ok()?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_format() {
        let f = KeyFormat::default();
        assert_eq!(f.key(42), b"user00000000000000000042");
        assert_eq!(f.key(0), b"user00000000000000000000");
        assert_eq!(f.key(u64::MAX), b"user18446744073709551615");
        assert_eq!(f.parse(&f.key(u64::MAX)), Some(u64::MAX));
        assert_eq!(f.parse(b"user0000000000000000004x"), None);
        assert_eq!(f.parse(b"user42"), None);
    }

    #[test]
    fn keys_sort_in_number_order_and_are_distinct() {
        for len in [8, 12, 24, 32] {
            let f = KeyFormat::new(len, 10_000).unwrap();
            let keys: Vec<Vec<u8>> = (0..10_000).map(|n| f.key(n)).collect();
            assert!(keys.iter().all(|k| k.len() == len));
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "len {len}");
            for (n, k) in keys.iter().enumerate() {
                assert_eq!(f.parse(k), Some(n as u64));
            }
        }
        let long = KeyFormat::new(40, u64::MAX).unwrap();
        assert!(long.key(u64::MAX - 1) < long.key(u64::MAX));
        assert_eq!(long.parse(&long.key(u64::MAX)), Some(u64::MAX));
    }

    #[test]
    fn too_short_keys_are_refused() {
        assert!(KeyFormat::new(7, 10).is_err());
        assert!(KeyFormat::new(8, 10_000).is_ok());
        let err = KeyFormat::new(8, 10_001).unwrap_err();
        assert!(err.to_string().contains("4 decimal digits"), "{err}");
        assert!(KeyFormat::new(24, u64::MAX).is_ok());
    }

    #[test]
    fn a_range_end_bounds_exactly_the_keys_up_to_its_last() {
        // 8-byte keys hold exactly 10,000 numbers: the key of 9,999 + 1 cannot be written, but
        // a range ending with 9,999 still has an end.
        let f = KeyFormat::new(8, 10_000).unwrap();
        let keys: Vec<Vec<u8>> = (0..10_000).map(|n| f.key(n)).collect();
        let mut end = Vec::new();
        for last in [0, 8, 9, 10, 99, 1_234, 1_239, 9_998, 9_999] {
            f.write_range_end(last, &mut end);
            assert_eq!(end.len(), 8);
            let below: Vec<u64> = (0..10_000u64).filter(|&n| keys[n as usize] < end).collect();
            assert_eq!(below.len() as u64, last + 1, "end after #{last}");
            assert_eq!(below.last(), Some(&last));
        }
        f.write_range_end(41, &mut end);
        assert_eq!(end, f.key(42), "a last digit below 9: the next key itself");
        f.write_range_end(9_999, &mut end);
        assert_eq!(end, b"user999:");
    }

    #[test]
    fn write_reuses_the_buffer() {
        let f = KeyFormat::default();
        let mut buf = f.key(123_456);
        f.write(7, &mut buf);
        assert_eq!(buf, f.key(7));
    }
}

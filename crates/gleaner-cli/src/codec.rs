//! How keys and values travel between the command line and the database: UTF-8 text as is, or
//! hex with `--hex`.

use std::borrow::Cow;

/// Converts keys and values between their command-line form and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    hex: bool,
}

impl Codec {
    /// A codec for text (`hex` false) or hex (`hex` true).
    pub fn new(hex: bool) -> Self {
        Codec { hex }
    }

    /// True when keys and values are hex-encoded.
    pub fn is_hex(&self) -> bool {
        self.hex
    }

    /// The bytes of `text` given as `what` ("key", "value"): the text itself, or its hex
    /// decoding. The error explains what is wrong with the input.
    pub fn decode<'a>(&self, what: &str, text: &'a str) -> Result<Cow<'a, [u8]>, String> {
        if self.hex {
            hex_decode(text)
                .map(Cow::Owned)
                .map_err(|why| format!("{what} is not valid hex: {why}"))
        } else {
            Ok(Cow::Borrowed(text.as_bytes()))
        }
    }

    /// The output form of `bytes`: the bytes themselves, or lower-case hex.
    pub fn encode<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        if self.hex {
            Cow::Owned(hex_encode(bytes).into_bytes())
        } else {
            Cow::Borrowed(bytes)
        }
    }
}

/// Lower-case hex of `bytes`.
fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

/// Decodes hex digits of either case; the empty string is the empty byte string.
fn hex_decode(text: &str) -> Result<Vec<u8>, String> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(format!("odd number of digits ({})", bytes.len()));
    }
    let mut out = Vec::with_capacity(bytes.len() / 2);
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let at = |j: usize| {
            digit(pair[j]).ok_or_else(|| {
                // Report the character, not the byte: the input may be any UTF-8.
                let c = text[2 * i + j..].chars().next().unwrap_or('?');
                format!("`{c}` at position {} is not a hex digit", 2 * i + j + 1)
            })
        };
        out.push(at(0)? << 4 | at(1)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_passes_through() {
        let c = Codec::new(false);
        assert_eq!(
            c.decode("key", "a b\u{e9}").unwrap().as_ref(),
            "a b\u{e9}".as_bytes()
        );
        assert_eq!(c.encode(b"\x00\xff").as_ref(), b"\x00\xff");
    }

    #[test]
    fn hex_round_trips_any_bytes_and_accepts_either_case() {
        let c = Codec::new(true);
        let all: Vec<u8> = (0..=255).collect();
        let encoded = c.encode(&all).into_owned();
        assert!(encoded.iter().all(|b| !b.is_ascii_uppercase()));
        let text = String::from_utf8(encoded).unwrap();
        assert_eq!(c.decode("key", &text).unwrap().as_ref(), &all[..]);
        assert_eq!(
            c.decode("key", "00FFaB").unwrap().as_ref(),
            &[0, 0xff, 0xab]
        );
        assert_eq!(c.decode("key", "").unwrap().as_ref(), b"");
    }

    #[test]
    fn bad_hex_is_explained() {
        let c = Codec::new(true);
        let e = c.decode("key", "abc").unwrap_err();
        assert!(e.contains("key") && e.contains("odd"), "{e}");
        let e = c.decode("value", "0g").unwrap_err();
        assert!(e.contains("`g` at position 2"), "{e}");
        let e = c.decode("value", "\u{e9}").unwrap_err();
        assert!(e.contains("`\u{e9}` at position 1"), "{e}");
    }
}

//! Rendering of keys and values for humans: escaped UTF-8 or lower-case hex.

use std::fmt::Write as _;

use crate::key::{ParsedKey, ValueKind};

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `bytes` as hex (`as_hex`), or as text where every byte sequence that would not print
/// unambiguously on one line is escaped: backslash, tab, newline, carriage return and other
/// control characters (`\u{..}`), and bytes that are not UTF-8 (`\xNN`).
pub(crate) fn render(bytes: &[u8], as_hex: bool) -> String {
    if as_hex {
        return hex(bytes);
    }
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\t' => s.push_str("\\t"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                c if c.is_control() => {
                    let _ = write!(s, "\\u{{{:x}}}", u32::from(c));
                }
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// The short name of an entry kind used in dumps.
pub(crate) fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Value => "put",
        ValueKind::ValueWithExpiry => "putexp",
        ValueKind::Deletion => "del",
        ValueKind::ValueHandle => "handle",
    }
}

/// An internal key as `KEY@SEQ:KIND`, or `<malformed internal key HEX>` when it does not parse
/// (dumps show what is there rather than fail on a field they only display).
pub(crate) fn render_internal_key(ikey: &[u8], as_hex: bool) -> String {
    match ParsedKey::parse(ikey) {
        Some(k) => format!(
            "{}@{}:{}",
            render(k.user_key, as_hex),
            k.seq,
            kind_name(k.kind)
        ),
        None if ikey.is_empty() => "(none)".to_string(),
        None => format!("<malformed internal key {}>", hex(ikey)),
    }
}

/// A stored handle's fields: `file=F offset=O len=L`, then ` record_seq=S`, ` alias`,
/// ` payload=HEX` and ` expiry=MS` where the handle has them.
pub(crate) fn render_handle(h: &crate::value::StoredHandle) -> String {
    let l = &h.location;
    let mut out = format!("file={} offset={} len={}", l.file_number, l.offset, l.len);
    if let Some(s) = h.record_seq {
        out.push_str(&format!(" record_seq={s}"));
    }
    if h.alias {
        out.push_str(" alias");
    }
    if let Some(p) = &h.payload {
        out.push_str(" payload=");
        out.push_str(&hex(p.as_bytes()));
    }
    if let Some(e) = h.expiry {
        out.push_str(&format!(" expiry={e}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    #[test]
    fn text_escapes_what_would_not_print_on_one_line() {
        assert_eq!(render(b"plain key", false), "plain key");
        assert_eq!(render("grüße".as_bytes(), false), "grüße");
        assert_eq!(render(b"a\tb\nc\\d\x01", false), "a\\tb\\nc\\\\d\\u{1}");
        assert_eq!(render(b"\x00\xff", false), "\\u{0}\\xff");
        assert_eq!(render(b"\x00\xffA", true), "00ff41");
        assert_eq!(
            render_internal_key(&make_internal_key(b"k", 7, ValueKind::Deletion), false),
            "k@7:del"
        );
        assert_eq!(render_internal_key(b"", false), "(none)");
        assert!(render_internal_key(b"abc", false).starts_with("<malformed"));
    }
}

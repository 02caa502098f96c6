//! The OPTIONS file: the database-shape options of the latest open, one `name=value` per line,
//! followed by a checksum line. See docs/format.md, "OPTIONS".

use crate::checksum::crc32c;
use crate::error::{Error, Result};

use super::Options;

/// First line of every OPTIONS file.
const HEADER: &str =
    "# Gleaner OPTIONS v1: written at every open; do not edit (the checksum guards it)";
const CHECKSUM_KEY: &str = "checksum=";

/// Renders the OPTIONS file for `opts`.
pub fn render_options_file(opts: &Options) -> String {
    let mut body = String::new();
    body.push_str(HEADER);
    body.push('\n');
    for (name, value) in opts.persisted_values() {
        body.push_str(name);
        body.push('=');
        body.push_str(&value);
        body.push('\n');
    }
    let crc = crc32c(body.as_bytes());
    body.push_str(&format!("{CHECKSUM_KEY}{crc:08x}\n"));
    body
}

/// Parses an OPTIONS file into `(name, value)` pairs after verifying its checksum. `file` names
/// the file in errors.
pub fn parse_options_file(file: &str, bytes: &[u8]) -> Result<Vec<(String, String)>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::corruption(file, e.valid_up_to() as u64, "not UTF-8"))?;
    let body_end = text
        .rfind(CHECKSUM_KEY)
        .ok_or_else(|| Error::corruption(file, text.len() as u64, "missing checksum line"))?;
    let (body, tail) = text.split_at(body_end);
    let stored = tail[CHECKSUM_KEY.len()..].trim_end_matches('\n');
    let stored = u32::from_str_radix(stored, 16)
        .map_err(|_| Error::corruption(file, body_end as u64, "unreadable checksum line"))?;
    if stored != crc32c(body.as_bytes()) {
        return Err(Error::corruption(
            file,
            body_end as u64,
            "checksum mismatch",
        ));
    }
    let mut out = Vec::new();
    let mut offset = 0usize;
    for line in body.split_inclusive('\n') {
        let content = line.trim_end_matches('\n');
        if !content.is_empty() && !content.starts_with('#') {
            let (name, value) = content.split_once('=').ok_or_else(|| {
                Error::corruption(
                    file,
                    offset as u64,
                    format!("line `{content}` is not name=value"),
                )
            })?;
            out.push((name.trim().to_string(), value.trim().to_string()));
        }
        offset += line.len();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_restores_every_persisted_option() {
        let opts = Options::default()
            .with_memtable_size(12345)
            .with_compression(super::super::Compression::None)
            .with_use_direct_io_for_reads(true);
        let text = render_options_file(&opts);
        let pairs = parse_options_file("OPTIONS", text.as_bytes()).expect("parse");
        let mut fresh = Options::default();
        for (n, v) in &pairs {
            fresh.apply_saved(n, v).expect("apply");
        }
        assert_eq!(fresh.persisted_values(), opts.persisted_values());
    }

    #[test]
    fn any_changed_byte_is_detected() {
        let text = render_options_file(&Options::default());
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            let mut bad = bytes.to_vec();
            bad[i] ^= 0x01;
            assert!(
                parse_options_file("OPTIONS", &bad).is_err(),
                "flip at byte {i} went unnoticed"
            );
        }
    }
}

//! Version edits: the records of the manifest. Each edit is a sequence of fields
//! `tag: varint | length: varint | payload`; see docs/format.md, "Manifest".

use super::file_meta::TableMeta;
use crate::coding::{Decoder, put_length_prefixed, put_varint64};
use crate::error::{Error, Result};
use crate::key::{MAX_SEQUENCE, ParsedKey, SeqNo};

/// Format version written in the first edit of every manifest.
pub const MANIFEST_FORMAT_VERSION: u64 = 1;

mod tag {
    pub const FORMAT_VERSION: u64 = 1;
    pub const LOG_NUMBER: u64 = 2;
    pub const NEXT_FILE_NUMBER: u64 = 3;
    pub const LAST_SEQUENCE: u64 = 4;
    pub const COMPACT_POINTER: u64 = 5;
    pub const DELETED_FILE: u64 = 6;
    pub const NEW_KEY_TABLE: u64 = 7;
}

/// A key table added by an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTable {
    /// Level the table joins.
    pub level: u32,
    /// The table.
    pub meta: TableMeta,
}

/// A change to the set of live files and the database's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Manifest format version (present in the first edit of a manifest).
    pub format_version: Option<u64>,
    /// WALs numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// Next unused file number.
    pub next_file_number: Option<u64>,
    /// Last sequence number durable in key tables or logs.
    pub last_sequence: Option<SeqNo>,
    /// Per level, the largest internal key of the last compaction (round-robin cursor).
    pub compact_pointers: Vec<(u32, Vec<u8>)>,
    /// `(level, number)` of removed tables.
    pub deleted_files: Vec<(u32, u64)>,
    /// Added tables.
    pub new_tables: Vec<NewTable>,
}

impl VersionEdit {
    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        fn emit(out: &mut Vec<u8>, tag: u64, payload: &[u8]) {
            put_varint64(out, tag);
            put_length_prefixed(out, payload);
        }
        fn single(out: &mut Vec<u8>, tag: u64, value: Option<u64>) {
            if let Some(v) = value {
                let mut p = Vec::with_capacity(10);
                put_varint64(&mut p, v);
                emit(out, tag, &p);
            }
        }
        let mut out = Vec::new();
        let mut field = Vec::new();
        single(&mut out, tag::FORMAT_VERSION, self.format_version);
        single(&mut out, tag::LOG_NUMBER, self.log_number);
        single(&mut out, tag::NEXT_FILE_NUMBER, self.next_file_number);
        single(&mut out, tag::LAST_SEQUENCE, self.last_sequence);
        for (level, key) in &self.compact_pointers {
            field.clear();
            put_varint64(&mut field, u64::from(*level));
            put_length_prefixed(&mut field, key);
            emit(&mut out, tag::COMPACT_POINTER, &field);
        }
        for (level, number) in &self.deleted_files {
            field.clear();
            put_varint64(&mut field, u64::from(*level));
            put_varint64(&mut field, *number);
            emit(&mut out, tag::DELETED_FILE, &field);
        }
        for NewTable { level, meta: t } in &self.new_tables {
            field.clear();
            put_varint64(&mut field, u64::from(*level));
            put_varint64(&mut field, t.number);
            put_varint64(&mut field, t.file_size);
            put_length_prefixed(&mut field, &t.smallest);
            put_length_prefixed(&mut field, &t.largest);
            put_varint64(&mut field, t.smallest_seq);
            put_varint64(&mut field, t.largest_seq);
            put_varint64(&mut field, t.num_entries);
            put_varint64(&mut field, t.num_deletions);
            emit(&mut out, tag::NEW_KEY_TABLE, &field);
        }
        out
    }

    /// Decodes an edit; `file` and `offset` locate it for errors. Unknown tags, truncated
    /// fields, trailing bytes inside a field and malformed keys are all corruption.
    pub fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<VersionEdit> {
        let bad = |what: &str| Error::corruption(file, offset, format!("version edit: {what}"));
        let mut edit = VersionEdit::default();
        let mut d = Decoder::new(bytes);
        while !d.is_empty() {
            let tag = d.varint64().ok_or_else(|| bad("truncated tag"))?;
            let payload = d.length_prefixed().ok_or_else(|| bad("truncated field"))?;
            let mut p = Decoder::new(payload);
            match tag {
                tag::FORMAT_VERSION => {
                    edit.format_version = Some(p.varint64().ok_or_else(|| bad("format version"))?)
                }
                tag::LOG_NUMBER => {
                    edit.log_number = Some(p.varint64().ok_or_else(|| bad("log number"))?)
                }
                tag::NEXT_FILE_NUMBER => {
                    edit.next_file_number =
                        Some(p.varint64().ok_or_else(|| bad("next file number"))?)
                }
                tag::LAST_SEQUENCE => {
                    let s = p.varint64().ok_or_else(|| bad("last sequence"))?;
                    if s > MAX_SEQUENCE {
                        return Err(bad("last sequence out of range"));
                    }
                    edit.last_sequence = Some(s);
                }
                tag::COMPACT_POINTER => {
                    let level = p.varint32().ok_or_else(|| bad("compact pointer level"))?;
                    let key = p
                        .length_prefixed()
                        .ok_or_else(|| bad("compact pointer key"))?;
                    ParsedKey::parse(key)
                        .ok_or_else(|| bad("compact pointer key is not an internal key"))?;
                    edit.compact_pointers.push((level, key.to_vec()));
                }
                tag::DELETED_FILE => {
                    let level = p.varint32().ok_or_else(|| bad("deleted file level"))?;
                    let number = p.varint64().ok_or_else(|| bad("deleted file number"))?;
                    edit.deleted_files.push((level, number));
                }
                tag::NEW_KEY_TABLE => {
                    let mut field = || p.varint64().ok_or_else(|| bad("new key table"));
                    let level = u32::try_from(field()?).map_err(|_| bad("new key table level"))?;
                    let number = field()?;
                    let file_size = field()?;
                    let smallest = p
                        .length_prefixed()
                        .ok_or_else(|| bad("new key table smallest key"))?
                        .to_vec();
                    let largest = p
                        .length_prefixed()
                        .ok_or_else(|| bad("new key table largest key"))?
                        .to_vec();
                    let mut field = || p.varint64().ok_or_else(|| bad("new key table"));
                    let t = TableMeta {
                        number,
                        file_size,
                        smallest,
                        largest,
                        smallest_seq: field()?,
                        largest_seq: field()?,
                        num_entries: field()?,
                        num_deletions: field()?,
                    };
                    if ParsedKey::parse(&t.smallest).is_none()
                        || ParsedKey::parse(&t.largest).is_none()
                    {
                        return Err(bad("new key table bounds are not internal keys"));
                    }
                    if crate::key::compare_internal(&t.smallest, &t.largest).is_gt() {
                        return Err(bad("new key table smallest key is after its largest"));
                    }
                    edit.new_tables.push(NewTable { level, meta: t });
                }
                other => return Err(bad(&format!("unknown field tag {other}"))),
            }
            if !p.is_empty() {
                return Err(bad(&format!("field tag {tag} has trailing bytes")));
            }
        }
        Ok(edit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};

    fn sample() -> VersionEdit {
        VersionEdit {
            format_version: Some(MANIFEST_FORMAT_VERSION),
            log_number: Some(12),
            next_file_number: Some(40),
            last_sequence: Some(9999),
            compact_pointers: vec![(2, make_internal_key(b"m", 7, ValueKind::Value))],
            deleted_files: vec![(1, 5), (2, 6)],
            new_tables: vec![NewTable {
                level: 2,
                meta: TableMeta {
                    number: 39,
                    file_size: 4096,
                    smallest: make_internal_key(b"a", 10, ValueKind::Value),
                    largest: make_internal_key(b"z", 3, ValueKind::Deletion),
                    smallest_seq: 3,
                    largest_seq: 10,
                    num_entries: 100,
                    num_deletions: 4,
                },
            }],
        }
    }

    #[test]
    fn round_trip() {
        let e = sample();
        assert_eq!(
            VersionEdit::decode(&e.encode(), "MANIFEST-000001", 0).expect("decode"),
            e
        );
        let empty = VersionEdit::default();
        assert_eq!(
            VersionEdit::decode(&empty.encode(), "M", 0).expect("decode"),
            empty
        );
    }

    #[test]
    fn every_truncation_and_unknown_tag_is_corruption() {
        let bytes = sample().encode();
        for cut in 1..bytes.len() {
            // A cut may land on a field boundary and decode as a shorter, valid edit; it must
            // never panic and never decode into the full edit.
            if let Ok(e) = VersionEdit::decode(&bytes[..cut], "M", 0) {
                assert_ne!(e, sample());
            }
        }
        let mut unknown = Vec::new();
        put_varint64(&mut unknown, 99);
        put_length_prefixed(&mut unknown, b"x");
        let err = VersionEdit::decode(&unknown, "M", 8).expect_err("unknown tag");
        assert!(err.to_string().contains("unknown field tag 99"), "{err}");
        let mut trailing = Vec::new();
        put_varint64(&mut trailing, tag::LOG_NUMBER);
        put_length_prefixed(&mut trailing, &[1, 2]);
        assert!(VersionEdit::decode(&trailing, "M", 0).is_err());
    }
}

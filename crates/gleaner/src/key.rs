//! Internal keys: a user key followed by an 8-byte trailer `(sequence << 8) | kind`.
//!
//! Internal keys order by user key ascending, then by trailer descending, so the newest version
//! of a key comes first. Every sorted structure (memtable, blocks, key tables, merge iterators)
//! uses [`compare_internal`].

use std::cmp::Ordering;

use crate::coding::decode_fixed64;

/// A sequence number: the position of a write in the database's total order.
pub type SeqNo = u64;

/// Largest sequence number that fits in the 56 bits of a trailer.
pub const MAX_SEQUENCE: SeqNo = (1 << 56) - 1;

/// Length of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What an internal key's entry means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted at this sequence number.
    Deletion = 0,
    /// The value is stored inline.
    Value = 1,
    /// The value lives in a value table; the entry's value is an encoded
    /// [`StoredHandle`](crate::value::StoredHandle). Flushes create it in key tables; the
    /// memtable and write batches hold it only for the engine's own writes (GC write-backs).
    ValueHandle = 2,
    /// The value is stored inline behind its expiry: the entry's value is `expiry: u64 LE ||
    /// value` (milliseconds since the Unix epoch; [`crate::expiry`]). A separated value's
    /// expiry is in its handle instead.
    ValueWithExpiry = 3,
}

impl ValueKind {
    /// True for the kinds whose entry holds the value itself (with or without an expiry).
    pub fn is_inline_value(self) -> bool {
        matches!(self, ValueKind::Value | ValueKind::ValueWithExpiry)
    }

    /// Decodes a stored kind byte; `None` for bytes no version of the format writes.
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::ValueHandle),
            3 => Some(ValueKind::ValueWithExpiry),
            _ => None,
        }
    }
}

/// Kind byte used only in lookup keys, never stored: it is larger than every stored kind, so a
/// lookup key `(k, s, KIND_FOR_SEEK)` sorts before every stored entry of `k` with sequence `s`.
pub const KIND_FOR_SEEK: u8 = 0xff;

/// Packs a sequence number and kind byte into a trailer.
pub fn pack_trailer(seq: SeqNo, kind: u8) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | u64::from(kind)
}

/// Appends the internal key `(user_key, seq, kind)` to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: u8) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds an owned internal key.
pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind as u8);
    v
}

/// Builds the lookup key that positions a seek at the newest version of `user_key` visible at
/// `seq`.
pub fn make_lookup_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, KIND_FOR_SEEK);
    v
}

/// The bound a key table's extent takes from a range tombstone's start or end at `user_key`:
/// `(user_key, MAX_SEQUENCE, deletion)`, which sorts before every stored version of `user_key`
/// (the write path keeps real sequence numbers below [`MAX_SEQUENCE`]). As a table's smallest
/// key it includes `user_key`; as its largest it excludes it, since a tombstone's end is
/// exclusive (`TableMeta::ends_before`).
pub fn range_bound(user_key: &[u8]) -> Vec<u8> {
    make_internal_key(user_key, MAX_SEQUENCE, ValueKind::Deletion)
}

/// True when `ikey` is a [`range_bound`]: no stored entry has that trailer.
pub fn is_range_bound(ikey: &[u8]) -> bool {
    ikey.len() >= TRAILER_LEN && trailer(ikey) == pack_trailer(MAX_SEQUENCE, ValueKind::Deletion as u8)
}

/// The user-key part of an internal key. Internal keys shorter than a trailer never reach this
/// function: every decoder checks the length first (see [`ParsedKey::parse`]).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    debug_assert!(ikey.len() >= TRAILER_LEN);
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

/// The trailer of an internal key.
pub fn trailer(ikey: &[u8]) -> u64 {
    debug_assert!(ikey.len() >= TRAILER_LEN);
    decode_fixed64(&ikey[ikey.len() - TRAILER_LEN..])
}

/// The sequence number of an internal key.
pub fn seq_of(ikey: &[u8]) -> SeqNo {
    trailer(ikey) >> 8
}

/// Orders internal keys: user key ascending, then trailer (sequence, kind) descending.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

/// A decoded internal key borrowing its user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub seq: SeqNo,
    /// What the entry means.
    pub kind: ValueKind,
}

impl<'a> ParsedKey<'a> {
    /// Decodes an internal key read from storage; `None` when it is too short or its kind byte
    /// is unknown (callers report corruption).
    pub fn parse(ikey: &'a [u8]) -> Option<Self> {
        if ikey.len() < TRAILER_LEN {
            return None;
        }
        let t = trailer(ikey);
        let kind = ValueKind::from_byte((t & 0xff) as u8)?;
        Some(ParsedKey {
            user_key: &ikey[..ikey.len() - TRAILER_LEN],
            seq: t >> 8,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first_and_user_keys_ascend() {
        let a5 = make_internal_key(b"a", 5, ValueKind::Value);
        let a3 = make_internal_key(b"a", 3, ValueKind::Deletion);
        let b9 = make_internal_key(b"b", 9, ValueKind::Value);
        let ab1 = make_internal_key(b"ab", 1, ValueKind::Value);
        assert_eq!(compare_internal(&a5, &a3), Ordering::Less);
        assert_eq!(compare_internal(&a3, &ab1), Ordering::Less);
        assert_eq!(compare_internal(&ab1, &b9), Ordering::Less);
        assert_eq!(compare_internal(&a5, &a5), Ordering::Equal);
        // A lookup key sorts before every stored entry with the same sequence.
        let look = make_lookup_key(b"a", 5);
        assert_eq!(compare_internal(&look, &a5), Ordering::Less);
        assert_eq!(
            compare_internal(&make_lookup_key(b"a", 4), &a5),
            Ordering::Greater
        );
    }

    #[test]
    fn parse_rejects_short_keys_and_unknown_kinds() {
        assert!(ParsedKey::parse(b"short").is_none());
        let mut k = b"key".to_vec();
        k.extend_from_slice(&pack_trailer(7, 0x42).to_le_bytes());
        assert!(ParsedKey::parse(&k).is_none());
        let good = make_internal_key(b"key", 7, ValueKind::Value);
        let p = ParsedKey::parse(&good).expect("valid key");
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"key"[..], 7, ValueKind::Value)
        );
        assert_eq!(seq_of(&good), 7);
    }
}

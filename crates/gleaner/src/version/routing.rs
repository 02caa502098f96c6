//! Partitions of the index tree and the routing that assigns keys to them.
//!
//! A partitioned index tree has two trees of levels over one sequence-number space and one set
//! of value tables: partition 0, the *cold* one, holds every key outside the routing's ranges;
//! partition 1, the *hot* one, every key inside them. The routing is part of the version and
//! changes only in the same edit that moves the keys of the ranges it changes, so every key's
//! versions are in exactly one partition, the one the version routes it to: a read consults
//! that partition alone, and a compaction of one partition judges its keys as if the other did
//! not exist (docs/architecture.md, "Partitions").
//!
//! Levels are numbered across partitions: level `l` of partition `p` is level
//! `p · PARTITION_STRIDE + l`, in versions, edits and the manifest alike, so a number means the
//! same whatever `num_levels` a later open uses.

use crate::coding::{Decoder, put_length_prefixed, put_varint64};

/// Level numbers of partition `p` start at `p · PARTITION_STRIDE` (the most levels a tree may
/// have).
pub const PARTITION_STRIDE: usize = super::MAX_LEVELS;

/// Partitions a tree may have.
pub const MAX_PARTITIONS: usize = 2;

/// The cold partition: keys outside the routing's ranges.
pub const COLD: usize = 0;

/// The hot partition: keys inside the routing's ranges.
pub const HOT: usize = 1;

/// Most ranges a routing holds (checked when decoding).
pub const MAX_ROUTED_RANGES: usize = 1 << 16;

/// The partition level `level` belongs to.
pub fn partition_of_level(level: usize) -> usize {
    level / PARTITION_STRIDE
}

/// The partition other than `p`.
pub fn other_partition(p: usize) -> usize {
    if p == HOT { COLD } else { HOT }
}

/// Whether `level` is the L0 of its partition, where every table is a run of its own.
pub fn is_l0(level: usize) -> bool {
    level.is_multiple_of(PARTITION_STRIDE)
}

/// Level `level` of partition `partition`.
pub fn level_in(partition: usize, level: usize) -> usize {
    partition * PARTITION_STRIDE + level
}

/// User keys `start..end` (`end` `None`: every key from `start` on).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyRange {
    /// First key in the range.
    pub start: Vec<u8>,
    /// First key after it; `None` for no end.
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// The keys starting with `prefix` (the empty prefix: every key).
    pub fn of_prefix(prefix: &[u8]) -> Self {
        // The least key above every key with the prefix: drop trailing 0xff bytes, then add
        // one to the last byte left (none left: no end).
        let mut end = prefix.to_vec();
        while end.last() == Some(&0xff) {
            end.pop();
        }
        let end = end.last_mut().map(|b| *b += 1).map(|()| end.clone());
        KeyRange {
            start: prefix.to_vec(),
            end,
        }
    }

    /// Whether `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| key < e)
    }

    /// Whether user keys `lo..=hi` (inclusive; `None` unbounded) meet the range.
    pub fn meets(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        hi.is_none_or(|h| h >= self.start.as_slice())
            && match (lo, self.end.as_deref()) {
                (Some(l), Some(e)) => l < e,
                _ => true,
            }
    }
}

/// The key ranges of the hot partition: sorted, disjoint and not touching (touching ones are
/// one range). The default routes every key to the cold partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    ranges: Vec<KeyRange>,
}

impl Routing {
    /// The routing of `ranges`, which are sorted, made disjoint and joined where they touch or
    /// overlap; empty ranges are dropped.
    pub fn new(mut ranges: Vec<KeyRange>) -> Self {
        ranges.retain(|r| r.end.as_deref().is_none_or(|e| r.start.as_slice() < e));
        ranges.sort();
        let mut out: Vec<KeyRange> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match out.last_mut() {
                Some(last) if last.end.as_deref().is_none_or(|e| r.start.as_slice() <= e) => {
                    last.end = match (last.end.take(), r.end) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    };
                }
                _ => out.push(r),
            }
        }
        Routing { ranges: out }
    }

    /// The routing of the keys under `prefixes`.
    pub fn of_prefixes<'a>(prefixes: impl IntoIterator<Item = &'a [u8]>) -> Self {
        Routing::new(prefixes.into_iter().map(KeyRange::of_prefix).collect())
    }

    /// The hot ranges, sorted.
    pub fn ranges(&self) -> &[KeyRange] {
        &self.ranges
    }

    /// True when every key is cold.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The partition `key` belongs to.
    pub fn partition_of(&self, key: &[u8]) -> usize {
        let i = self.ranges.partition_point(|r| r.start.as_slice() <= key);
        if i > 0 && self.ranges[i - 1].contains(key) {
            HOT
        } else {
            COLD
        }
    }

    /// Whether some key of `lo..=hi` (inclusive; `None` unbounded) is hot.
    pub fn meets_hot(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        self.ranges.iter().any(|r| r.meets(lo, hi))
    }

    /// Whether every key of `lo..=hi` (inclusive) is in partition `p`: the partition whose
    /// tables alone can hold them.
    pub fn holds_all(&self, p: usize, lo: &[u8], hi: &[u8]) -> bool {
        let hot = self
            .ranges
            .iter()
            .any(|r| r.contains(lo) && r.end.as_deref().is_none_or(|e| hi < e));
        if p == HOT {
            hot
        } else {
            !self.meets_hot(Some(lo), Some(hi))
        }
    }

    /// The parts of keys `start..end` in partition `p`, in key order.
    pub fn pieces(&self, p: usize, start: &[u8], end: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = start.to_vec();
        for r in &self.ranges {
            if at.as_slice() >= end {
                break;
            }
            if r.end.as_deref().is_some_and(|e| e <= at.as_slice()) {
                continue;
            }
            // `at..r.start` is cold, `max(at, r.start)..r.end` hot.
            let hot_start = r.start.as_slice().max(at.as_slice()).min(end).to_vec();
            if p == COLD && at < hot_start {
                out.push((at.clone(), hot_start.clone()));
            }
            let hot_end = match &r.end {
                Some(e) => e.as_slice().min(end).to_vec(),
                None => end.to_vec(),
            };
            if p == HOT && hot_start < hot_end {
                out.push((hot_start, hot_end.clone()));
            }
            at = hot_end;
        }
        if p == COLD && at.as_slice() < end {
            out.push((at, end.to_vec()));
        }
        out
    }

    /// The key ranges whose partition differs between this routing and `other`, sorted and
    /// joined where they touch.
    pub fn changed(&self, other: &Routing) -> Vec<KeyRange> {
        // Between two consecutive bounds of either routing, every key has the partition its
        // first key has, in both.
        let mut bounds: Vec<&[u8]> = vec![&[]];
        for r in self.ranges.iter().chain(&other.ranges) {
            bounds.push(&r.start);
            if let Some(e) = &r.end {
                bounds.push(e);
            }
        }
        bounds.sort_unstable();
        bounds.dedup();
        let mut out: Vec<KeyRange> = Vec::new();
        for (i, &start) in bounds.iter().enumerate() {
            if self.partition_of(start) == other.partition_of(start) {
                continue;
            }
            let end = bounds.get(i + 1).map(|e| e.to_vec());
            match out.last_mut() {
                Some(last) if last.end.as_deref() == Some(start) => last.end = end,
                _ => out.push(KeyRange {
                    start: start.to_vec(),
                    end,
                }),
            }
        }
        out
    }

    /// Appends the routing's encoding: the count, then each range's start, and its end with a
    /// flag (docs/format.md, manifest field 18).
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.ranges.len() as u64);
        for r in &self.ranges {
            put_length_prefixed(out, &r.start);
            match &r.end {
                Some(e) => {
                    put_varint64(out, 1);
                    put_length_prefixed(out, e);
                }
                None => put_varint64(out, 0),
            }
        }
    }

    /// The routing `p` holds; every range must be non-empty, sorted after the one before and
    /// not touching it (what [`Routing::encode`] writes).
    pub fn decode(p: &mut Decoder<'_>) -> std::result::Result<Self, String> {
        let trunc = || "truncated routing".to_string();
        let n = p.varint64().ok_or_else(trunc)?;
        if n > MAX_ROUTED_RANGES as u64 {
            return Err(format!(
                "routing of {n} ranges (at most {MAX_ROUTED_RANGES})"
            ));
        }
        let mut ranges: Vec<KeyRange> = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let start = p.length_prefixed().ok_or_else(trunc)?.to_vec();
            let end = match p.varint64().ok_or_else(trunc)? {
                0 => None,
                1 => Some(p.length_prefixed().ok_or_else(trunc)?.to_vec()),
                f => return Err(format!("routing range with end flag {f}")),
            };
            if end.as_deref().is_some_and(|e| e <= start.as_slice()) {
                return Err("an empty routing range".into());
            }
            if let Some(last) = ranges.last()
                && last.end.as_deref().is_none_or(|e| e >= start.as_slice())
            {
                return Err("routing ranges out of order, overlapping or touching".into());
            }
            ranges.push(KeyRange { start, end });
        }
        Ok(Routing { ranges })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: &str, end: Option<&str>) -> KeyRange {
        KeyRange {
            start: start.as_bytes().to_vec(),
            end: end.map(|e| e.as_bytes().to_vec()),
        }
    }

    #[test]
    fn prefixes_become_ranges() {
        assert_eq!(KeyRange::of_prefix(b"user3"), r("user3", Some("user4")));
        assert_eq!(
            KeyRange::of_prefix(b"a\xff\xff"),
            KeyRange {
                start: b"a\xff\xff".to_vec(),
                end: Some(b"b".to_vec())
            }
        );
        assert_eq!(KeyRange::of_prefix(b"\xff").end, None);
        assert_eq!(KeyRange::of_prefix(b"").end, None);
    }

    #[test]
    fn keys_route_to_the_partition_of_their_range() {
        let routing = Routing::of_prefixes([&b"user3"[..], b"user7", b"user8"]);
        // user7 and user8 touch: one range.
        assert_eq!(
            routing.ranges(),
            &[r("user3", Some("user4")), r("user7", Some("user9"))]
        );
        for (key, p) in [
            ("user2999", COLD),
            ("user3", HOT),
            ("user3999", HOT),
            ("user4", COLD),
            ("user7001", HOT),
            ("user8999", HOT),
            ("user9", COLD),
            ("", COLD),
        ] {
            assert_eq!(routing.partition_of(key.as_bytes()), p, "{key}");
        }
        assert!(routing.holds_all(HOT, b"user30", b"user39"));
        assert!(!routing.holds_all(HOT, b"user30", b"user40"));
        assert!(routing.holds_all(COLD, b"user40", b"user69"));
        assert!(!routing.holds_all(COLD, b"user40", b"user70"));
        assert!(Routing::default().holds_all(COLD, b"", b"\xff"));
    }

    #[test]
    fn a_key_range_splits_into_each_partition_s_pieces() {
        let routing = Routing::new(vec![r("c", Some("e")), r("g", Some("h")), r("x", None)]);
        let pieces = |p: usize, s: &str, e: &str| -> Vec<(String, String)> {
            routing
                .pieces(p, s.as_bytes(), e.as_bytes())
                .into_iter()
                .map(|(a, b)| (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap()))
                .collect()
        };
        let v = |l: &[(&str, &str)]| -> Vec<(String, String)> {
            l.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
        };
        assert_eq!(pieces(HOT, "a", "z"), v(&[("c", "e"), ("g", "h"), ("x", "z")]));
        assert_eq!(pieces(COLD, "a", "z"), v(&[("a", "c"), ("e", "g"), ("h", "x")]));
        assert_eq!(pieces(HOT, "d", "gg"), v(&[("d", "e"), ("g", "gg")]));
        assert_eq!(pieces(COLD, "d", "gg"), v(&[("e", "g")]));
        assert_eq!(pieces(COLD, "ca", "cb"), v(&[]));
        assert_eq!(pieces(HOT, "ca", "cb"), v(&[("ca", "cb")]));
        assert_eq!(pieces(COLD, "m", "n"), v(&[("m", "n")]));
    }

    #[test]
    fn the_changed_ranges_are_where_the_partitions_differ() {
        let a = Routing::new(vec![r("b", Some("d")), r("m", Some("p"))]);
        let b = Routing::new(vec![r("c", Some("f")), r("m", Some("p")), r("x", None)]);
        assert_eq!(
            a.changed(&b),
            [r("b", Some("c")), r("d", Some("f")), r("x", None)]
        );
        assert_eq!(b.changed(&a), a.changed(&b));
        assert!(a.changed(&a).is_empty());
        assert_eq!(Routing::default().changed(&a), a.ranges());
    }

    #[test]
    fn overlapping_and_empty_ranges_are_joined_or_dropped() {
        let routing = Routing::new(vec![
            r("c", Some("f")),
            r("a", Some("d")),
            r("x", Some("x")),
            r("m", None),
            r("p", Some("q")),
        ]);
        assert_eq!(routing.ranges(), &[r("a", Some("f")), r("m", None)]);
    }

    #[test]
    fn routings_round_trip_and_bad_ones_are_refused() {
        let routing = Routing::new(vec![r("a", Some("b")), r("k", None)]);
        let mut bytes = Vec::new();
        routing.encode(&mut bytes);
        let back = Routing::decode(&mut Decoder::new(&bytes)).expect("decodes");
        assert_eq!(back, routing);
        for bad in [
            vec![r("b", Some("c")), r("a", Some("b"))],
            vec![r("a", Some("b")), r("b", Some("c"))],
            vec![r("a", Some("a"))],
            vec![r("a", None), r("b", Some("c"))],
        ] {
            // Encoded as given, bypassing `new`'s cleaning.
            let mut bytes = Vec::new();
            Routing { ranges: bad.clone() }.encode(&mut bytes);
            assert!(
                Routing::decode(&mut Decoder::new(&bytes)).is_err(),
                "{bad:?}"
            );
        }
        for cut in 0..bytes.len() {
            assert!(Routing::decode(&mut Decoder::new(&bytes[..cut])).is_err());
        }
    }
}

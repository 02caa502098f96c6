//! Range deletion: a *range tombstone* deletes every version of every key in `[start, end)`
//! older than its sequence number. Tombstones are fragmented for reads and compaction
//! (`FragmentedTombstones`); a key table's manifest bounds are its extent (`table_extent`),
//! which covers its tombstones. docs/architecture.md, "Range deletion", tells where each part
//! of the engine honours them.

mod fragments;

pub(crate) use fragments::FragmentedTombstones;

use crate::key::{self, SeqNo, compare_internal};

/// A range tombstone: every version of a key in `[start, end)` (bytewise) with a sequence
/// number below `seq` is deleted, for readers at or above `seq`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RangeTombstone {
    /// First key deleted.
    pub start: Vec<u8>,
    /// First key after the range (exclusive).
    pub end: Vec<u8>,
    /// The tombstone's sequence number.
    pub seq: SeqNo,
}

/// The snapshot stripe of sequence number `seq` among the live `snapshots` (ascending): stripe
/// i holds `(snapshots[i-1], snapshots[i]]`, the last everything newer than the newest. A
/// reader sees the same newest version (or tombstone) of anything within one stripe.
pub(crate) fn stripe(snapshots: &[SeqNo], seq: SeqNo) -> usize {
    snapshots.partition_point(|&s| s < seq)
}

/// A key table's extent, the bounds the manifest records for it: its entries' smallest and
/// largest internal keys (`points`), widened to cover its range tombstones, whose start and
/// end give [`key::range_bound`]s. `None` for a table holding neither.
pub(crate) fn table_extent<'a>(
    points: Option<(&[u8], &[u8])>,
    tombstones: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut extent = points.map(|(lo, hi)| (lo.to_vec(), hi.to_vec()));
    for (start, end) in tombstones {
        let (lo, hi) = (key::range_bound(start), key::range_bound(end));
        extent = Some(match extent {
            None => (lo, hi),
            Some((a, b)) => (
                if compare_internal(&lo, &a).is_lt() { lo } else { a },
                if compare_internal(&hi, &b).is_gt() { hi } else { b },
            ),
        });
    }
    extent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};

    #[test]
    fn the_extent_covers_entries_and_tombstones() {
        let k = |u: &str, s| make_internal_key(u.as_bytes(), s, ValueKind::Value);
        assert_eq!(table_extent(None, []), None);
        let points = (k("c", 5), k("f", 2));
        let same = table_extent(Some((&points.0, &points.1)), []);
        assert_eq!(same, Some(points.clone()));
        let wide = table_extent(
            Some((&points.0, &points.1)),
            [(&b"a"[..], &b"d"[..]), (&b"e"[..], &b"k"[..])],
        );
        assert_eq!(wide, Some((key::range_bound(b"a"), key::range_bound(b"k"))));
        // A tombstone ending at the last entry's key does not widen the extent: its end is
        // exclusive and the bound sorts before every version of the key.
        let at = table_extent(Some((&points.0, &points.1)), [(&b"c"[..], &b"f"[..])]);
        assert_eq!(at, Some((key::range_bound(b"c"), points.1.clone())));
        let only = table_extent(None, [(&b"x"[..], &b"y"[..])]);
        assert_eq!(only, Some((key::range_bound(b"x"), key::range_bound(b"y"))));
    }
}

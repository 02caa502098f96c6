//! Fragmented range tombstones: any set of range tombstones, overlapping as they may, cut at
//! every start and end into disjoint *fragments*, each listing the sequence numbers of the
//! tombstones that cover it, newest first (RocksDB's `FragmentedRangeTombstoneList` is the
//! model). A point read asks one fragment, found by binary search; an iterator that meets a
//! covered key learns where the fragment ends and seeks past it instead of visiting every
//! covered key; a compaction keeps, per fragment, only the newest tombstone of each snapshot
//! stripe.
//!
//! Building is `O(n log n + f·k)` for `n` tombstones, `f` fragments (at most `2n - 1`) and `k`
//! tombstones covering a fragment; the callers bound `n` (a memtable's tombstones, a key table's
//! block).

use super::RangeTombstone;
use crate::key::SeqNo;

/// One fragment: `[start, end)`, covered by the tombstones whose sequence numbers are
/// `seqs[first..first + count]` of the list, newest first, none twice.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fragment {
    start: Box<[u8]>,
    end: Box<[u8]>,
    first: u32,
    count: u32,
}

/// A set of range tombstones as disjoint fragments in key order (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FragmentedTombstones {
    fragments: Vec<Fragment>,
    /// The sequence numbers of every fragment, each fragment's newest first.
    seqs: Vec<SeqNo>,
}

/// A fragment as callers see it: `[start, end)` and its tombstones' sequence numbers, newest
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FragmentRef<'a> {
    /// First key covered.
    pub start: &'a [u8],
    /// First key after the fragment (exclusive).
    pub end: &'a [u8],
    /// Sequence numbers of the tombstones covering the fragment, newest first.
    pub seqs: &'a [SeqNo],
}

impl FragmentRef<'_> {
    /// The newest of the fragment's tombstones a reader at `read_seq` sees (sequence number at
    /// most `read_seq`).
    pub fn newest_visible(&self, read_seq: SeqNo) -> Option<SeqNo> {
        // Newest first: the first one at or below `read_seq`.
        let i = self.seqs.partition_point(|&s| s > read_seq);
        self.seqs.get(i).copied()
    }
}

impl FragmentedTombstones {
    /// Bytes it holds, about (keys, sequence numbers and the fragments' fixed parts).
    pub fn memory_bytes(&self) -> usize {
        self.fragments
            .iter()
            .map(|f| f.start.len() + f.end.len() + std::mem::size_of::<Fragment>())
            .sum::<usize>()
            + self.seqs.len() * std::mem::size_of::<SeqNo>()
    }

    /// Fragments `tombstones` (empty ones, `start >= end`, are ignored: the write path refuses
    /// them, and they cover nothing).
    pub fn new(tombstones: impl IntoIterator<Item = RangeTombstone>) -> Self {
        let mut ts: Vec<RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| t.start < t.end)
            .collect();
        if ts.is_empty() {
            return FragmentedTombstones::default();
        }
        ts.sort_by(|a, b| a.start.cmp(&b.start));
        // Every start and end is a cut.
        let mut cuts: Vec<&[u8]> = ts
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = FragmentedTombstones::default();
        // Tombstones covering the current cut: (end, seq). Those ending at or before the cut
        // are dropped as the sweep passes them.
        let mut active: Vec<(&[u8], SeqNo)> = Vec::new();
        let mut next = 0;
        let mut seqs: Vec<SeqNo> = Vec::new();
        for pair in cuts.windows(2) {
            let (lo, hi) = (pair[0], pair[1]);
            while next < ts.len() && ts[next].start.as_slice() <= lo {
                active.push((ts[next].end.as_slice(), ts[next].seq));
                next += 1;
            }
            active.retain(|(end, _)| *end > lo);
            if active.is_empty() {
                continue;
            }
            seqs.clear();
            seqs.extend(active.iter().map(|(_, s)| *s));
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            out.push(lo, hi, &seqs);
        }
        out
    }

    /// Appends fragment `[start, end)` with `seqs` (newest first), merged into the previous
    /// fragment when that one ends at `start` with the same tombstones.
    fn push(&mut self, start: &[u8], end: &[u8], seqs: &[SeqNo]) {
        if let Some(last) = self.fragments.last_mut() {
            let (first, count) = (last.first as usize, last.count as usize);
            if *last.end == *start && self.seqs[first..first + count] == *seqs {
                last.end = end.into();
                return;
            }
        }
        let first = u32::try_from(self.seqs.len()).expect("fewer than 2^32 fragment entries");
        self.seqs.extend_from_slice(seqs);
        self.fragments.push(Fragment {
            start: start.into(),
            end: end.into(),
            first,
            count: u32::try_from(seqs.len()).expect("fewer than 2^32 tombstones"),
        });
    }

    /// The fragments of every tombstone of `parts` together (an iterator's view of the
    /// memtables and tables it reads); `None` when none holds any.
    pub fn union(parts: &[std::sync::Arc<FragmentedTombstones>]) -> Option<std::sync::Arc<Self>> {
        match parts {
            [] => None,
            [one] => Some(std::sync::Arc::clone(one)),
            _ => Some(std::sync::Arc::new(FragmentedTombstones::new(
                parts.iter().flat_map(|p| p.tombstones()),
            ))),
        }
    }

    /// Every tombstone the fragments hold, one per fragment and sequence number.
    pub fn tombstones(&self) -> impl Iterator<Item = RangeTombstone> + '_ {
        self.iter().flat_map(|f| {
            f.seqs.iter().map(move |&seq| RangeTombstone {
                start: f.start.to_vec(),
                end: f.end.to_vec(),
                seq,
            })
        })
    }

    /// Fragments.
    pub fn len(&self) -> usize {
        self.fragments.len()
    }

    fn get(&self, i: usize) -> FragmentRef<'_> {
        let f = &self.fragments[i];
        let (first, count) = (f.first as usize, f.count as usize);
        FragmentRef {
            start: &f.start,
            end: &f.end,
            seqs: &self.seqs[first..first + count],
        }
    }

    /// The fragment covering `key`, if any.
    pub fn fragment_at(&self, key: &[u8]) -> Option<FragmentRef<'_>> {
        // The last fragment starting at or before `key`, if it has not ended yet.
        let i = self.fragments.partition_point(|f| *f.start <= *key);
        let i = i.checked_sub(1)?;
        (key < &*self.fragments[i].end).then(|| self.get(i))
    }

    /// The first fragment ending after `key`: the one covering `key`, or else the next one
    /// (for an iterator moving forward from `key`).
    pub fn fragment_from(&self, key: &[u8]) -> Option<FragmentRef<'_>> {
        let i = self.fragments.partition_point(|f| *f.end <= *key);
        (i < self.fragments.len()).then(|| self.get(i))
    }

    /// The last fragment starting at or before `key`: the one covering `key`, or else the one
    /// before it (for an iterator moving backward from `key`).
    pub fn fragment_before(&self, key: &[u8]) -> Option<FragmentRef<'_>> {
        let i = self.fragments.partition_point(|f| *f.start <= *key);
        i.checked_sub(1).map(|i| self.get(i))
    }

    /// The newest tombstone covering `key` that a reader at `read_seq` sees.
    pub fn newest_covering(&self, key: &[u8], read_seq: SeqNo) -> Option<SeqNo> {
        self.fragment_at(key)?.newest_visible(read_seq)
    }

    /// True when the version of `key` at `seq` is deleted for a reader at `read_seq`: a
    /// tombstone it sees covers the key and is newer than the version.
    pub fn covers(&self, key: &[u8], seq: SeqNo, read_seq: SeqNo) -> bool {
        self.newest_covering(key, read_seq).is_some_and(|t| t > seq)
    }

    /// Every fragment, in key order.
    pub fn iter(&self) -> impl Iterator<Item = FragmentRef<'_>> + '_ {
        (0..self.fragments.len()).map(|i| self.get(i))
    }

    /// The tombstones a compaction writes out, given the live snapshots (ascending): per
    /// fragment, the newest tombstone of each *stripe* — the sequence numbers one reader sees
    /// alike, `(s_{i-1}, s_i]` for consecutive snapshots and above the newest for the present —
    /// since within a stripe the newest tombstone hides everything an older one does for every
    /// reader. Where `drop_oldest_stripe(start, end)` holds for a fragment (nothing older than
    /// the compaction's output lies below it in that range, and the compaction dropped what it
    /// covered), the oldest stripe's tombstone has nothing left to delete and goes too.
    pub fn collapse(
        &self,
        snapshots: &[SeqNo],
        mut drop_oldest_stripe: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Vec<RangeTombstone> {
        let stripe = |seq: SeqNo| super::stripe(snapshots, seq);
        let mut out = Vec::new();
        for f in self.iter() {
            let drop_oldest = drop_oldest_stripe(f.start, f.end);
            let mut last_stripe = None;
            for &seq in f.seqs {
                let s = stripe(seq);
                if last_stripe == Some(s) {
                    continue;
                }
                last_stripe = Some(s);
                if drop_oldest && s == 0 {
                    continue;
                }
                out.push(RangeTombstone {
                    start: f.start.to_vec(),
                    end: f.end.to_vec(),
                    seq,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn t(start: &str, end: &str, seq: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            seq,
        }
    }

    fn frags(f: &FragmentedTombstones) -> Vec<(String, String, Vec<SeqNo>)> {
        f.iter()
            .map(|r| {
                (
                    String::from_utf8(r.start.to_vec()).unwrap(),
                    String::from_utf8(r.end.to_vec()).unwrap(),
                    r.seqs.to_vec(),
                )
            })
            .collect()
    }

    #[test]
    fn overlapping_tombstones_become_disjoint_fragments() {
        let f = FragmentedTombstones::new([t("a", "e", 10), t("c", "g", 20), t("x", "z", 5)]);
        assert_eq!(
            frags(&f),
            vec![
                ("a".into(), "c".into(), vec![10]),
                ("c".into(), "e".into(), vec![20, 10]),
                ("e".into(), "g".into(), vec![20]),
                ("x".into(), "z".into(), vec![5]),
            ]
        );
        assert_eq!(f.len(), 4);
        assert_eq!(f.newest_covering(b"d", u64::MAX), Some(20));
        assert_eq!(f.newest_covering(b"d", 15), Some(10), "a snapshot at 15");
        assert_eq!(f.newest_covering(b"d", 9), None);
        assert_eq!(f.newest_covering(b"g", u64::MAX), None, "end is exclusive");
        assert_eq!(f.newest_covering(b"a", u64::MAX), Some(10), "start is inclusive");
        assert!(f.covers(b"b", 9, u64::MAX));
        assert!(!f.covers(b"b", 10, u64::MAX), "a version at the tombstone's own number");
        assert!(!f.covers(b"h", 1, u64::MAX));
        // Where iterators go next.
        assert_eq!(f.fragment_from(b"h").map(|r| r.start), Some(&b"x"[..]));
        assert_eq!(f.fragment_before(b"h").map(|r| r.end), Some(&b"g"[..]));
        assert!(f.fragment_from(b"z").is_none());
        assert!(f.fragment_before(b"0").is_none());
    }

    #[test]
    fn adjacent_fragments_with_the_same_tombstones_merge_and_empty_ones_vanish() {
        // Two halves of one delete at the same number, and an empty range.
        let f = FragmentedTombstones::new([t("a", "c", 7), t("c", "f", 7), t("q", "q", 9)]);
        assert_eq!(frags(&f), vec![("a".into(), "f".into(), vec![7])]);
        // The same tombstone twice counts once.
        let f = FragmentedTombstones::new([t("a", "c", 7), t("a", "c", 7)]);
        assert_eq!(frags(&f), vec![("a".into(), "c".into(), vec![7])]);
        assert_eq!(FragmentedTombstones::new([]).len(), 0);
    }

    #[test]
    fn collapsing_keeps_the_newest_tombstone_of_each_snapshot_stripe() {
        let f = FragmentedTombstones::new([t("a", "z", 5), t("a", "z", 8), t("a", "z", 30)]);
        // No snapshot: one stripe, the newest stays.
        assert_eq!(f.collapse(&[], |_, _| false), vec![t("a", "z", 30)]);
        // A snapshot at 10 reads 8 (which hides 5 from it); the present reads 30.
        assert_eq!(f.collapse(&[10], |_, _| false), vec![t("a", "z", 30), t("a", "z", 8)]);
        // At the bottom, the oldest stripe's tombstone has nothing older left to delete.
        assert_eq!(f.collapse(&[10], |_, _| true), vec![t("a", "z", 30)]);
        assert_eq!(f.collapse(&[], |_, _| true), vec![]);
    }

    #[test]
    fn a_union_answers_as_all_its_parts_together() {
        use std::sync::Arc;
        let a = Arc::new(FragmentedTombstones::new([t("a", "e", 10)]));
        let b = Arc::new(FragmentedTombstones::new([t("c", "g", 20), t("x", "z", 5)]));
        assert!(FragmentedTombstones::union(&[]).is_none());
        assert!(Arc::ptr_eq(
            &FragmentedTombstones::union(std::slice::from_ref(&a)).unwrap(),
            &a
        ));
        let u = FragmentedTombstones::union(&[a, b]).unwrap();
        assert_eq!(
            *u,
            FragmentedTombstones::new([t("a", "e", 10), t("c", "g", 20), t("x", "z", 5)])
        );
    }

    /// Against brute force: random tombstones over a small key space; every key, every read
    /// sequence number.
    #[test]
    fn fragments_answer_as_the_tombstones_do() {
        let key = |i: u8| vec![b'a' + i];
        for seed in 0..200 {
            let mut rng = StdRng::seed_from_u64(seed);
            let n = rng.random_range(0..12);
            let ts: Vec<RangeTombstone> = (0..n)
                .map(|_| {
                    let a = rng.random_range(0..20u8);
                    let b = rng.random_range(0..20u8);
                    RangeTombstone {
                        start: key(a.min(b)),
                        end: key(a.max(b)),
                        seq: rng.random_range(1..30),
                    }
                })
                .collect();
            let f = FragmentedTombstones::new(ts.clone());
            // Fragments are disjoint, in order, non-empty.
            let all: Vec<FragmentRef<'_>> = f.iter().collect();
            for w in all.windows(2) {
                assert!(w[0].end <= w[1].start, "seed {seed}: {:?}", frags(&f));
            }
            for r in &all {
                assert!(r.start < r.end && !r.seqs.is_empty());
                assert!(r.seqs.windows(2).all(|w| w[0] > w[1]));
            }
            for k in 0..21u8 {
                let k = key(k);
                for read in 0..32 {
                    let expect = ts
                        .iter()
                        .filter(|t| t.start <= k && k < t.end && t.seq <= read)
                        .map(|t| t.seq)
                        .max();
                    assert_eq!(f.newest_covering(&k, read), expect, "seed {seed}");
                }
                // Collapsed under random snapshots, every reader sees the same newest tombstone.
                let mut snaps: Vec<SeqNo> = (0..rng.random_range(0..4))
                    .map(|_| rng.random_range(1..30))
                    .collect();
                snaps.sort_unstable();
                snaps.dedup();
                let c = FragmentedTombstones::new(f.collapse(&snaps, |_, _| false));
                for &read in snaps.iter().chain([&u64::MAX]) {
                    assert_eq!(
                        c.newest_covering(&k, read),
                        f.newest_covering(&k, read),
                        "seed {seed}, snapshots {snaps:?}"
                    );
                }
            }
        }
    }
}

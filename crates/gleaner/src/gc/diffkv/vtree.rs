//! The vTree's shape and the merge plan, as pure functions of the tables (no I/O): which
//! compactions merge values (lazy merge), and which vTables join a merge besides the
//! shallower ones (scan-optimised merge: too many sorted runs over their keys; and vTables
//! mostly garbage, the authors' `kToGC`).
//!
//! Everything here is derived from the version each time, never remembered: the authors kept
//! their merge tags in memory and lost them at restart; a database reopened here plans the same
//! merges as it would have without the restart.

use std::collections::BTreeMap;

/// What the plan needs of one vTable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VTable<'a> {
    /// Table number.
    pub number: u64,
    /// Its vTree level (for a table GC wrote, the deepest level: see `meta.rs`).
    pub level: u32,
    /// Smallest user key.
    pub smallest: &'a [u8],
    /// Largest user key.
    pub largest: &'a [u8],
    /// Garbage bytes ÷ record bytes.
    pub garbage_ratio: f64,
}

/// Whether a compaction writing `output_level`, in a tree whose deepest non-empty level is
/// `deepest` (`None`: empty), merges values (lazy merge): only when the output is one of the
/// `merge_levels` deepest non-empty levels, counting the output itself. The authors fix the
/// merge levels at the last two of seven, with level sizes set from the bottom; here they
/// count from the deepest non-empty level, so a shallow tree merges on every compaction.
pub fn merges_into(output_level: u32, deepest: Option<u32>, merge_levels: u32) -> bool {
    let bottom = deepest.unwrap_or(0).max(output_level);
    output_level + merge_levels > bottom
}

/// Why a vTable joins the next merge through its keys whatever its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Over its key range more than the limit of sorted runs overlap at its level.
    Runs,
    /// At least the merge garbage ratio of its bytes is garbage.
    Garbage,
}

/// For each vTable at one of `levels`, the most tables of its level that overlap at any one
/// key of its range, itself included: the sorted runs of that level a scan through that key
/// visits. O(n log n) per level.
pub fn run_depths(tables: &[VTable<'_>]) -> BTreeMap<u64, usize> {
    let mut by_level: BTreeMap<u32, Vec<&VTable<'_>>> = BTreeMap::new();
    for t in tables {
        by_level.entry(t.level).or_default().push(t);
    }
    let mut out = BTreeMap::new();
    for (_, level) in by_level {
        // The depth is highest at some table's smallest key (it only rises at starts): the
        // depth at each start, then the highest over the starts inside each table's range.
        let mut starts: Vec<&[u8]> = level.iter().map(|t| t.smallest).collect();
        starts.sort_unstable();
        let mut ends: Vec<&[u8]> = level.iter().map(|t| t.largest).collect();
        ends.sort_unstable();
        let depth_at: Vec<usize> = starts
            .iter()
            .map(|&k| {
                // Tables begun at or before k, less those ended before it.
                let begun = starts.partition_point(|s| *s <= k);
                let ended = ends.partition_point(|e| *e < k);
                begun - ended
            })
            .collect();
        let max = RangeMax::new(&depth_at);
        for t in level {
            let lo = starts.partition_point(|s| *s < t.smallest);
            let hi = starts.partition_point(|s| *s <= t.largest);
            out.insert(t.number, max.query(lo, hi).max(1));
        }
    }
    out
}

/// The run depths ([`run_depths`]) of the tables at the merge levels (`level >= merge_from`;
/// shallower ones merge by level anyway).
pub fn merge_level_depths(tables: &[VTable<'_>], merge_from: u32) -> BTreeMap<u64, usize> {
    let deep: Vec<VTable<'_>> = tables
        .iter()
        .filter(|t| t.level >= merge_from)
        .copied()
        .collect();
    run_depths(&deep)
}

/// The tables that join the next merge through their keys, and why: those whose run depth
/// (`depths`, from [`merge_level_depths`]) exceeds `max_runs`, and any table at least
/// `gc_ratio` garbage.
pub fn tags(
    tables: &[VTable<'_>],
    depths: &BTreeMap<u64, usize>,
    max_runs: usize,
    gc_ratio: f64,
) -> BTreeMap<u64, Tag> {
    let mut out: BTreeMap<u64, Tag> = depths
        .iter()
        .filter(|&(_, d)| *d > max_runs)
        .map(|(n, _)| (*n, Tag::Runs))
        .collect();
    for t in tables {
        if t.garbage_ratio >= gc_ratio && t.garbage_ratio > 0.0 {
            out.entry(t.number).or_insert(Tag::Garbage);
        }
    }
    out
}

/// The shallowest merge level of a tree whose deepest non-empty level is `deepest`.
pub fn merge_from(deepest: Option<u32>, merge_levels: u32) -> u32 {
    (deepest.unwrap_or(0) + 1).saturating_sub(merge_levels)
}

/// Whether a merge writing `output_level` moves the values of `table`: shallower than the
/// output (the compaction-triggered merge), or tagged.
pub fn moves(table: &VTable<'_>, output_level: u32, tagged: bool) -> bool {
    table.level < output_level || tagged
}

/// Maxima over ranges of a fixed array (a sparse table: O(n log n) to build, O(1) a query).
struct RangeMax {
    rows: Vec<Vec<usize>>,
}

impl RangeMax {
    fn new(values: &[usize]) -> Self {
        let mut rows = vec![values.to_vec()];
        let mut width = 1;
        while width * 2 <= values.len() {
            let prev = rows.last().expect("one row");
            let next = (0..=values.len() - width * 2)
                .map(|i| prev[i].max(prev[i + width]))
                .collect();
            rows.push(next);
            width *= 2;
        }
        RangeMax { rows }
    }

    /// The largest value at `lo..hi`; 0 when empty.
    fn query(&self, lo: usize, hi: usize) -> usize {
        if lo >= hi {
            return 0;
        }
        let k = (usize::BITS - 1 - (hi - lo).leading_zeros()) as usize;
        self.rows[k][lo].max(self.rows[k][hi - (1 << k)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(number: u64, level: u32, lo: &'static str, hi: &'static str) -> VTable<'static> {
        VTable {
            number,
            level,
            smallest: lo.as_bytes(),
            largest: hi.as_bytes(),
            garbage_ratio: 0.0,
        }
    }

    #[test]
    fn lazy_merge_writes_only_the_deepest_levels() {
        // Two merge levels (the authors' count), a tree down to level 3: merges into 2 and 3,
        // not into 1.
        assert!(!merges_into(1, Some(3), 2));
        assert!(merges_into(2, Some(3), 2));
        assert!(merges_into(3, Some(3), 2));
        // The output counts: a compaction into a new deepest level 4 merges, and so would one
        // into 3 then.
        assert!(merges_into(4, Some(3), 2));
        // Shallow trees merge on every compaction.
        assert!(merges_into(1, Some(1), 2));
        assert!(merges_into(1, None, 2));
        assert_eq!(merge_from(Some(3), 2), 2);
        assert_eq!(merge_from(None, 2), 0);
        // Three: level 1 of a four-level tree merges too, not of a five-level one.
        assert!(merges_into(1, Some(3), 3));
        assert!(!merges_into(1, Some(4), 3));
        assert!(merges_into(2, Some(4), 3));
        assert_eq!(merge_from(Some(3), 3), 1);
        assert_eq!(merge_from(Some(4), 3), 2);
        // One: only the deepest level.
        assert!(!merges_into(2, Some(3), 1));
        assert!(merges_into(3, Some(3), 1));
        assert_eq!(merge_from(Some(3), 1), 3);
    }

    #[test]
    fn run_depths_count_overlaps_at_a_key_not_along_a_range() {
        // Level 2: a wide table over three disjoint narrow ones is two runs deep anywhere;
        // at level 3, four stacked tables are four deep.
        let tables = [
            t(1, 2, "a", "z"),
            t(2, 2, "b", "c"),
            t(3, 2, "e", "f"),
            t(4, 2, "h", "i"),
            t(5, 3, "a", "d"),
            t(6, 3, "b", "e"),
            t(7, 3, "c", "f"),
            t(8, 3, "c", "c"),
            t(9, 3, "x", "y"),
        ];
        let d = run_depths(&tables);
        assert_eq!(d[&1], 2);
        assert_eq!(d[&2], 2);
        assert_eq!(d[&5], 4, "at c: 5, 6, 7 and 8");
        assert_eq!(d[&8], 4);
        assert_eq!(d[&9], 1);
        // Touching ends overlap (keys are inclusive).
        let touching = [t(1, 0, "a", "b"), t(2, 0, "b", "c")];
        assert_eq!(run_depths(&touching)[&2], 2);
    }

    #[test]
    fn tags_bound_the_runs_at_the_merge_levels_and_collect_garbage() {
        let mut tables: Vec<VTable<'static>> = (0..12).map(|n| t(n, 3, "a", "m")).collect();
        tables.push(t(20, 1, "a", "m"));
        tables.push(t(21, 3, "n", "z"));
        let mut garbage = t(30, 1, "x", "y");
        garbage.garbage_ratio = 0.5;
        tables.push(garbage);
        let tagged = tags(&tables, &merge_level_depths(&tables, 2), 10, 0.3);
        // Twelve runs over a–m at level 3: all of them join the next merge there.
        for n in 0..12 {
            assert_eq!(tagged.get(&n), Some(&Tag::Runs), "{n}");
        }
        assert!(!tagged.contains_key(&21), "alone over n–z");
        // Level 1 is not a merge level: it merges by level anyway.
        assert!(!tagged.contains_key(&20));
        assert_eq!(tagged.get(&30), Some(&Tag::Garbage));
        // At the limit exactly, nothing.
        let ten = &tables[..10];
        assert!(tags(ten, &merge_level_depths(ten, 2), 10, 0.3).is_empty());
        assert!(moves(&tables[12], 3, false), "level 1 into 3");
        assert!(!moves(&tables[0], 3, false));
        assert!(moves(&tables[0], 3, true));
    }

    #[test]
    fn range_max_matches_a_scan() {
        let values = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
        let m = RangeMax::new(&values);
        for lo in 0..values.len() {
            for hi in lo..=values.len() {
                let want = values[lo..hi].iter().copied().max().unwrap_or(0);
                assert_eq!(m.query(lo, hi), want, "{lo}..{hi}");
            }
        }
    }
}

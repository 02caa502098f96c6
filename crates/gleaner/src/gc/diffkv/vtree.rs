//! The vTree's shape and the merge plan, as pure functions of the tables (no I/O): which
//! compactions merge values (lazy merge), and which vTables join a merge besides the
//! shallower ones (scan-optimised merge: too many sorted runs over their keys; and vTables
//! mostly garbage, the authors' `kToGC`).
//!
//! Where the runs over a key exceed the limit, the authors tag every vTable there, so the next
//! merge through those keys rewrites all of their groups. Here a group whose live bytes exceed
//! those of all the newer groups over the key together is left out (unless it is needed to
//! bring the runs back within the limit): the large old group under many small new ones stays
//! where it is, and a group is rewritten again only once as much has come after it, so a value
//! is merged a logarithmic number of times, not once per limit's worth of new groups. In a deep
//! tree, where a merge covers a sliver of the key space and the groups over a key are alike in
//! size, the two rules differ little; in a shallow one, where every merge spans the key space,
//! the authors' rule rewrote the whole level each time the limit was passed (docs/benchmarks.md,
//! "DiffKV's run bound in shallow trees").
//!
//! Everything here is derived from the version each time, never remembered: the authors kept
//! their merge tags in memory and lost them at restart; a database reopened here plans the same
//! merges as it would have without the restart.

use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    /// Its sorted group at its level, in age order (larger: newer): the start of the job that
    /// wrote it and 0, or, for a table whose job is not known (metadata format 1), 0 and its
    /// own number (a group of its own, older than every known one).
    pub group: (u64, u64),
    /// Its live bytes (record bytes less garbage): what moving its values costs.
    pub live_bytes: u64,
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

/// The tables of `tables` (one or more levels) that join the next merge to bound the sorted
/// runs: at each key where more than `max_runs` tables of one level overlap, the tables there
/// of every group but those whose live bytes exceed all the newer groups' there together —
/// unless taking the newest of those is needed to bring the overlap to `max_runs` once the
/// merge writes its own group (module doc). O(n · d log d) for n tables overlapping d deep at
/// most.
pub fn run_tags(tables: &[VTable<'_>], max_runs: usize) -> BTreeSet<u64> {
    let mut by_level: BTreeMap<u32, Vec<&VTable<'_>>> = BTreeMap::new();
    for t in tables {
        by_level.entry(t.level).or_default().push(t);
    }
    let mut out = BTreeSet::new();
    for (_, mut level) in by_level {
        let mut group_bytes: HashMap<(u64, u64), u64> = HashMap::new();
        for t in &level {
            *group_bytes.entry(t.group).or_default() += t.live_bytes;
        }
        level.sort_unstable_by(|a, b| a.smallest.cmp(b.smallest));
        // Sweep the starts (the depth only rises at one), keeping the tables over the key.
        let mut active: Vec<&VTable<'_>> = Vec::new();
        let mut next = 0;
        while next < level.len() {
            let at = level[next].smallest;
            while next < level.len() && level[next].smallest == at {
                active.push(level[next]);
                next += 1;
            }
            active.retain(|t| t.largest >= at);
            if active.len() <= max_runs {
                continue;
            }
            let need = active.len() + 1 - max_runs;
            let mut groups: Vec<(u64, u64)> = active.iter().map(|t| t.group).collect();
            groups.sort_unstable_by(|a, b| b.cmp(a));
            groups.dedup();
            let tables_of = |g: (u64, u64)| active.iter().filter(|t| t.group == g).count();
            let (mut taken, mut left) = (Vec::new(), Vec::new());
            let (mut taken_tables, mut newer_bytes) = (0, 0u64);
            for g in groups {
                let bytes = group_bytes[&g];
                if newer_bytes > 0 && bytes > newer_bytes {
                    left.push(g);
                } else {
                    taken.push(g);
                    taken_tables += tables_of(g);
                }
                newer_bytes = newer_bytes.saturating_add(bytes);
            }
            for g in left {
                if taken_tables >= need {
                    break;
                }
                taken.push(g);
                taken_tables += tables_of(g);
            }
            out.extend(
                active
                    .iter()
                    .filter(|t| taken.contains(&t.group))
                    .map(|t| t.number),
            );
        }
    }
    out
}

/// The tables that join the next merge through their keys, and why: at the merge levels
/// (`level >= merge_from`; shallower ones merge by level anyway) those [`run_tags`] picks to
/// bound the runs at `max_runs`, and any table at least `gc_ratio` garbage.
pub fn tags(
    tables: &[VTable<'_>],
    merge_from: u32,
    max_runs: usize,
    gc_ratio: f64,
) -> BTreeMap<u64, Tag> {
    let deep: Vec<VTable<'_>> = tables
        .iter()
        .filter(|t| t.level >= merge_from)
        .copied()
        .collect();
    let mut out: BTreeMap<u64, Tag> = run_tags(&deep, max_runs)
        .into_iter()
        .map(|n| (n, Tag::Runs))
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
            group: (0, number),
            live_bytes: 100,
        }
    }

    /// A table of the group a job started at `at` wrote, with `live_bytes`.
    fn g(
        number: u64,
        lo: &'static str,
        hi: &'static str,
        at: u64,
        live_bytes: u64,
    ) -> VTable<'static> {
        VTable {
            group: (at, 0),
            live_bytes,
            ..t(number, 1, lo, hi)
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
        let tagged = tags(&tables, 2, 10, 0.3);
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
        assert!(tags(ten, 2, 10, 0.3).is_empty());
        assert!(moves(&tables[12], 3, false), "level 1 into 3");
        assert!(!moves(&tables[0], 3, false));
        assert!(moves(&tables[0], 3, true));
    }

    #[test]
    fn run_tags_take_the_small_new_groups_and_leave_the_large_old_one() {
        // A shallow tree's level: an old group of four tables over the key space (1,000 bytes
        // each), and ten groups of one table each over all of it, 100 bytes each: eleven runs
        // deep with a limit of 10. The ten small groups are taken (each no larger than the
        // ones newer together); the old group is larger than all ten and stays.
        let mut tables = vec![
            g(1, "a", "f", 10, 1000),
            g(2, "g", "m", 10, 1000),
            g(3, "n", "s", 10, 1000),
            g(4, "t", "z", 10, 1000),
        ];
        for i in 0..10 {
            tables.push(g(10 + i, "a", "z", 20 + i, 100));
        }
        let tagged = run_tags(&tables, 10);
        assert_eq!(tagged, (10..20).collect::<BTreeSet<u64>>());
        // At the limit exactly, nothing.
        assert!(run_tags(&tables[..13], 10).is_empty());
        // The authors' rule, had it been applied, would rewrite the old group too: every table
        // is eleven deep.
        assert!(run_depths(&tables).values().all(|&d| d == 11));
    }

    /// One table per group over "a".."z", sizes given oldest first (table and group `i`).
    fn stack(sizes: &[u64]) -> Vec<VTable<'static>> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| g(i as u64, "a", "z", i as u64, s))
            .collect()
    }

    #[test]
    fn run_tags_leave_a_group_larger_than_all_newer_ones() {
        // Newest first: 10 (the newest is always taken), 40 > 10 left, 50 ≤ 50 taken, 200 > 100
        // and 400 > 300 left, 1,000 > 700 left, then 1,000 ≤ 1,700 and the older ones taken.
        let tables = stack(&[1000, 1000, 1000, 1000, 1000, 1000, 400, 200, 50, 40, 10]);
        let want: BTreeSet<u64> = [0, 1, 2, 3, 4, 8, 10].into_iter().collect();
        assert_eq!(run_tags(&tables, 10), want);
        // A lower limit needs no more: seven tables taken leave five runs.
        assert_eq!(run_tags(&tables, 6), want);
        // Equal sizes: all taken, as the authors' rule would.
        assert_eq!(run_tags(&stack(&[5; 11]), 10).len(), 11);
    }

    #[test]
    fn run_tags_take_left_groups_newest_first_when_the_limit_needs_them() {
        // Each group larger than all newer ones together: only the newest would be taken, but
        // four runs over a limit of 2 need three taken (4 + 1 − 2), so the two newest of those
        // left join it.
        let tables = stack(&[10_000, 1000, 100, 10]);
        assert_eq!(run_tags(&tables, 2), [1, 2, 3].into_iter().collect());
        assert_eq!(run_tags(&tables, 3), [2, 3].into_iter().collect());
        assert!(run_tags(&tables, 4).is_empty());
    }

    #[test]
    fn run_tags_count_tables_per_key_and_group_across_keys() {
        // Two deep spots: over "c" eleven tables, over "x" only two. Only those over "c" are
        // candidates, and of a group that is taken, only its table over the deep spot is
        // tagged (its other table, over "x", is not deep).
        let mut tables = vec![g(1, "a", "d", 1, 10), g(2, "w", "y", 1, 10)];
        for i in 0..10 {
            tables.push(g(10 + i, "b", "e", 100 + i, 10));
        }
        tables.push(g(30, "x", "x", 500, 10));
        let tagged = run_tags(&tables, 10);
        assert!(tagged.contains(&1), "group 1's table over c: equal sizes, all taken");
        assert!(!tagged.contains(&2), "group 1's table over x is two deep");
        assert!(!tagged.contains(&30));
        assert_eq!(tagged.len(), 11);
        // Levels are counted apart: the same tables split over two levels are not deep.
        let split: Vec<_> = tables
            .iter()
            .enumerate()
            .map(|(i, t)| VTable {
                level: (i % 2) as u32,
                ..*t
            })
            .collect();
        assert!(run_tags(&split, 10).is_empty());
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

//! The compaction picker: a pure function from a version (plus what is already running) to the
//! next compaction to run. No I/O, no locks, so every decision is unit-testable.
//!
//! Leveled compaction: L0 is compacted into L1 when it holds `l0_compaction_trigger` tables;
//! level n ≥ 1 is compacted into n+1 when its size exceeds its target (`level_base_size` ×
//! `level_multiplier`^(n-1)). Levels are ranked by score = size ÷ target; the size of a table is
//! its [`FileMetaData::compensated_size`], the hook for garbage-aware priorities.

use std::sync::Arc;

use crate::key::compare_internal;
use crate::version::{FileMetaData, Version};

/// Limits the picker works with (derived from [`Options`](crate::options::Options)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerConfig {
    /// Number of levels.
    pub num_levels: usize,
    /// L0 tables that trigger an L0 compaction.
    pub l0_compaction_trigger: usize,
    /// Target size of L1.
    pub level_base_size: u64,
    /// Growth factor between levels.
    pub level_multiplier: u64,
    /// Target size of one output table.
    pub target_file_size: u64,
}

impl PickerConfig {
    /// Largest total input of one automatic compaction: 25 target-sized tables.
    pub fn max_compaction_bytes(&self) -> u64 {
        self.target_file_size.saturating_mul(25)
    }

    /// Largest overlap of one output table with the level below its output level before the
    /// output is cut: 10 target-sized tables (bounds the cost of compacting it later).
    pub fn max_grandparent_overlap(&self) -> u64 {
        self.target_file_size.saturating_mul(10)
    }

    /// Target size of `level` (≥ 1).
    pub fn level_target(&self, level: usize) -> u64 {
        let mut t = self.level_base_size;
        for _ in 1..level {
            t = t.saturating_mul(self.level_multiplier);
        }
        t
    }
}

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// L0 reached its table-count trigger.
    L0FileCount,
    /// A level exceeded its size target.
    LevelSize,
    /// `compact_range` asked for it.
    Manual,
    /// The GC policy marked a table for compaction (RocksDB BlobDB's forced GC).
    Forced,
}

/// A compaction that is running: the picker avoids any plan that would touch the same key range
/// of the same levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningCompaction {
    /// Identifies the job (assigned in start order, so "started before" is comparable).
    pub id: u64,
    /// Input level.
    pub level: usize,
    /// Output level.
    pub output_level: usize,
    /// Smallest user key of all inputs.
    pub lo: Vec<u8>,
    /// Largest user key of all inputs.
    pub hi: Vec<u8>,
}

/// A chosen compaction.
#[derive(Debug, Clone)]
pub struct CompactionPlan {
    /// Level the inputs come from.
    pub level: usize,
    /// Level the outputs go to.
    pub output_level: usize,
    /// Inputs from `level` (L0: oldest first).
    pub inputs: Vec<Arc<FileMetaData>>,
    /// Overlapping inputs from `output_level`.
    pub output_level_inputs: Vec<Arc<FileMetaData>>,
    /// Tables of the level below `output_level` overlapping the inputs (to cut outputs).
    pub grandparents: Vec<Arc<FileMetaData>>,
    /// The single input can move to `output_level` without being rewritten.
    pub trivial_move: bool,
    /// Why.
    pub reason: CompactionReason,
}

impl CompactionPlan {
    /// Every input table.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.inputs.iter().chain(self.output_level_inputs.iter())
    }

    /// Smallest and largest user key over all inputs.
    pub fn user_range(&self) -> (Vec<u8>, Vec<u8>) {
        let (lo, hi) = user_range(self.all_inputs());
        (lo.to_vec(), hi.to_vec())
    }

    /// Total bytes of all inputs.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.file_size).sum()
    }

    /// The entry that registers this plan as running job `id`.
    pub fn running(&self, id: u64) -> RunningCompaction {
        let (lo, hi) = self.user_range();
        RunningCompaction {
            id,
            level: self.level,
            output_level: self.output_level,
            lo,
            hi,
        }
    }
}

fn user_range<'a>(files: impl Iterator<Item = &'a Arc<FileMetaData>>) -> (&'a [u8], &'a [u8]) {
    let mut lo: Option<&[u8]> = None;
    let mut hi: Option<&[u8]> = None;
    for f in files {
        let s = f.smallest_user_key();
        let l = f.largest_user_key();
        lo = Some(lo.map_or(s, |x| x.min(s)));
        hi = Some(hi.map_or(l, |x| x.max(l)));
    }
    (lo.unwrap_or_default(), hi.unwrap_or_default())
}

/// Compaction scores per level (the last level has none: it cannot be compacted further).
pub fn level_scores(version: &Version, cfg: &PickerConfig) -> Vec<f64> {
    let mut scores = vec![0.0; cfg.num_levels];
    if cfg.num_levels < 2 {
        return scores;
    }
    scores[0] = version.table_count(0) as f64 / cfg.l0_compaction_trigger.max(1) as f64;
    for (level, score) in scores
        .iter_mut()
        .enumerate()
        .take(cfg.num_levels - 1)
        .skip(1)
    {
        let bytes: u64 = version
            .level_files(level)
            .map(|f| f.compensated_size())
            .sum();
        *score = bytes as f64 / cfg.level_target(level).max(1) as f64;
    }
    scores
}

fn conflicts(running: &[RunningCompaction], levels: [usize; 2], lo: &[u8], hi: &[u8]) -> bool {
    running.iter().any(|r| {
        let shares_level = levels.contains(&r.level) || levels.contains(&r.output_level);
        shares_level && !(hi < r.lo.as_slice() || lo > r.hi.as_slice())
    })
}

/// Completes a plan for `inputs` at `level`: adds the overlapping tables of the output level and
/// the grandparents; `None` when it would collide with a running compaction.
fn complete(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<FileMetaData>>,
    reason: CompactionReason,
) -> Option<CompactionPlan> {
    let (lo, hi) = user_range(inputs.iter());
    let output_level_inputs = if output_level == level {
        Vec::new()
    } else {
        version.overlapping_files(output_level, Some(lo), Some(hi))
    };
    let (lo, hi) = user_range(inputs.iter().chain(output_level_inputs.iter()));
    if conflicts(running, [level, output_level], lo, hi) {
        return None;
    }
    let grandparents = if output_level + 1 < cfg.num_levels {
        version.overlapping_files(output_level + 1, Some(lo), Some(hi))
    } else {
        Vec::new()
    };
    let grandparent_bytes: u64 = grandparents.iter().map(|f| f.file_size).sum();
    let trivial_move = reason != CompactionReason::Manual
        && output_level != level
        && inputs.len() == 1
        && output_level_inputs.is_empty()
        && grandparent_bytes <= cfg.max_grandparent_overlap();
    Some(CompactionPlan {
        level,
        output_level,
        inputs,
        output_level_inputs,
        grandparents,
        trivial_move,
        reason,
    })
}

fn pick_l0(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
) -> Option<CompactionPlan> {
    // Any running L0 compaction owns L0: taking newer L0 tables past it would let them land
    // below older data.
    if running.iter().any(|r| r.level == 0) {
        return None;
    }
    // Oldest first; a prefix of the oldest tables can move down safely, newer ones stay above.
    let mut files: Vec<_> = version.level_files(0).cloned().collect();
    files.reverse();
    let mut total = 0u64;
    let mut inputs = Vec::new();
    for f in files {
        if !inputs.is_empty() && total + f.file_size > cfg.max_compaction_bytes() {
            break;
        }
        total += f.file_size;
        inputs.push(f);
    }
    complete(
        version,
        cfg,
        running,
        0,
        1,
        inputs,
        CompactionReason::L0FileCount,
    )
}

fn pick_level(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
    level: usize,
    pointer: Option<&[u8]>,
) -> Option<CompactionPlan> {
    let files: Vec<_> = version.level_files(level).cloned().collect();
    // Round robin: start after the key the previous compaction of this level ended at.
    let start = pointer.map_or(0, |p| {
        files.partition_point(|f| compare_internal(&f.largest, p).is_le())
    });
    (0..files.len())
        .map(|i| (start + i) % files.len())
        .find_map(|i| {
            complete(
                version,
                cfg,
                running,
                level,
                level + 1,
                vec![Arc::clone(&files[i])],
                CompactionReason::LevelSize,
            )
        })
}

/// Picks the most urgent compaction, or `None` when no level needs one or every candidate
/// collides with a running compaction. `pointers[level]` is the round-robin cursor of a level.
pub fn pick_compaction(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
    pointers: &[Option<Vec<u8>>],
) -> Option<CompactionPlan> {
    let scores = level_scores(version, cfg);
    let mut order: Vec<usize> = (0..scores.len()).filter(|&l| scores[l] >= 1.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order.into_iter().find_map(|level| {
        if level == 0 {
            pick_l0(version, cfg, running)
        } else {
            let pointer = pointers.get(level).and_then(|p| p.as_deref());
            pick_level(version, cfg, running, level, pointer)
        }
    })
}

/// Plans a manual compaction of the tables of `level` overlapping `[lo, hi]` (user keys,
/// inclusive; `None` unbounded) into `output_level` (the next level, or `level` itself to
/// rewrite the bottom of the tree in place). Returns `Ok(None)` when the level has no such
/// table, `Err(())` when a running compaction collides (retry later).
#[expect(
    clippy::result_unit_err,
    reason = "the only failure is 'busy'; callers retry"
)]
pub fn plan_manual(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
    level: usize,
    output_level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Result<Option<CompactionPlan>, ()> {
    debug_assert!(output_level == level || output_level == level + 1);
    debug_assert!(output_level < cfg.num_levels);
    let mut inputs = version.overlapping_files(level, lo, hi);
    if inputs.is_empty() {
        return Ok(None);
    }
    if level == 0 {
        if running.iter().any(|r| r.level == 0) {
            return Err(());
        }
        // All of L0, oldest first: a subset could leave older overlapping data above newer.
        inputs = version.level_files(0).rev().cloned().collect();
    }
    complete(
        version,
        cfg,
        running,
        level,
        output_level,
        inputs,
        CompactionReason::Manual,
    )
    .map(Some)
    .ok_or(())
}

/// A compaction of key table `number`, which the GC policy marked: into L1 from L0, in place
/// (with the tables of its level overlapping its range) deeper down. `None` when the table is
/// not in the version or a running compaction touches its range (it is tried again later).
pub fn plan_forced(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
    number: u64,
) -> Option<CompactionPlan> {
    let (level, f) = version.all_files().find(|(_, f)| f.number == number)?;
    let output_level = if level == 0 {
        1.min(cfg.num_levels - 1)
    } else {
        level
    };
    let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
    let mut plan = plan_manual(
        version,
        cfg,
        running,
        level,
        output_level,
        Some(lo),
        Some(hi),
    )
    .ok()
    .flatten()?;
    plan.reason = CompactionReason::Forced;
    // Rewritten, not moved: the point is to rewrite the entries.
    plan.trivial_move = false;
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use crate::version::{NewTable, VersionEdit};

    fn cfg() -> PickerConfig {
        PickerConfig {
            num_levels: 4,
            l0_compaction_trigger: 2,
            level_base_size: 1000,
            level_multiplier: 10,
            target_file_size: 100,
        }
    }

    fn t(level: u32, number: u64, lo: &str, hi: &str, size: u64, seq: u64) -> NewTable {
        NewTable {
            level,
            run: 0,
            meta: crate::version::TableMeta {
                number,
                file_size: size,
                smallest: make_internal_key(lo.as_bytes(), seq, ValueKind::Value),
                largest: make_internal_key(hi.as_bytes(), seq, ValueKind::Value),
                smallest_seq: seq,
                largest_seq: seq,
                num_entries: 1,
                num_deletions: 0,
                dependence: Vec::new(),
                aliases: 0,
            },
        }
    }

    fn version(tables: Vec<NewTable>) -> Version {
        Version::new(4)
            .apply(
                &VersionEdit {
                    new_tables: tables,
                    ..Default::default()
                },
                "test",
                0,
            )
            .expect("valid version")
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
        files.iter().map(|f| f.number).collect()
    }

    #[test]
    fn nothing_to_do_below_the_triggers() {
        let v = version(vec![t(0, 1, "a", "b", 10, 1), t(1, 2, "a", "z", 999, 0)]);
        assert!(pick_compaction(&v, &cfg(), &[], &[]).is_none());
    }

    #[test]
    fn l0_takes_all_tables_oldest_first_with_overlapping_l1() {
        let v = version(vec![
            t(0, 1, "c", "f", 10, 1),
            t(0, 2, "a", "d", 10, 2),
            t(1, 3, "a", "b", 10, 0),
            t(1, 4, "e", "g", 10, 0),
            t(1, 5, "x", "y", 10, 0),
            t(2, 6, "a", "z", 10, 0),
        ]);
        let p = pick_compaction(&v, &cfg(), &[], &[]).expect("L0 over trigger");
        assert_eq!(
            (p.level, p.output_level, p.reason),
            (0, 1, CompactionReason::L0FileCount)
        );
        assert_eq!(numbers(&p.inputs), vec![1, 2]);
        assert_eq!(numbers(&p.output_level_inputs), vec![3, 4]);
        assert_eq!(numbers(&p.grandparents), vec![6]);
        assert!(!p.trivial_move);
        assert_eq!(p.user_range(), (b"a".to_vec(), b"g".to_vec()));
    }

    #[test]
    fn the_level_most_over_target_goes_first_and_moves_trivially_when_alone() {
        let v = version(vec![t(1, 1, "a", "c", 3000, 1), t(2, 2, "x", "z", 5000, 1)]);
        let scores = level_scores(&v, &cfg());
        assert_eq!(scores[1], 3.0);
        assert_eq!(scores[2], 0.5);
        let p = pick_compaction(&v, &cfg(), &[], &[]).expect("L1 over target");
        assert_eq!((p.level, p.output_level), (1, 2));
        assert!(
            p.trivial_move,
            "no overlap below and little grandparent overlap"
        );
    }

    #[test]
    fn round_robin_starts_after_the_pointer_and_skips_busy_ranges() {
        let v = version(vec![
            t(1, 1, "a", "b", 600, 1),
            t(1, 2, "c", "d", 600, 1),
            t(1, 3, "e", "f", 600, 1),
            t(2, 4, "c", "c", 10, 1),
        ]);
        let pointers = vec![None, Some(make_internal_key(b"b", 1, ValueKind::Value))];
        let p = pick_compaction(&v, &cfg(), &[], &pointers).expect("pick");
        assert_eq!(numbers(&p.inputs), vec![2]);
        assert_eq!(numbers(&p.output_level_inputs), vec![4]);
        let busy = vec![p.running(1)];
        let q = pick_compaction(&v, &cfg(), &busy, &pointers).expect("another file");
        assert_eq!(numbers(&q.inputs), vec![3]);
        let everything = vec![RunningCompaction {
            id: 9,
            level: 1,
            output_level: 2,
            lo: b"a".to_vec(),
            hi: b"z".to_vec(),
        }];
        assert!(pick_compaction(&v, &cfg(), &everything, &pointers).is_none());
    }

    #[test]
    fn l0_waits_for_a_running_l0_compaction() {
        let v = version(vec![t(0, 1, "a", "b", 10, 1), t(0, 2, "c", "d", 10, 2)]);
        let running = vec![RunningCompaction {
            id: 9,
            level: 0,
            output_level: 1,
            lo: b"x".to_vec(),
            hi: b"y".to_vec(),
        }];
        assert!(pick_compaction(&v, &cfg(), &running, &[]).is_none());
    }

    #[test]
    fn l0_input_is_capped_to_the_oldest_tables() {
        let c = PickerConfig {
            target_file_size: 4,
            ..cfg()
        };
        // max_compaction_bytes = 100; each table 40 bytes: the two oldest fit.
        let v = version(vec![
            t(0, 1, "a", "b", 40, 1),
            t(0, 2, "a", "b", 40, 2),
            t(0, 3, "a", "b", 40, 3),
        ]);
        let p = pick_compaction(&v, &c, &[], &[]).expect("pick");
        assert_eq!(numbers(&p.inputs), vec![1, 2]);
    }

    #[test]
    fn manual_plans_cover_the_range_and_the_bottom_can_compact_into_itself() {
        let v = version(vec![
            t(0, 1, "a", "b", 10, 5),
            t(0, 2, "y", "z", 10, 6),
            t(3, 3, "a", "c", 10, 1),
            t(3, 4, "m", "n", 10, 1),
        ]);
        let p = plan_manual(&v, &cfg(), &[], 0, 1, Some(b"a"), Some(b"b"))
            .expect("free")
            .expect("some");
        assert_eq!(numbers(&p.inputs), vec![1, 2], "all of L0");
        assert!(!p.trivial_move);
        let p = plan_manual(&v, &cfg(), &[], 3, 3, Some(b"b"), Some(b"m"))
            .expect("free")
            .expect("some");
        assert_eq!((p.level, p.output_level), (3, 3));
        assert_eq!(numbers(&p.inputs), vec![3, 4]);
        assert!(
            plan_manual(&v, &cfg(), &[], 1, 2, None, None)
                .expect("free")
                .is_none()
        );
        let busy = vec![p.running(1)];
        assert!(plan_manual(&v, &cfg(), &busy, 3, 3, Some(b"a"), Some(b"a")).is_err());
    }
}

//! Leveled compaction (LevelDB's, as RocksDB runs it): L0 is compacted into L1 when it holds
//! `l0_compaction_trigger` tables; level n ≥ 1 is compacted into n+1 when its size exceeds its
//! target (`level_base_size` × `level_multiplier`^(n-1)). Levels are ranked by score = size ÷
//! target; the size of a table is its [`FileMetaData::compensated_size`], the hook for
//! garbage-aware priorities. Each level from L1 down is one sorted run; a level holding several
//! (a database that ran tiered compaction) is merged into one before anything else touches it.

use std::sync::Arc;

use super::plan::{
    CompactionPlan, CompactionReason, PickerConfig, RunInputs, RunningCompaction, user_range,
};
use super::strategy::{Choice, CompactionStrategy, ManualStep, PlanContext, merge_runs};
use crate::key::compare_internal;
use crate::options::CompactionStyle;
use crate::version::{FileMetaData, RunId, SortedRun, Version};

/// The leveled strategy. Its parameters are the tree's shape options ([`PickerConfig`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Leveled;

impl CompactionStrategy for Leveled {
    fn style(&self) -> CompactionStyle {
        CompactionStyle::Leveled
    }

    fn choose(&self, version: &Version, ctx: &PlanContext<'_>) -> Choice {
        Choice::from_plan(pick_compaction(version, ctx.cfg, ctx.running, ctx.pointers))
    }

    fn manual(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> ManualStep {
        // Background compactions keep running and may push files below the deepest level seen
        // so far; reading the deepest level afresh at every step makes the pass follow them, so
        // every version in the range ends up merged in the bottom level.
        let Some(deepest) = version.deepest_nonempty_level() else {
            return ManualStep::Done;
        };
        if level > deepest {
            return ManualStep::Done;
        }
        // Each level above the deepest is compacted into the next; the deepest in place.
        let output_level = if level == deepest { level } else { level + 1 };
        for l in [level, output_level] {
            if several_runs(version, l) {
                return match merge_level_runs(version, ctx.cfg, ctx.running, l) {
                    Some(plan) => ManualStep::Run {
                        plan,
                        next_level: Some(level),
                    },
                    None => ManualStep::Busy,
                };
            }
        }
        match plan_manual(version, ctx.cfg, ctx.running, level, output_level, lo, hi) {
            Ok(None) => ManualStep::Next,
            Ok(Some(plan)) => ManualStep::Run {
                plan,
                next_level: Some(level + 1),
            },
            Err(()) => ManualStep::Busy,
        }
    }

    fn forced(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        number: u64,
    ) -> Option<CompactionPlan> {
        plan_forced(version, ctx.cfg, ctx.running, number)
    }

    fn scores(&self, version: &Version, cfg: &PickerConfig) -> Vec<f64> {
        level_scores(version, cfg)
    }
}

/// Compaction scores per level (the last level has none: it cannot be compacted further).
fn level_scores(version: &Version, cfg: &PickerConfig) -> Vec<f64> {
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
    running
        .iter()
        .any(|r| r.touches((levels[0], levels[1]), lo, hi))
}

/// Whether `level` holds more than the one run leveled compaction keeps there (L0's tables are
/// runs of their own, as always).
fn several_runs(version: &Version, level: usize) -> bool {
    level > 0 && version.runs(level).len() > 1
}

/// The id of the one run of `level` (0 when the level is empty: the run outputs start).
fn run_of(version: &Version, level: usize) -> RunId {
    version.runs(level).first().map_or(0, SortedRun::id)
}

/// Merges the runs of `level` into one, in place; `None` when a running compaction touches the
/// level. Not bounded by `max_compaction_bytes`: until it is done nothing else may touch the
/// level (a one-time cost after a switch from tiered compaction).
fn merge_level_runs(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
    level: usize,
) -> Option<CompactionPlan> {
    let runs = version.runs(level);
    let oldest = runs.last()?.id();
    let (lo, hi) = user_range(runs.iter().flat_map(|r| r.files()));
    if conflicts(running, [level, level], lo, hi) {
        return None;
    }
    let grandparents = grandparents(version, cfg, level, lo, hi);
    let stretch: Vec<(usize, &SortedRun)> = runs.iter().map(|r| (level, r)).collect();
    Some(merge_runs(
        &stretch,
        level,
        oldest,
        grandparents,
        CompactionReason::MergeRuns,
    ))
}

/// The tables of the level below `output_level` overlapping `[lo, hi]`: where outputs are cut,
/// so that compacting one of them later never reads too much of that level.
fn grandparents(
    version: &Version,
    cfg: &PickerConfig,
    output_level: usize,
    lo: &[u8],
    hi: &[u8],
) -> Vec<Arc<FileMetaData>> {
    if output_level + 1 < cfg.num_levels {
        version.overlapping_files(output_level + 1, Some(lo), Some(hi))
    } else {
        Vec::new()
    }
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
    let grandparents = grandparents(version, cfg, output_level, lo, hi);
    let grandparent_bytes: u64 = grandparents.iter().map(|f| f.file_size).sum();
    let trivial_move = reason != CompactionReason::Manual
        && output_level != level
        && inputs.len() == 1
        && output_level_inputs.is_empty()
        && grandparent_bytes <= cfg.max_grandparent_overlap();
    let compact_pointer = inputs
        .iter()
        .map(|f| &f.largest)
        .max_by(|a, b| compare_internal(a, b))
        .map(|last| (level, last.clone()));
    // Rewritten in place, L0's outputs are runs of their own: only what is older than the
    // oldest input lies below them.
    let output_run = if output_level == 0 {
        version
            .runs(0)
            .iter()
            .rev()
            .find(|r| inputs.iter().any(|f| f.number == r.id()))
            .map_or(0, SortedRun::id)
    } else {
        run_of(version, output_level)
    };
    let mut runs: Vec<RunInputs> = if level == 0 {
        inputs
            .into_iter()
            .map(|f| RunInputs {
                level,
                run: f.number,
                files: vec![f],
            })
            .collect()
    } else {
        vec![RunInputs {
            level,
            run: run_of(version, level),
            files: inputs,
        }]
    };
    if !output_level_inputs.is_empty() {
        runs.push(RunInputs {
            level: output_level,
            run: run_of(version, output_level),
            files: output_level_inputs,
        });
    }
    Some(CompactionPlan {
        inputs: runs,
        output_level,
        output_run,
        grandparents,
        trivial_move,
        one_output_table: false,
        reason,
        compact_pointer,
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
    let mut total = 0u64;
    let mut inputs = Vec::new();
    for f in version.level_files(0).rev() {
        if !inputs.is_empty() && total + f.file_size > cfg.max_compaction_bytes() {
            break;
        }
        total += f.file_size;
        inputs.push(Arc::clone(f));
    }
    if merges_within_l0(version, cfg, &inputs, total) {
        let mut plan = complete(
            version,
            cfg,
            running,
            0,
            0,
            inputs,
            CompactionReason::L0Merge,
        )?;
        // In L0 each table is a run of its own, so the merge writes one table; it cuts nothing
        // at L1's boundaries, and L0 has no round-robin cursor to move.
        plan.one_output_table = true;
        plan.grandparents.clear();
        plan.compact_pointer = None;
        return Some(plan);
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

/// Whether L0's due `inputs` (`bytes` in all) are merged among themselves into one L0 table
/// instead of into L1: while they hold less than 1/`level_multiplier` of the L1 bytes they
/// overlap, and the merged table stays within one target-sized table.
///
/// Why: an L0→L1 compaction rewrites every L1 table its inputs overlap. With separated values
/// a flush writes a key table a few hundred times smaller than the memtable, so four of them
/// would rewrite all of L1 (a few hundred times their bytes) to move them down. Merged in L0
/// first, they go down once they hold a tenth of what they rewrite there, the ratio between any
/// two deeper levels. A model of this rule (four tables a round, L1 at its target) rewrites each
/// L0 byte 25 times where L1 is 220 times a flush's key table (the paper's shape at 8 KiB
/// values), against 221 without it; 13 against 51 at 50 times; at 5 times (values kept in the
/// tree) the rule does not fire. The size cap keeps the output one ordinary table (and the rule
/// from rewriting a large L0 table again and again when L1 is far larger still).
fn merges_within_l0(
    version: &Version,
    cfg: &PickerConfig,
    inputs: &[Arc<FileMetaData>],
    bytes: u64,
) -> bool {
    if inputs.len() < 2 || bytes > cfg.target_file_size {
        return false;
    }
    let (lo, hi) = user_range(inputs.iter());
    let below: u64 = version
        .overlapping_files(1, Some(lo), Some(hi))
        .iter()
        .map(|f| f.file_size)
        .sum();
    bytes.saturating_mul(cfg.level_multiplier) < below
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
/// A level holding several runs is merged into one first; until then no other compaction reads
/// or writes it.
fn pick_compaction(
    version: &Version,
    cfg: &PickerConfig,
    running: &[RunningCompaction],
    pointers: &[Option<Vec<u8>>],
) -> Option<CompactionPlan> {
    let crowded: Vec<usize> = (1..cfg.num_levels)
        .filter(|&l| several_runs(version, l))
        .collect();
    if let Some(plan) = crowded
        .iter()
        .find_map(|&l| merge_level_runs(version, cfg, running, l))
    {
        return Some(plan);
    }
    let scores = level_scores(version, cfg);
    let mut order: Vec<usize> = (0..scores.len())
        .filter(|&l| scores[l] >= 1.0 && !crowded.contains(&l) && !crowded.contains(&(l + 1)))
        .collect();
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
fn plan_manual(
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
/// not in the version, its level (or L1, for an L0 table) still holds several runs, or a running
/// compaction touches its range (it is tried again later).
fn plan_forced(
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
    if several_runs(version, level) || several_runs(version, output_level) {
        return None;
    }
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
    use crate::version::NewTable;

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
        crate::version::test_table(level, 0, number, (lo, hi), size, seq..=seq)
    }

    /// `t` in run `run`.
    fn in_run(run: u64, mut table: NewTable) -> NewTable {
        table.run = run;
        table
    }

    fn version(tables: Vec<NewTable>) -> Version {
        crate::version::test_version(4, tables)
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
        files.iter().map(|f| f.number).collect()
    }

    /// The plan's input tables from `level`.
    fn from_level(p: &CompactionPlan, level: usize) -> Vec<u64> {
        p.input_tables()
            .filter(|(l, _)| *l == level)
            .map(|(_, f)| f.number)
            .collect()
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
            (p.level(), p.output_level, p.reason),
            (0, 1, CompactionReason::L0FileCount)
        );
        assert_eq!(from_level(&p, p.level()), vec![1, 2]);
        assert_eq!(from_level(&p, p.output_level), vec![3, 4]);
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
        assert_eq!((p.level(), p.output_level), (1, 2));
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
        assert_eq!(from_level(&p, p.level()), vec![2]);
        assert_eq!(from_level(&p, p.output_level), vec![4]);
        let busy = vec![p.running(1)];
        let q = pick_compaction(&v, &cfg(), &busy, &pointers).expect("another file");
        assert_eq!(from_level(&q, q.level()), vec![3]);
        let everything = vec![RunningCompaction {
            id: 9,
            level: 1,
            output_level: 2,
            lo: b"a".to_vec(),
            hi: b"z".to_vec(),
            runs: Vec::new(),
        }];
        assert!(pick_compaction(&v, &cfg(), &everything, &pointers).is_none());
    }

    /// Three small L0 tables over an L1 of `l1` bytes in their range (and one table past it).
    fn small_l0_over(l1: u64) -> Version {
        version(vec![
            t(0, 1, "a", "m", 20, 1),
            t(0, 2, "c", "z", 20, 2),
            t(0, 3, "x", "z", 20, 3),
            t(1, 4, "a", "k", l1 / 2, 0),
            t(1, 5, "l", "z", l1 - l1 / 2, 0),
            t(1, 6, "zz", "zz", 300, 0),
        ])
    }

    #[test]
    fn small_l0_tables_merge_among_themselves_until_worth_the_l1_bytes_below() {
        let c = PickerConfig {
            l0_compaction_trigger: 3,
            ..cfg()
        };
        // 60 bytes of L0 over 601 bytes of L1: below a tenth, so they merge within L0, into
        // one table in the place of the oldest; and a compaction below L0 is not in the way.
        let v = small_l0_over(601);
        let below = vec![RunningCompaction {
            id: 9,
            level: 1,
            output_level: 2,
            lo: b"a".to_vec(),
            hi: b"z".to_vec(),
            runs: Vec::new(),
        }];
        let p = pick_compaction(&v, &c, &below, &[]).expect("L0 over its trigger");
        assert_eq!(
            (p.level(), p.output_level, p.reason),
            (0, 0, CompactionReason::L0Merge)
        );
        assert_eq!(from_level(&p, 0), vec![1, 2, 3], "oldest first");
        assert!(from_level(&p, 1).is_empty(), "L1 is not read");
        assert_eq!(p.output_run, 1, "the run of the oldest input");
        assert!(p.one_output_table && !p.trivial_move);
        assert!(p.grandparents.is_empty() && p.compact_pointer.is_none());
        // At a tenth of the overlapped L1 bytes they go down: 60 × 10 = 600 (the table past
        // their range does not count).
        let p = pick_compaction(&small_l0_over(600), &c, &[], &[]).expect("due");
        assert_eq!(
            (p.output_level, p.reason),
            (1, CompactionReason::L0FileCount)
        );
        assert_eq!(from_level(&p, 1), vec![4, 5]);
        // A merge that would outgrow one target-sized table goes down too.
        let small_target = PickerConfig {
            target_file_size: 59,
            ..c.clone()
        };
        let p = pick_compaction(&small_l0_over(601), &small_target, &[], &[]).expect("due");
        assert_eq!(p.reason, CompactionReason::L0FileCount);
        // One table alone has nothing to merge with.
        let one = PickerConfig {
            l0_compaction_trigger: 1,
            ..c
        };
        let v = version(vec![t(0, 1, "a", "b", 5, 1), t(1, 2, "a", "z", 900, 0)]);
        let p = pick_compaction(&v, &one, &[], &[]).expect("due");
        assert_eq!(p.reason, CompactionReason::L0FileCount);
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
            runs: Vec::new(),
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
        assert_eq!(from_level(&p, p.level()), vec![1, 2]);
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
        assert_eq!(from_level(&p, p.level()), vec![1, 2], "all of L0");
        assert!(!p.trivial_move);
        let p = plan_manual(&v, &cfg(), &[], 3, 3, Some(b"b"), Some(b"m"))
            .expect("free")
            .expect("some");
        assert_eq!((p.level(), p.output_level), (3, 3));
        assert_eq!(from_level(&p, p.level()), vec![3, 4]);
        assert!(
            plan_manual(&v, &cfg(), &[], 1, 2, None, None)
                .expect("free")
                .is_none()
        );
        let busy = vec![p.running(1)];
        assert!(plan_manual(&v, &cfg(), &busy, 3, 3, Some(b"a"), Some(b"a")).is_err());
    }

    /// L2 holds two runs (the database ran tiered compaction); L0 is over its trigger and L1
    /// over its target.
    fn crowded() -> Version {
        version(vec![
            t(0, 1, "a", "b", 10, 50),
            t(0, 2, "a", "b", 10, 51),
            t(1, 3, "x", "z", 5000, 40),
            in_run(7, t(2, 4, "a", "m", 10, 20)),
            in_run(9, t(2, 5, "c", "z", 10, 10)),
        ])
    }

    use crate::compaction::strategy::test_context as ctx;

    #[test]
    fn a_level_with_several_runs_is_merged_into_one_in_place_first() {
        let v = crowded();
        let c = cfg();
        let Choice::Merge(p) = Leveled.choose(&v, &ctx(&c, &[])) else {
            panic!("a merge is due");
        };
        assert_eq!(p.reason, CompactionReason::MergeRuns);
        assert_eq!((p.level(), p.output_level, p.output_run), (2, 2, 9));
        assert_eq!(from_level(&p, 2), vec![4, 5], "both runs, whole");
        assert_eq!(p.inputs.len(), 2);
        // While the merge waits for a compaction in its way, nothing else reads or writes L2:
        // L1 (over target, away from that compaction's keys) must wait too; L0 may go.
        let in_the_way = RunningCompaction {
            id: 1,
            level: 2,
            output_level: 3,
            lo: b"a".to_vec(),
            hi: b"b".to_vec(),
            runs: Vec::new(),
        };
        let busy = vec![in_the_way.clone()];
        let q = pick_compaction(&v, &c, &busy, &[]).expect("L0 is free");
        assert_eq!((q.level(), q.output_level), (0, 1));
        let busy = vec![in_the_way, q.running(2)];
        assert!(
            pick_compaction(&v, &c, &busy, &[]).is_none(),
            "L1 into the crowded L2 waits"
        );
    }

    #[test]
    fn manual_and_forced_compactions_merge_a_crowded_level_first() {
        let v = crowded();
        let c = cfg();
        match Leveled.manual(&v, &ctx(&c, &[]), 1, None, None) {
            ManualStep::Run { plan, next_level } => {
                assert_eq!(plan.reason, CompactionReason::MergeRuns);
                assert_eq!(plan.output_level, 2);
                assert_eq!(next_level, Some(1), "then L1 again");
            }
            other => panic!("{other:?}"),
        }
        let busy = vec![RunningCompaction {
            id: 1,
            level: 2,
            output_level: 3,
            lo: b"a".to_vec(),
            hi: b"b".to_vec(),
            runs: Vec::new(),
        }];
        assert!(matches!(
            Leveled.manual(&v, &ctx(&c, &busy), 1, None, None),
            ManualStep::Busy
        ));
        assert!(
            plan_forced(&v, &c, &[], 4).is_none(),
            "its run is merged first"
        );
        assert!(plan_forced(&v, &c, &[], 3).is_some(), "L1 has one run");
    }
}

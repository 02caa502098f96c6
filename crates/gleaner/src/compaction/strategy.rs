//! The compaction strategy: the one place where the shape of the index tree is decided.
//!
//! A strategy is an object chosen per database today (option `compaction_style`) and built to
//! be chosen per partition of the index tree later (DP-KV's hot leveled and cold tiered
//! partitions): it holds its own parameters, and every decision is a pure function of a
//! version, the tree's shape options and the compactions running, so each is unit-testable
//! without I/O. Leveled compaction (`compaction/leveled.rs`) and size-tiered compaction
//! (`compaction/tiered.rs`) are its implementations; docs/architecture.md, "Compaction
//! strategies", states their rules.
//!
//! What every strategy must keep (docs/architecture.md, "Sorted runs"): a plan merges a
//! contiguous stretch of runs in search order (or key-range slices of runs that are adjacent in
//! search order for every key in the range), and its outputs take the stretch's place; and the
//! runs of a level keep disjoint sequence ranges, which `Version::apply` checks.

use std::fmt;

use std::sync::Arc;

use super::plan::{CompactionPlan, CompactionReason, PickerConfig, RunInputs, RunningCompaction};
use crate::options::CompactionStyle;
use crate::version::{FileMetaData, RunId, SortedRun, Version};

/// What a strategy plans against besides the version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanContext<'a> {
    /// The tree's shape options.
    pub cfg: &'a PickerConfig,
    /// The compactions running now: a plan never touches what they touch.
    pub running: &'a [RunningCompaction],
    /// Per level, the round-robin cursor: the largest key of the level's last compaction
    /// (leveled; persisted in the manifest).
    pub pointers: &'a [Option<Vec<u8>>],
}

/// What a strategy chooses to do next.
#[derive(Debug)]
pub(crate) enum Choice {
    /// Nothing is due, or everything due collides with a running compaction.
    Nothing,
    /// Merge the plan's inputs into new tables.
    Merge(CompactionPlan),
    /// Move the plan's one input table to the output level unchanged.
    Move(CompactionPlan),
}

impl Choice {
    /// The choice that runs `plan`, or nothing.
    pub(crate) fn from_plan(plan: Option<CompactionPlan>) -> Self {
        match plan {
            Some(p) if p.trivial_move => Choice::Move(p),
            Some(p) => Choice::Merge(p),
            None => Choice::Nothing,
        }
    }

    /// The plan to run, if any.
    pub(crate) fn into_plan(self) -> Option<CompactionPlan> {
        match self {
            Choice::Merge(p) | Choice::Move(p) => Some(p),
            Choice::Nothing => None,
        }
    }
}

/// One step of a manual compaction (`compact_range`), which runs step after step from level 0
/// until a strategy says it is done.
#[derive(Debug)]
pub(crate) enum ManualStep {
    /// Everything in the range is compacted.
    Done,
    /// Nothing to do at this level: go on at the next one.
    Next,
    /// A running compaction is in the way: wait for it, then ask again.
    Busy,
    /// Run the plan, then go on at `next_level` (or stop when it is `None`).
    Run {
        /// The compaction.
        plan: CompactionPlan,
        /// Where the next step starts.
        next_level: Option<usize>,
    },
}

/// A compaction strategy (fjall's lsm-tree `CompactionStrategy` is the model). Implementations
/// hold their own parameters; every method is pure.
pub(crate) trait CompactionStrategy: Send + Sync + fmt::Debug {
    /// The style it implements (option `compaction_style`).
    fn style(&self) -> CompactionStyle;

    /// The next compaction the tree's shape asks for.
    fn choose(&self, version: &Version, ctx: &PlanContext<'_>) -> Choice;

    /// The step of a manual compaction of user keys `[lo, hi]` (inclusive; `None` unbounded)
    /// that starts at `level`: every version in the range ends up merged, with every tombstone
    /// and overwritten version no snapshot needs gone.
    fn manual(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> ManualStep;

    /// A compaction rewriting key table `number`, which the GC policy marked; `None` when the
    /// table is not in the version or a running compaction is in the way (it is tried again
    /// later).
    fn forced(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        number: u64,
    ) -> Option<CompactionPlan>;

    /// Compaction urgency per level for `stats()` (≥ 1 means due).
    fn scores(&self, version: &Version, cfg: &PickerConfig) -> Vec<f64>;
}

/// For tests: the context of planning against `running` with no round-robin cursors.
#[cfg(test)]
pub(crate) fn test_context<'a>(
    cfg: &'a PickerConfig,
    running: &'a [RunningCompaction],
) -> PlanContext<'a> {
    PlanContext {
        cfg,
        running,
        pointers: &[],
    }
}

/// A plan merging every table of `runs` (each `(level, run)`) into run `output_run` of
/// `output_level`.
pub(crate) fn merge_runs(
    runs: &[(usize, &SortedRun)],
    output_level: usize,
    output_run: RunId,
    grandparents: Vec<Arc<FileMetaData>>,
    reason: CompactionReason,
) -> CompactionPlan {
    CompactionPlan {
        inputs: runs
            .iter()
            .map(|(level, r)| RunInputs {
                level: *level,
                run: r.id(),
                files: r.files().to_vec(),
            })
            .collect(),
        output_level,
        output_run,
        grandparents,
        trivial_move: false,
        one_output_table: false,
        reason,
        compact_pointer: None,
    }
}

/// A plan rewriting `files` of run `run` of `level` in place: the outputs cover no more keys
/// and no more sequence numbers than the inputs, so the run stays disjoint in both.
pub(crate) fn rewrite_in_place(
    level: usize,
    run: RunId,
    files: Vec<Arc<FileMetaData>>,
    reason: CompactionReason,
) -> CompactionPlan {
    CompactionPlan {
        inputs: vec![RunInputs { level, run, files }],
        output_level: level,
        output_run: run,
        grandparents: Vec::new(),
        trivial_move: false,
        one_output_table: false,
        reason,
        compact_pointer: None,
    }
}

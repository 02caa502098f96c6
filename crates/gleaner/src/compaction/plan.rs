//! Compaction plans: what a compaction strategy chooses and a compaction job runs, and the tree
//! shape and running compactions the strategies plan against.

use std::sync::Arc;

use crate::version::{FileMetaData, RunId};

/// The shape of the index tree the strategies plan against (derived from
/// [`Options`](crate::options::Options)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerConfig {
    /// Number of levels.
    pub num_levels: usize,
    /// L0 tables that trigger an L0 compaction (leveled).
    pub l0_compaction_trigger: usize,
    /// Target size of L1 (leveled).
    pub level_base_size: u64,
    /// Growth factor between levels (leveled).
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
    /// L0 reached its table-count trigger (leveled).
    L0FileCount,
    /// L0 reached its table-count trigger with tables too small to be worth the L1 bytes they
    /// overlap: they are merged into one L0 table (leveled).
    L0Merge,
    /// A level exceeded its size target (leveled).
    LevelSize,
    /// `compact_range` asked for it.
    Manual,
    /// The GC policy marked a table for compaction (RocksDB BlobDB's forced GC).
    Forced,
    /// Most of a table's handles name value tables GC collected since it was written: it is
    /// rewritten so reads stop following inheritance (`compaction::stale_handles`).
    StaleHandles,
    /// A level holds several sorted runs where the strategy keeps one (leveled, after the
    /// database ran tiered): they are merged into one.
    MergeRuns,
    /// The runs newer than the oldest outweigh it by more than the space amplification bound
    /// (tiered): every run is merged into one.
    SpaceAmplification,
    /// Runs of similar size (tiered).
    SizeRatio,
    /// The tree holds as many runs as the run trigger and none are of similar size (tiered):
    /// the newest are merged.
    RunCount,
}

/// The tables a plan takes from one sorted run.
#[derive(Debug, Clone)]
pub struct RunInputs {
    /// Level of the run.
    pub level: usize,
    /// The run.
    pub run: RunId,
    /// Its tables the plan reads (all of them, or those overlapping the plan's range).
    pub files: Vec<Arc<FileMetaData>>,
}

/// A chosen compaction: its inputs and where its outputs go.
#[derive(Debug, Clone)]
pub struct CompactionPlan {
    /// The tables read, per run, in the order the strategy lists them.
    pub inputs: Vec<RunInputs>,
    /// Level the outputs go to.
    pub output_level: usize,
    /// Run of `output_level` the outputs join: an input run, the level's one run, or a new id
    /// (a new run is the newest of its level). In L0, where every table is a run of its own,
    /// the outputs are new runs and this names the oldest input, so that only what is older
    /// than every input counts as below the outputs
    /// ([`Version::is_bottommost_for_key`](crate::version::Version::is_bottommost_for_key)).
    pub output_run: RunId,
    /// Tables of the level below `output_level` overlapping the inputs (to cut outputs).
    pub grandparents: Vec<Arc<FileMetaData>>,
    /// The single input can move to `output_level` without being rewritten.
    pub trivial_move: bool,
    /// The outputs are one table whatever its size (a merge whose output stays in L0 must be
    /// one run, hence one table).
    pub one_output_table: bool,
    /// Why.
    pub reason: CompactionReason,
    /// The round-robin cursor the plan sets: a level and the largest key of its inputs there
    /// (leveled).
    pub compact_pointer: Option<(usize, Vec<u8>)>,
}

impl CompactionPlan {
    /// The shallowest level with inputs.
    pub fn level(&self) -> usize {
        self.inputs
            .iter()
            .map(|r| r.level)
            .min()
            .unwrap_or(self.output_level)
    }

    /// Every input table.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.inputs.iter().flat_map(|r| r.files.iter())
    }

    /// Every input table with its level.
    pub fn input_tables(&self) -> impl Iterator<Item = (usize, &Arc<FileMetaData>)> {
        self.inputs
            .iter()
            .flat_map(|r| r.files.iter().map(move |f| (r.level, f)))
    }

    /// Smallest and largest user key over all inputs.
    pub fn user_range(&self) -> (Vec<u8>, Vec<u8>) {
        let (lo, hi) = user_range(self.all_inputs());
        (lo.to_vec(), hi.to_vec())
    }

    /// The value tables the inputs' handles name (their dependences), ascending, each once.
    pub fn named_value_tables(&self) -> Vec<u64> {
        let mut named: Vec<u64> = self
            .all_inputs()
            .flat_map(|f| f.dependence.iter().map(|d| d.value_table))
            .collect();
        named.sort_unstable();
        named.dedup();
        named
    }

    /// Total bytes of all inputs.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.file_size).sum()
    }

    /// The entry that registers this plan as running job `id`.
    pub fn running(&self, id: u64) -> RunningCompaction {
        let (lo, hi) = self.user_range();
        let mut runs: Vec<(usize, RunId)> = self.inputs.iter().map(|r| (r.level, r.run)).collect();
        runs.push((self.output_level, self.output_run));
        runs.sort_unstable();
        runs.dedup();
        RunningCompaction {
            id,
            level: self.level(),
            output_level: self.output_level,
            lo,
            hi,
            runs,
        }
    }
}

/// A compaction that is running: the strategies avoid any plan that would touch what it
/// touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningCompaction {
    /// Identifies the job (assigned in start order, so "started before" is comparable).
    pub id: u64,
    /// Shallowest input level.
    pub level: usize,
    /// Output level (the deepest it touches).
    pub output_level: usize,
    /// Smallest user key of all inputs.
    pub lo: Vec<u8>,
    /// Largest user key of all inputs.
    pub hi: Vec<u8>,
    /// The runs it reads or writes, as `(level, run)`.
    pub runs: Vec<(usize, RunId)>,
}

impl RunningCompaction {
    /// Whether it touches a level of `levels` (inclusive) in a key range intersecting
    /// `[lo, hi]`.
    pub fn touches(&self, levels: (usize, usize), lo: &[u8], hi: &[u8]) -> bool {
        let shares_level = self.level <= levels.1 && levels.0 <= self.output_level;
        shares_level && !(hi < self.lo.as_slice() || lo > self.hi.as_slice())
    }

    /// Whether it reads or writes run `run` of `level`.
    pub fn uses_run(&self, level: usize, run: RunId) -> bool {
        self.runs.contains(&(level, run))
    }
}

/// Smallest and largest user key of `files` (empty slices for none).
pub(crate) fn user_range<'a>(
    files: impl Iterator<Item = &'a Arc<FileMetaData>>,
) -> (&'a [u8], &'a [u8]) {
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

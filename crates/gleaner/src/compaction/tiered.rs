//! Size-tiered compaction (RocksDB's universal compaction, Cassandra's STCS): the tree is a
//! list of sorted runs, newest first; flushes add runs, and merges turn a contiguous stretch of
//! runs into one. Writes are rewritten less often than under leveled compaction; reads and
//! space pay with more runs. The rules (docs/architecture.md, "Compaction strategies"):
//!
//! - The *runs* are the version's runs in search order: each L0 table, then each deeper level's
//!   runs newest first. Nothing is merged while there are fewer than `tiered_run_trigger`.
//! - **Space amplification**: when the runs newer than the oldest hold more than
//!   `tiered_max_space_amplification` times its bytes, every run is merged into one (the oldest
//!   run stands for the live data; the rest is, at worst, overwritten copies of it).
//! - **Size ratio**: otherwise, from the newest run on, the first stretch of at least two runs
//!   where each next run is at most (1 + `tiered_size_ratio`) × the bytes chosen so far, within
//!   `max_compaction_bytes`. With flushes of similar size this merges like a binary counter.
//! - **Run count**: otherwise, once the tree holds `max_runs` runs (4 × `tiered_run_trigger`,
//!   at most `l0_stop_trigger`), the newest runs, as many as bring the count below it (at least
//!   two, however large; more only within `max_compaction_bytes`). It sits well above the
//!   count the size-ratio merges leave (about log₂ of the flushes): a fallback at the trigger
//!   itself would merge each new flush into the newest run, rewriting it again and again, and
//!   write amplification would grow linearly with the data. It guarantees that L0 never fills to
//!   its stop trigger without a merge being chosen.
//! - A merge's output takes the stretch's place: in the deepest level of the stretch, as the
//!   run of its oldest input; a stretch of L0 tables that includes the oldest one leaves L0
//!   and becomes the newest run of the shallowest level holding runs (the last level in a tree
//!   of L0 tables only); one that does not stays in L0 as one table.
//! - The runs of a level keep disjoint sequence ranges: a stretch whose output would overlap
//!   the next older run of its output level in sequence numbers takes that run in too (only a
//!   tree leveled compaction built can need it).
//! - Deletions are dropped only where no run older than the output holds the key
//!   (`Version::is_bottommost_for_key`): in a merge that includes the oldest data for it.
//! - A merge never takes a run a running compaction reads or writes, so merges of disjoint
//!   stretches run at once.

use super::plan::{CompactionPlan, CompactionReason, PickerConfig, RunningCompaction};
use super::strategy::{
    Choice, CompactionStrategy, ManualStep, PlanContext, merge_runs, rewrite_in_place,
};
use crate::options::{CompactionStyle, Options};
use crate::version::{RunId, SortedRun, Version};

/// The tiered strategy and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tiered {
    /// Runs in the tree at which merging starts (`tiered_run_trigger`, at least 2).
    pub run_trigger: usize,
    /// Runs in the tree at which the newest are merged whatever their sizes.
    pub max_runs: usize,
    /// `tiered_size_ratio`.
    pub size_ratio: f64,
    /// `tiered_max_space_amplification`.
    pub max_space_amplification: f64,
}

impl Tiered {
    /// The strategy with the parameters of `opts`.
    pub(crate) fn new(opts: &Options) -> Self {
        let run_trigger = (opts.tiered_run_trigger() as usize).max(2);
        Tiered {
            run_trigger,
            max_runs: (4 * run_trigger)
                .min(opts.l0_stop_trigger() as usize)
                .max(run_trigger),
            size_ratio: opts.tiered_size_ratio(),
            max_space_amplification: opts.tiered_max_space_amplification(),
        }
    }
}

/// One run of the tree as tiered planning sees it.
struct Slot<'a> {
    level: usize,
    run: &'a SortedRun,
    bytes: u64,
    /// A running compaction reads or writes it.
    busy: bool,
}

/// Every run of `version` in search order.
fn slots<'a>(version: &'a Version, running: &[RunningCompaction]) -> Vec<Slot<'a>> {
    version
        .all_runs()
        .map(|(level, run)| Slot {
            level,
            run,
            bytes: run.compensated_bytes(),
            busy: running.iter().any(|r| r.uses_run(level, run.id())),
        })
        .collect()
}

/// The plan merging `slots[start..=end]`, placed as the module comment says; `None` when a run
/// it must take is busy.
fn plan_stretch(
    cfg: &PickerConfig,
    slots: &[Slot<'_>],
    start: usize,
    mut end: usize,
    reason: CompactionReason,
) -> Option<CompactionPlan> {
    let l0_runs = slots.iter().take_while(|s| s.level == 0).count();
    let deepest = slots[end].level;
    let (output_level, mut output_run, stays_in_l0) = if deepest > 0 {
        (deepest, slots[end].run.id(), false)
    } else if end + 1 == l0_runs {
        // A new run, newest of its level: its id is a number no run ever had (the smallest of
        // its tables' numbers; file numbers are never reused).
        let level = slots.get(end + 1).map_or(cfg.num_levels - 1, |s| s.level);
        let fresh: RunId = slots[start..=end]
            .iter()
            .flat_map(|s| s.run.files())
            .map(|f| f.number)
            .min()?;
        (level, fresh, false)
    } else {
        (0, slots[end].run.id(), true)
    };
    let mut lowest_seq = slots[start..=end]
        .iter()
        .map(|s| s.run.smallest_seq())
        .min()?;
    while !stays_in_l0
        && let Some(next) = slots.get(end + 1)
        && next.level == output_level
        && next.run.largest_seq() >= lowest_seq
    {
        end += 1;
        output_run = next.run.id();
        lowest_seq = lowest_seq.min(next.run.smallest_seq());
    }
    if slots[start..=end].iter().any(|s| s.busy) {
        return None;
    }
    let stretch: Vec<(usize, &SortedRun)> = slots[start..=end]
        .iter()
        .map(|s| (s.level, s.run))
        .collect();
    let mut plan = merge_runs(&stretch, output_level, output_run, Vec::new(), reason);
    plan.one_output_table = stays_in_l0;
    Some(plan)
}

impl Tiered {
    /// Every run merged into one, when the runs newer than the oldest outweigh it.
    fn space_amplification(
        &self,
        cfg: &PickerConfig,
        slots: &[Slot<'_>],
    ) -> Option<CompactionPlan> {
        let (oldest, newer) = slots.split_last()?;
        let newer_bytes: u64 = newer.iter().map(|s| s.bytes).sum();
        let over = newer_bytes as f64 > self.max_space_amplification * oldest.bytes as f64;
        if !over {
            return None;
        }
        plan_stretch(
            cfg,
            slots,
            0,
            slots.len() - 1,
            CompactionReason::SpaceAmplification,
        )
    }

    /// The first stretch of runs of similar size, newest first.
    fn size_ratio(&self, cfg: &PickerConfig, slots: &[Slot<'_>]) -> Option<CompactionPlan> {
        let limit = cfg.max_compaction_bytes();
        first_stretch(
            cfg,
            slots,
            CompactionReason::SizeRatio,
            |chosen, _, next| {
                let similar = next.bytes as f64 <= chosen as f64 * (1.0 + self.size_ratio);
                similar && chosen.saturating_add(next.bytes) <= limit
            },
        )
    }

    /// The newest runs that bring the count below `max_runs`, once it is reached.
    fn run_count(&self, cfg: &PickerConfig, slots: &[Slot<'_>]) -> Option<CompactionPlan> {
        if slots.len() < self.max_runs {
            return None;
        }
        let wanted = (slots.len() + 2).saturating_sub(self.max_runs).max(2);
        let limit = cfg.max_compaction_bytes();
        first_stretch(
            cfg,
            slots,
            CompactionReason::RunCount,
            |chosen, runs, next| {
                runs < wanted && (runs == 1 || chosen.saturating_add(next.bytes) <= limit)
            },
        )
    }
}

/// The first stretch of at least two free runs, newest first, that grows from its newest run
/// while `takes(bytes chosen, runs chosen, next run)` says so, planned for `reason`.
fn first_stretch(
    cfg: &PickerConfig,
    slots: &[Slot<'_>],
    reason: CompactionReason,
    takes: impl Fn(u64, usize, &Slot<'_>) -> bool,
) -> Option<CompactionPlan> {
    (0..slots.len()).find_map(|start| {
        if slots[start].busy {
            return None;
        }
        let mut chosen = slots[start].bytes;
        let mut end = start;
        while let Some(next) = slots.get(end + 1) {
            if next.busy || !takes(chosen, end + 1 - start, next) {
                break;
            }
            chosen += next.bytes;
            end += 1;
        }
        (end > start)
            .then(|| plan_stretch(cfg, slots, start, end, reason))
            .flatten()
    })
}

impl CompactionStrategy for Tiered {
    fn style(&self) -> CompactionStyle {
        CompactionStyle::Tiered
    }

    fn choose(&self, version: &Version, ctx: &PlanContext<'_>) -> Choice {
        let slots = slots(version, ctx.running);
        if slots.len() < self.run_trigger {
            return Choice::Nothing;
        }
        let plan = self
            .space_amplification(ctx.cfg, &slots)
            .or_else(|| self.size_ratio(ctx.cfg, &slots))
            .or_else(|| self.run_count(ctx.cfg, &slots));
        Choice::from_plan(plan)
    }

    /// One step: the stretch from the newest to the oldest run holding a key of the range,
    /// merged into one run (whole runs are the unit of tiering; a single run is rewritten in
    /// place, which drops what a compaction can drop).
    fn manual(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> ManualStep {
        if level > 0 {
            return ManualStep::Done;
        }
        let slots = slots(version, ctx.running);
        let holding = |s: &Slot<'_>| s.run.overlaps(lo, hi);
        let (Some(first), Some(last)) = (
            slots.iter().position(holding),
            slots.iter().rposition(holding),
        ) else {
            return ManualStep::Done;
        };
        match plan_stretch(ctx.cfg, &slots, first, last, CompactionReason::Manual) {
            Some(plan) => ManualStep::Run {
                plan,
                next_level: None,
            },
            None => ManualStep::Busy,
        }
    }

    /// An L0 table: merged with the older L0 tables into a new run, as L0 leaves. A deeper
    /// table: rewritten in place in its run.
    fn forced(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        number: u64,
    ) -> Option<CompactionPlan> {
        let slots = slots(version, ctx.running);
        let i = slots
            .iter()
            .position(|s| s.run.files().iter().any(|f| f.number == number))?;
        let s = &slots[i];
        if s.level == 0 {
            let oldest_l0 = slots.iter().rposition(|s| s.level == 0)?;
            return plan_stretch(ctx.cfg, &slots, i, oldest_l0, CompactionReason::Forced);
        }
        if s.busy {
            return None;
        }
        let f = s.run.files().iter().find(|f| f.number == number)?;
        Some(rewrite_in_place(
            s.level,
            s.run.id(),
            vec![std::sync::Arc::clone(f)],
            CompactionReason::Forced,
        ))
    }

    /// L0's score is the runs of the whole tree ÷ the run trigger (a merge is due at 1); the
    /// other levels have none of their own.
    fn scores(&self, version: &Version, cfg: &PickerConfig) -> Vec<f64> {
        let mut scores = vec![0.0; cfg.num_levels];
        if let Some(s) = scores.first_mut() {
            *s = version.all_runs().count() as f64 / self.run_trigger as f64;
        }
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::NewTable;

    fn cfg() -> PickerConfig {
        PickerConfig {
            num_levels: 4,
            l0_compaction_trigger: 2,
            level_base_size: 1000,
            level_multiplier: 10,
            target_file_size: 1000,
        }
    }

    fn tiered() -> Tiered {
        Tiered {
            run_trigger: 4,
            max_runs: 4,
            size_ratio: 0.01,
            max_space_amplification: 2.0,
        }
    }

    use crate::version::test_table as t;

    /// An L0 table of `size` bytes at sequence number `seq`.
    fn l0(number: u64, size: u64, seq: u64) -> NewTable {
        t(0, 0, number, ("a", "z"), size, seq..=seq)
    }

    fn version(tables: Vec<NewTable>) -> Version {
        crate::version::test_version(4, tables)
    }

    use crate::compaction::strategy::test_context as ctx;

    fn choose(s: &Tiered, v: &Version, running: &[RunningCompaction]) -> Option<CompactionPlan> {
        s.choose(v, &ctx(&cfg(), running)).into_plan()
    }

    /// The runs a plan merges, as `(level, run)`, and where its output goes.
    fn shape(p: &CompactionPlan) -> (Vec<(usize, RunId)>, (usize, RunId)) {
        let mut runs: Vec<(usize, RunId)> = p.inputs.iter().map(|r| (r.level, r.run)).collect();
        runs.dedup();
        (runs, (p.output_level, p.output_run))
    }

    /// A running compaction that uses run `run` of `level`.
    fn using(level: usize, run: RunId) -> RunningCompaction {
        RunningCompaction {
            id: 1,
            level,
            output_level: level,
            lo: b"a".to_vec(),
            hi: b"z".to_vec(),
            runs: vec![(level, run)],
        }
    }

    #[test]
    fn nothing_is_merged_below_the_run_trigger() {
        let v = version(vec![
            l0(10, 100, 30),
            l0(11, 100, 31),
            t(3, 1, 1, ("a", "z"), 10, 1..=5),
        ]);
        assert!(choose(&tiered(), &v, &[]).is_none(), "3 runs, trigger 4");
        let eager = Tiered {
            run_trigger: 3,
            ..tiered()
        };
        assert!(choose(&eager, &v, &[]).is_some(), "a size-ratio merge");
        assert_eq!(tiered().scores(&v, &cfg())[0], 0.75);
    }

    #[test]
    fn space_amplification_merges_every_run_into_the_place_of_the_oldest() {
        let v = version(vec![
            l0(10, 100, 30),
            l0(11, 100, 31),
            l0(12, 100, 32),
            t(3, 1, 1, ("a", "z"), 149, 1..=5),
        ]);
        let p = choose(&tiered(), &v, &[]).expect("300 bytes over 149 is above 2");
        assert_eq!(p.reason, CompactionReason::SpaceAmplification);
        assert_eq!(shape(&p), (vec![(0, 12), (0, 11), (0, 10), (3, 1)], (3, 1)));
        assert!(!p.one_output_table && p.grandparents.is_empty());
        let v = version(vec![
            l0(10, 100, 30),
            l0(11, 100, 31),
            l0(12, 100, 32),
            t(3, 1, 1, ("a", "z"), 150, 1..=5),
        ]);
        let p = choose(&tiered(), &v, &[]).expect("a merge is due");
        assert_ne!(p.reason, CompactionReason::SpaceAmplification, "exactly 2");
        assert!(
            choose(&tiered(), &v, &[using(3, 1)])
                .is_some_and(|p| p.reason != CompactionReason::SpaceAmplification),
            "a busy run rules the full merge out, not the others"
        );
    }

    #[test]
    fn similar_runs_merge_newest_first_and_leave_l0_as_a_new_run() {
        let v = version(vec![
            l0(10, 10, 30),
            l0(11, 10, 31),
            l0(12, 10, 32),
            t(3, 1, 1, ("a", "z"), 10_000, 1..=5),
        ]);
        let p = choose(&tiered(), &v, &[]).expect("three similar runs");
        assert_eq!(p.reason, CompactionReason::SizeRatio);
        // The stretch holds L0's oldest table, so it leaves L0 and becomes the newest run of
        // the level below, with a new id: the smallest of its tables' numbers.
        assert_eq!(shape(&p), (vec![(0, 12), (0, 11), (0, 10)], (3, 10)));
        let only_l0 = version(vec![
            l0(10, 10, 30),
            l0(11, 10, 31),
            l0(12, 10, 32),
            l0(13, 10, 33),
        ]);
        let p = choose(&tiered(), &only_l0, &[]).expect("four similar runs");
        assert_eq!(
            p.output_level, 3,
            "a tree of L0 tables alone merges into the last level"
        );
    }

    #[test]
    fn a_stretch_inside_a_level_takes_the_place_of_its_oldest_run() {
        let v = version(vec![
            l0(10, 10, 50),
            t(3, 5, 5, ("a", "z"), 1000, 30..=40),
            t(3, 4, 4, ("a", "z"), 1000, 20..=29),
            t(3, 3, 3, ("a", "z"), 100_000, 1..=10),
        ]);
        let p = choose(&tiered(), &v, &[]).expect("two similar runs");
        assert_eq!(p.reason, CompactionReason::SizeRatio);
        assert_eq!(shape(&p), (vec![(3, 5), (3, 4)], (3, 4)));
    }

    #[test]
    fn without_similar_runs_the_newest_are_merged_to_get_below_the_trigger() {
        let v = version(vec![
            l0(10, 10, 50),
            t(3, 5, 5, ("a", "z"), 100, 30..=40),
            t(3, 4, 4, ("a", "z"), 1000, 20..=29),
            t(3, 3, 3, ("a", "z"), 10_000, 1..=10),
        ]);
        let p = choose(&tiered(), &v, &[]).expect("four runs");
        assert_eq!(p.reason, CompactionReason::RunCount);
        assert_eq!(shape(&p), (vec![(0, 10), (3, 5)], (3, 5)));
        let eager = Tiered {
            max_runs: 3,
            ..tiered()
        };
        let p = choose(&eager, &v, &[]).expect("four runs");
        assert_eq!(
            p.inputs.len(),
            3,
            "four runs, at most 3: three merge into one"
        );
        let patient = Tiered {
            max_runs: 5,
            ..tiered()
        };
        assert!(
            choose(&patient, &v, &[]).is_none(),
            "below the bound, sizes that are not similar wait"
        );
        let opts = Options::default()
            .with_compaction_style(CompactionStyle::Tiered)
            .with_l0_stop_trigger(12);
        assert_eq!(Tiered::new(&opts).max_runs, 12, "at most the stop trigger");
        assert_eq!(Tiered::new(&Options::default()).max_runs, 16);
    }

    #[test]
    fn max_compaction_bytes_bounds_merges_but_two_runs_always_go() {
        let small = PickerConfig {
            target_file_size: 10,
            ..cfg()
        };
        let v = version(vec![
            l0(10, 100, 50),
            l0(11, 100, 51),
            l0(12, 100, 52),
            t(3, 3, 3, ("a", "z"), 100_000, 1..=10),
        ]);
        let p = tiered()
            .choose(&v, &ctx(&small, &[]))
            .into_plan()
            .expect("a merge");
        assert_eq!(p.reason, CompactionReason::SizeRatio);
        assert_eq!(p.input_bytes(), 200, "a third run would pass 250 bytes");
        let v = version(vec![
            l0(10, 1000, 50),
            t(3, 5, 5, ("a", "z"), 5000, 30..=40),
            t(3, 4, 4, ("a", "z"), 50_000, 20..=29),
            t(3, 3, 3, ("a", "z"), 500_000, 1..=10),
        ]);
        let p = tiered()
            .choose(&v, &ctx(&small, &[]))
            .into_plan()
            .expect("a merge");
        assert_eq!(p.reason, CompactionReason::RunCount);
        assert_eq!(p.input_bytes(), 6000, "two runs however large");
    }

    #[test]
    fn busy_runs_are_never_taken() {
        let v = version(vec![
            l0(10, 10, 30),
            l0(11, 10, 31),
            l0(12, 10, 32),
            l0(13, 10, 33),
            t(3, 1, 1, ("a", "z"), 10_000, 1..=5),
        ]);
        let p = choose(&tiered(), &v, &[using(0, 12)]).expect("the two oldest are free");
        assert_eq!(shape(&p), (vec![(0, 11), (0, 10)], (3, 10)));
        let running = [using(0, 12), p.running(2)];
        let q = choose(&tiered(), &v, &running);
        assert!(
            q.is_none(),
            "table 13 alone is no merge, and everything else is busy: {q:?}"
        );
    }

    #[test]
    fn a_stretch_of_l0_tables_without_the_oldest_stays_in_l0_as_one_table() {
        let v = version(vec![
            l0(10, 1000, 30),
            l0(11, 10, 31),
            l0(12, 10, 32),
            t(3, 1, 1, ("a", "z"), 100_000, 1..=5),
        ]);
        let p = choose(&tiered(), &v, &[]).expect("two similar runs");
        assert_eq!(p.reason, CompactionReason::SizeRatio);
        // Table 10 stays between them and the deeper runs; their merge must stay above it.
        assert_eq!(shape(&p), (vec![(0, 12), (0, 11)], (0, 11)));
        assert!(p.one_output_table, "in L0 a run is one table");
    }

    /// A tree no history of the two strategies builds, but a valid one: L1's run holds an old
    /// entry (sequence number 5), and L2 two runs, the older of which (keys g..z) is newer than
    /// that entry.
    fn crafted() -> Version {
        version(vec![
            t(1, 0, 20, ("a", "c"), 100, 5..=50),
            t(2, 8, 21, ("d", "f"), 100, 60..=65),
            t(2, 9, 22, ("g", "z"), 100, 1..=7),
        ])
    }

    #[test]
    fn an_output_that_would_overlap_an_older_run_in_sequence_numbers_takes_it_in() {
        let v = crafted();
        let c = cfg();
        // Keys a..f: L1's run and L2's newer run hold them. Merged into the newer run's place,
        // the output would hold sequence number 5, which run 9 (1..=7) after it also spans.
        let step = tiered().manual(&v, &ctx(&c, &[]), 0, Some(b"a"), Some(b"f"));
        let ManualStep::Run { plan, next_level } = step else {
            panic!("{step:?}");
        };
        assert_eq!(next_level, None, "one step");
        assert_eq!(shape(&plan), (vec![(1, 0), (2, 8), (2, 9)], (2, 9)));
        let busy = [using(2, 9)];
        assert!(matches!(
            tiered().manual(&v, &ctx(&c, &busy), 0, Some(b"a"), Some(b"f")),
            ManualStep::Busy
        ));
    }

    #[test]
    fn manual_merges_the_stretch_of_runs_holding_the_range_into_one() {
        let v = version(vec![
            t(0, 0, 10, ("m", "n"), 10, 90..=90),
            t(0, 0, 11, ("x", "y"), 10, 80..=80),
            t(3, 5, 5, ("a", "c"), 100, 30..=40),
            t(3, 4, 4, ("p", "q"), 100, 20..=29),
            t(3, 3, 3, ("a", "z"), 100, 1..=10),
        ]);
        let c = cfg();
        let plan = |lo: Option<&[u8]>, hi: Option<&[u8]>| match tiered().manual(
            &v,
            &ctx(&c, &[]),
            0,
            lo,
            hi,
        ) {
            ManualStep::Run { plan, .. } => plan,
            other => panic!("{other:?}"),
        };
        let all = plan(None, None);
        assert_eq!(all.reason, CompactionReason::Manual);
        assert_eq!(
            shape(&all),
            (vec![(0, 10), (0, 11), (3, 5), (3, 4), (3, 3)], (3, 3))
        );
        // From the newest run holding the range to the oldest, runs between included.
        let mid = plan(Some(b"x"), Some(b"x"));
        assert_eq!(shape(&mid), (vec![(0, 11), (3, 5), (3, 4), (3, 3)], (3, 3)));
        let one = version(vec![t(3, 3, 3, ("a", "z"), 100, 1..=10)]);
        match tiered().manual(&one, &ctx(&c, &[]), 0, None, None) {
            ManualStep::Run { plan, .. } => {
                assert_eq!(shape(&plan), (vec![(3, 3)], (3, 3)), "rewritten in place");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            tiered().manual(&v, &ctx(&c, &[]), 0, Some(b"0"), Some(b"1")),
            ManualStep::Done
        ));
        assert!(matches!(
            tiered().manual(&v, &ctx(&c, &[]), 1, None, None),
            ManualStep::Done
        ));
    }

    #[test]
    fn forced_tables_leave_l0_with_the_older_tables_or_are_rewritten_in_their_run() {
        let v = version(vec![
            l0(10, 10, 30),
            l0(11, 10, 31),
            l0(12, 10, 32),
            t(3, 5, 5, ("a", "c"), 100, 10..=20),
            t(3, 5, 6, ("d", "f"), 100, 10..=20),
            t(3, 3, 3, ("a", "z"), 100, 1..=9),
        ]);
        let c = cfg();
        let p = tiered()
            .forced(&v, &ctx(&c, &[]), 11)
            .expect("table 11 and the older L0 table");
        assert_eq!(p.reason, CompactionReason::Forced);
        assert_eq!(shape(&p), (vec![(0, 11), (0, 10)], (3, 10)));
        let p = tiered().forced(&v, &ctx(&c, &[]), 6).expect("in place");
        assert_eq!(shape(&p), (vec![(3, 5)], (3, 5)));
        assert_eq!(
            p.all_inputs().map(|f| f.number).collect::<Vec<_>>(),
            vec![6]
        );
        assert!(tiered().forced(&v, &ctx(&c, &[using(3, 5)]), 6).is_none());
        assert!(tiered().forced(&v, &ctx(&c, &[]), 99).is_none());
    }
}

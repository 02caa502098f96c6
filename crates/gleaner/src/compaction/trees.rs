//! One compaction strategy per partition of the index tree: each plans against its own tree
//! (`Version::tree`: its levels renumbered from 0, the running compactions and round-robin
//! cursors of its levels), and its plans are renumbered back to the version's levels. An
//! unpartitioned tree has one strategy, option `compaction_style`'s; a partitioned one a tiered
//! strategy for the cold partition (written often, read rarely) and a leveled one for the hot
//! (read often), as `version/routing.rs` numbers them.

use super::leveled::Leveled;
use super::plan::{CompactionPlan, PickerConfig, RunningCompaction};
use super::strategy::{Choice, CompactionStrategy, ManualStep, PlanContext};
use super::tiered::Tiered;
use crate::options::Options;
use crate::version::Version;
use crate::version::routing::{PARTITION_STRIDE, level_in, partition_of_level};

/// The strategies, by partition.
#[derive(Debug)]
pub(crate) struct TreeStrategies {
    strategies: Vec<Box<dyn CompactionStrategy>>,
}

/// A partition's share of a [`PlanContext`], renumbered to its levels.
struct Local {
    running: Vec<RunningCompaction>,
    pointers: Vec<Option<Vec<u8>>>,
}

impl TreeStrategies {
    /// Option `compaction_style`'s strategy over an unpartitioned tree.
    pub(crate) fn unpartitioned(opts: &Options) -> Self {
        TreeStrategies {
            strategies: vec![super::style::for_options(opts)],
        }
    }

    /// Tiered for the cold partition, leveled for the hot one.
    pub(crate) fn partitioned(opts: &Options) -> Self {
        TreeStrategies {
            strategies: vec![Box::new(Tiered::new(opts)), Box::new(Leveled)],
        }
    }

    /// The strategy of partition `p`.
    pub(crate) fn of(&self, p: usize) -> &dyn CompactionStrategy {
        self.strategies[p].as_ref()
    }

    /// Partitions planned for.
    pub(crate) fn partitions(&self) -> usize {
        self.strategies.len()
    }

    /// The next compaction the trees' shapes ask for: the partition whose most urgent level is
    /// the most urgent is asked first, then the other.
    pub(crate) fn choose(&self, version: &Version, ctx: &PlanContext<'_>) -> Choice {
        if !version.is_partitioned() {
            // One tree: the version is its own, planned as it is (no copy of its runs).
            return self.of(0).choose(version, ctx);
        }
        // Each tree copied once, for its urgency and its plan.
        let trees: Vec<Version> = (0..self.partitions()).map(|p| version.tree(p)).collect();
        let mut order: Vec<(usize, f64)> = trees
            .iter()
            .enumerate()
            .map(|(p, tree)| {
                let top = self
                    .of(p)
                    .scores(tree, ctx.cfg)
                    .into_iter()
                    .fold(0.0, f64::max);
                (p, top)
            })
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (p, _) in order {
            let local = local(ctx, p);
            match self.of(p).choose(&trees[p], &local.ctx(ctx.cfg)) {
                Choice::Nothing => continue,
                Choice::Merge(plan) => return Choice::Merge(renumber(plan, p)),
                Choice::Move(plan) => return Choice::Move(renumber(plan, p)),
            }
        }
        Choice::Nothing
    }

    /// The step of a manual compaction of `[lo, hi]` in partition `p` starting at its level
    /// `level` (relative to the partition, as the step's `next_level` is).
    pub(crate) fn manual(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        p: usize,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> ManualStep {
        if !version.is_partitioned() {
            return self.of(p).manual(version, ctx, level, lo, hi);
        }
        let (tree, local) = (version.tree(p), local(ctx, p));
        match self
            .of(p)
            .manual(&tree, &local.ctx(ctx.cfg), level, lo, hi)
        {
            ManualStep::Run { plan, next_level } => ManualStep::Run {
                plan: renumber(plan, p),
                next_level,
            },
            step => step,
        }
    }

    /// A compaction rewriting key table `number`, asked of the strategy of the partition
    /// holding it.
    pub(crate) fn forced(
        &self,
        version: &Version,
        ctx: &PlanContext<'_>,
        number: u64,
    ) -> Option<CompactionPlan> {
        if !version.is_partitioned() {
            return self.of(0).forced(version, ctx, number);
        }
        let (level, _) = version.all_files().find(|(_, f)| f.number == number)?;
        let p = partition_of_level(level);
        let (tree, local) = (version.tree(p), local(ctx, p));
        self.of(p)
            .forced(&tree, &local.ctx(ctx.cfg), number)
            .map(|plan| renumber(plan, p))
    }

    /// Compaction urgency of every level of the version (≥ 1 means due); 0 for the levels
    /// between the partitions' trees.
    pub(crate) fn scores(&self, version: &Version, cfg: &PickerConfig) -> Vec<f64> {
        if !version.is_partitioned() {
            return self.of(0).scores(version, cfg);
        }
        let mut out = vec![0.0; version.num_levels()];
        for p in 0..self.partitions().min(version.partitions()) {
            for (l, s) in self.of(p).scores(&version.tree(p), cfg).into_iter().enumerate() {
                if let Some(slot) = out.get_mut(level_in(p, l)) {
                    *slot = s;
                }
            }
        }
        out
    }
}

impl Local {
    fn ctx<'a>(&'a self, cfg: &'a PickerConfig) -> PlanContext<'a> {
        PlanContext {
            cfg,
            running: &self.running,
            pointers: &self.pointers,
        }
    }
}

/// Partition `p`'s running compactions and cursors, renumbered to its levels (a compaction of
/// the other partition touches nothing of it).
fn local(ctx: &PlanContext<'_>, p: usize) -> Local {
    let base = level_in(p, 0);
    let running = ctx
        .running
        .iter()
        .filter(|r| partition_of_level(r.output_level) == p)
        .map(|r| RunningCompaction {
            level: r.level - base,
            output_level: r.output_level - base,
            runs: r.runs.iter().map(|&(l, run)| (l - base, run)).collect(),
            ..r.clone()
        })
        .collect();
    let pointers = ctx
        .pointers
        .iter()
        .skip(base)
        .take(PARTITION_STRIDE)
        .cloned()
        .collect();
    Local { running, pointers }
}

/// `plan`, made against partition `p`'s tree, in the version's level numbers.
fn renumber(mut plan: CompactionPlan, p: usize) -> CompactionPlan {
    let base = level_in(p, 0);
    for r in &mut plan.inputs {
        r.level += base;
    }
    plan.output_level += base;
    if let Some((level, _)) = plan.compact_pointer.as_mut() {
        *level += base;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::strategy::test_context;
    use crate::version::VersionEdit;
    use crate::version::routing::{COLD, HOT, KeyRange, Routing};

    fn cfg() -> PickerConfig {
        PickerConfig {
            num_levels: 4,
            l0_compaction_trigger: 4,
            level_base_size: 1 << 20,
            level_multiplier: 10,
            target_file_size: 64 << 10,
        }
    }

    /// A partitioned version whose hot L0 holds `hot` tables and cold L0 `cold` ones, each
    /// over its own keys.
    fn version(hot: u64, cold: u64) -> Version {
        let mut tables = Vec::new();
        for i in 0..hot {
            tables.push(crate::version::test_table(
                level_in(HOT, 0) as u32,
                0,
                100 + i,
                ("user30", "user39"),
                1000,
                10 * i + 1..=10 * i + 5,
            ));
        }
        for i in 0..cold {
            tables.push(crate::version::test_table(
                0,
                0,
                200 + i,
                ("user50", "user59"),
                1000,
                1000 + 10 * i + 1..=1000 + 10 * i + 5,
            ));
        }
        Version::new_partitioned(4)
            .apply(
                &VersionEdit {
                    new_tables: tables,
                    routing: Some(Routing::new(vec![KeyRange::of_prefix(b"user3")])),
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("valid")
    }

    #[test]
    fn each_partition_is_planned_by_its_strategy_in_its_own_levels() {
        let s = TreeStrategies::partitioned(&Options::default());
        let c = cfg();
        // Five hot L0 tables: past leveled's trigger (4), while the cold tree is empty.
        let v = version(5, 0);
        let plan = s.choose(&v, &test_context(&c, &[])).into_plan().expect("due");
        assert!(plan.input_tables().all(|(l, _)| l == level_in(HOT, 0)));
        assert_eq!(plan.output_level, level_in(HOT, 1));
        // The plan applies to the version it was made for, in its level numbers.
        assert!(v.apply(&plan_edit(&plan), "M", 0).is_ok());
        // The cold tree's runs alone: tiered merges them into its own levels.
        let v = version(0, 8);
        let plan = s.choose(&v, &test_context(&c, &[])).into_plan().expect("due");
        assert!(plan.input_tables().all(|(l, _)| partition_of_level(l) == COLD));
        assert_eq!(partition_of_level(plan.output_level), COLD);
        let scores = s.scores(&version(5, 8), &c);
        assert_eq!(scores.len(), PARTITION_STRIDE + 4);
        assert!(scores[0] >= 1.0 && scores[level_in(HOT, 0)] >= 1.0);
    }

    #[test]
    fn a_running_compaction_blocks_only_its_own_partition() {
        let s = TreeStrategies::partitioned(&Options::default());
        let c = cfg();
        let v = version(5, 0);
        let plan = s.choose(&v, &test_context(&c, &[])).into_plan().expect("due");
        let running = plan.running(1);
        // The hot L0 is taken: nothing else is due.
        assert!(matches!(
            s.choose(&v, &test_context(&c, std::slice::from_ref(&running))),
            Choice::Nothing
        ));
        // With cold runs due too, the cold tree is planned around it.
        let v = version(5, 8);
        let plan = s
            .choose(&v, &test_context(&c, &[running]))
            .into_plan()
            .expect("cold is due");
        assert_eq!(partition_of_level(plan.output_level), COLD);
    }

    #[test]
    fn forced_plans_come_from_the_table_s_partition() {
        let s = TreeStrategies::partitioned(&Options::default());
        let c = cfg();
        let v = version(2, 2);
        let plan = s
            .forced(&v, &test_context(&c, &[]), 101)
            .expect("in place");
        // Leveled compacts an L0 table with the L0 tables overlapping it, into the hot L1.
        assert!(plan.all_inputs().any(|f| f.number == 101));
        assert!(plan.input_tables().all(|(l, _)| partition_of_level(l) == HOT));
        assert_eq!(plan.output_level, level_in(HOT, 1));
        let plan = s.forced(&v, &test_context(&c, &[]), 201).expect("cold");
        assert!(plan.input_tables().all(|(l, _)| partition_of_level(l) == COLD));
        assert!(s.forced(&v, &test_context(&c, &[]), 999).is_none());
    }

    /// The edit a plan's job would install, outputs taking the inputs' keys.
    fn plan_edit(plan: &CompactionPlan) -> VersionEdit {
        VersionEdit {
            deleted_files: plan
                .input_tables()
                .map(|(l, f)| (l as u32, f.number))
                .collect(),
            new_tables: vec![crate::version::test_table(
                plan.output_level as u32,
                plan.output_run,
                900,
                ("user30", "user39"),
                1000,
                1..=45,
            )],
            ..Default::default()
        }
    }
}

//! A simulation of the compaction strategies on metadata alone (no I/O): random flushes,
//! compactions chosen while others run and finished in random order, manual and forced
//! compactions, and switches between the styles (after the running compactions end, as a
//! reopen does). Each table's contents are a map of keys to the sequence number it holds; a
//! compaction keeps each key's newest version among its inputs. After every edit, which
//! `Version::apply` checks, a read of every key in search order must find its newest version:
//! what leveled and tiered compaction must keep whatever they choose, in whatever order jobs
//! end.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::plan::{CompactionPlan, PickerConfig, RunningCompaction};
use super::strategy::{CompactionStrategy, ManualStep, PlanContext};
use crate::key::{ValueKind, make_internal_key};
use crate::options::{CompactionStyle, Options};
use crate::version::{NewTable, TableMeta, Version, VersionEdit};

type Contents = BTreeMap<Vec<u8>, u64>;

struct Sim {
    cfg: PickerConfig,
    strategy: Box<dyn CompactionStrategy>,
    version: Version,
    /// What each live or once-live table holds.
    tables: BTreeMap<u64, Contents>,
    /// The newest sequence number written per key.
    newest: Contents,
    next_number: u64,
    next_seq: u64,
    running: Vec<(RunningCompaction, CompactionPlan)>,
    pointers: Vec<Option<Vec<u8>>>,
    next_id: u64,
    ctx: String,
    /// Merges finished per reason, so the test can tell each rule was reached.
    finished: BTreeMap<String, usize>,
}

fn strategy(style: CompactionStyle, rng: &mut StdRng) -> Box<dyn CompactionStrategy> {
    let opts = Options::default()
        .with_compaction_style(style)
        .with_tiered_run_trigger(rng.random_range(2..=6))
        .with_tiered_size_ratio([0.0, 0.01, 0.5, 1.0][rng.random_range(0..4)])
        .with_tiered_max_space_amplification([0.5, 2.0, 8.0][rng.random_range(0..3)]);
    super::style::for_options(&opts)
}

impl Sim {
    fn meta(number: u64, contents: &Contents) -> TableMeta {
        let (first, first_seq) = contents.first_key_value().expect("a table holds a key");
        let (last, last_seq) = contents.last_key_value().expect("a table holds a key");
        TableMeta {
            number,
            file_size: 10 * contents.len() as u64,
            smallest: make_internal_key(first, *first_seq, ValueKind::Value),
            largest: make_internal_key(last, *last_seq, ValueKind::Value),
            smallest_seq: *contents.values().min().expect("nonempty"),
            largest_seq: *contents.values().max().expect("nonempty"),
            num_entries: contents.len() as u64,
            num_deletions: 0,
            dependence: Vec::new(),
            aliases: 0,
            range_deletions: 0,
        }
    }

    fn apply(&mut self, edit: &VersionEdit, what: &str) {
        self.version = self
            .version
            .apply(edit, "sim", 0)
            .unwrap_or_else(|e| panic!("{}: {what}: {e}", self.ctx));
        self.check_reads(what);
    }

    /// Every key's first version in search order is its newest.
    fn check_reads(&self, what: &str) {
        for (key, newest) in &self.newest {
            let found = self.version.all_runs().find_map(|(_, run)| {
                let f = run.table_for(key)?;
                self.tables[&f.number].get(key)
            });
            assert_eq!(
                found,
                Some(newest),
                "{}: after {what}: key {}",
                self.ctx,
                String::from_utf8_lossy(key)
            );
        }
    }

    fn flush(&mut self, rng: &mut StdRng) {
        let mut contents = Contents::new();
        for _ in 0..rng.random_range(1..12) {
            let key = format!("k{:02}", rng.random_range(0..40)).into_bytes();
            contents.insert(key.clone(), self.next_seq);
            self.newest.insert(key, self.next_seq);
            self.next_seq += 1;
        }
        let number = self.next_number;
        self.next_number += 1;
        let meta = Self::meta(number, &contents);
        self.tables.insert(number, contents);
        let edit = VersionEdit {
            new_tables: vec![NewTable {
                level: 0,
                run: 0,
                meta,
            }],
            ..Default::default()
        };
        self.apply(&edit, "a flush");
    }

    fn ctx_running(&self) -> Vec<RunningCompaction> {
        self.running.iter().map(|(r, _)| r.clone()).collect()
    }

    fn start(&mut self, plan: CompactionPlan) {
        let running = plan.running(self.next_id);
        self.next_id += 1;
        self.running.push((running, plan));
    }

    /// Chooses a compaction (or a forced one) and registers it as running.
    fn start_one(&mut self, rng: &mut StdRng) -> bool {
        let running = self.ctx_running();
        let ctx = PlanContext {
            cfg: &self.cfg,
            running: &running,
            pointers: &self.pointers,
        };
        let plan = if rng.random_bool(0.1) {
            let numbers: Vec<u64> = self.version.all_files().map(|(_, f)| f.number).collect();
            if numbers.is_empty() {
                return false;
            }
            let n = numbers[rng.random_range(0..numbers.len())];
            self.strategy.forced(&self.version, &ctx, n)
        } else {
            self.strategy.choose(&self.version, &ctx).into_plan()
        };
        match plan {
            Some(p) => {
                self.start(p);
                true
            }
            None => false,
        }
    }

    /// Finishes running compaction `i`: keeps each key's newest version among its inputs and
    /// installs the outputs where its plan says.
    fn finish(&mut self, i: usize, rng: &mut StdRng) {
        let (_, plan) = self.running.remove(i);
        let mut edit = VersionEdit::default();
        for (level, f) in plan.input_tables() {
            edit.deleted_files.push((level as u32, f.number));
        }
        if let Some((level, key)) = &plan.compact_pointer {
            self.pointers[*level] = Some(key.clone());
        }
        let run = if plan.output_level == 0 {
            0
        } else {
            plan.output_run
        };
        if plan.trivial_move {
            let f = plan.all_inputs().next().expect("one input");
            edit.new_tables.push(NewTable {
                level: plan.output_level as u32,
                run,
                meta: f.meta().clone(),
            });
        } else {
            let mut merged = Contents::new();
            for f in plan.all_inputs() {
                for (k, s) in &self.tables[&f.number] {
                    let e = merged.entry(k.clone()).or_insert(*s);
                    *e = (*e).max(*s);
                }
            }
            let per_table = if plan.one_output_table {
                usize::MAX
            } else {
                rng.random_range(2..10)
            };
            let keys: Vec<_> = merged.into_iter().collect();
            for chunk in keys.chunks(per_table.min(keys.len().max(1))) {
                let contents: Contents = chunk.iter().cloned().collect();
                let number = self.next_number;
                self.next_number += 1;
                edit.new_tables.push(NewTable {
                    level: plan.output_level as u32,
                    run,
                    meta: Self::meta(number, &contents),
                });
                self.tables.insert(number, contents);
            }
        }
        *self
            .finished
            .entry(format!("{:?}", plan.reason))
            .or_default() += 1;
        let what = format!("{:?} into level {}", plan.reason, plan.output_level);
        self.apply(&edit, &what);
    }

    fn finish_all(&mut self, rng: &mut StdRng) {
        while !self.running.is_empty() {
            let i = rng.random_range(0..self.running.len());
            self.finish(i, rng);
        }
    }

    /// A manual compaction of a random range, step by step; a busy step lets a running
    /// compaction end first.
    fn manual(&mut self, rng: &mut StdRng) {
        let a = format!("k{:02}", rng.random_range(0..40)).into_bytes();
        let b = format!("k{:02}", rng.random_range(0..40)).into_bytes();
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let whole = rng.random_bool(0.3);
        let mut level = 0;
        for _ in 0..1000 {
            let running = self.ctx_running();
            let ctx = PlanContext {
                cfg: &self.cfg,
                running: &running,
                pointers: &self.pointers,
            };
            let (l, h) = if whole {
                (None, None)
            } else {
                (Some(lo.as_slice()), Some(hi.as_slice()))
            };
            match self.strategy.manual(&self.version, &ctx, level, l, h) {
                ManualStep::Done => return,
                ManualStep::Next => level += 1,
                ManualStep::Busy => {
                    assert!(
                        !self.running.is_empty(),
                        "{}: busy with nothing running",
                        self.ctx
                    );
                    let i = rng.random_range(0..self.running.len());
                    self.finish(i, rng);
                }
                ManualStep::Run { plan, next_level } => {
                    self.start(plan);
                    let i = self.running.len() - 1;
                    self.finish(i, rng);
                    match next_level {
                        Some(n) => level = n,
                        None => return,
                    }
                }
            }
        }
        panic!("{}: a manual compaction did not end", self.ctx);
    }
}

/// Runs one simulation; returns the merges finished per reason.
fn simulate(seed: u64, first: CompactionStyle, steps: usize) -> BTreeMap<String, usize> {
    let mut rng = StdRng::seed_from_u64(seed);
    let num_levels = rng.random_range(3..=5);
    let mut style = first;
    let mut sim = Sim {
        cfg: PickerConfig {
            num_levels,
            l0_compaction_trigger: rng.random_range(1..=4),
            level_base_size: 200,
            level_multiplier: 3,
            target_file_size: rng.random_range(10..=60),
        },
        strategy: strategy(style, &mut rng),
        version: Version::new(num_levels),
        tables: BTreeMap::new(),
        newest: Contents::new(),
        next_number: 1,
        next_seq: 1,
        running: Vec::new(),
        pointers: vec![None; num_levels],
        next_id: 0,
        ctx: String::new(),
        finished: BTreeMap::new(),
    };
    for step in 0..steps {
        sim.ctx = format!("seed {seed}, first style {first:?}, step {step}, style {style:?}");
        match rng.random_range(0..100) {
            0..=39 => sim.flush(&mut rng),
            40..=69 => {
                sim.start_one(&mut rng);
            }
            70..=92 => {
                if !sim.running.is_empty() {
                    let i = rng.random_range(0..sim.running.len());
                    sim.finish(i, &mut rng);
                }
            }
            93..=96 => sim.manual(&mut rng),
            _ => {
                // A reopen under the other style: nothing runs across it.
                sim.finish_all(&mut rng);
                style = match style {
                    CompactionStyle::Leveled => CompactionStyle::Tiered,
                    CompactionStyle::Tiered => CompactionStyle::Leveled,
                };
                sim.strategy = strategy(style, &mut rng);
            }
        }
    }
    // Left alone, each strategy settles: its compactions run out.
    sim.finish_all(&mut rng);
    let mut settled = false;
    for _ in 0..10_000 {
        if !sim.start_one(&mut rng) && sim.running.is_empty() {
            settled = true;
            break;
        }
        sim.finish_all(&mut rng);
    }
    assert!(settled, "{}: compactions never ran out", sim.ctx);
    if style == CompactionStyle::Leveled {
        for level in 1..num_levels {
            assert!(
                sim.version.runs(level).len() <= 1,
                "{}: leveled compaction left several runs in level {level}",
                sim.ctx
            );
        }
    }
    sim.finished
}

#[test]
fn both_strategies_keep_every_key_newest_first_through_concurrent_compactions_and_switches() {
    let mut reasons = BTreeMap::<String, usize>::new();
    for seed in 0..40 {
        for first in CompactionStyle::ALL {
            for (reason, n) in simulate(seed, first, 600) {
                *reasons.entry(reason).or_default() += n;
            }
        }
    }
    // Every rule of either strategy that a flush-driven tree reaches was taken.
    for reason in [
        "L0FileCount",
        "L0Merge",
        "LevelSize",
        "Manual",
        "Forced",
        "MergeRuns",
        "SpaceAmplification",
        "SizeRatio",
        "RunCount",
    ] {
        assert!(reasons.contains_key(reason), "{reason} never ran: {reasons:?}");
    }
}

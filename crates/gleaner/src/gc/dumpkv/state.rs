//! What DumpKV learns while a database runs, shared by its roles: the lifetime histograms and
//! sample queues, the GC garbage ratio, the lifetime points they give, the model and its
//! training, and the policy's figures.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;

use super::features::{Features, window_index};
use super::lifetime::{LifetimeHistogram, LifetimePoints};
use super::model::{Model, TrainError};
use super::samples::{Sample, SampleQueues, coin};
use super::trainer::{Fitted, Trainer, TrainingSet};
use crate::gc::policy_file::PolicyFiles;
use crate::gc::runtime::TaskStop;
use crate::key::SeqNo;

/// The slot of the model file: `dumpkv.model.pol`.
pub const MODEL_SLOT: &str = "model";

/// Weight of the newest GC job in the garbage ratio the lifetime points follow.
const RATIO_WEIGHT: f64 = 0.5;

/// The settings a database runs DumpKV with (its `dumpkv_*` options).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Writes per time unit (`dumpkv_time_unit`).
    pub unit: u64,
    /// Whether GC asks the model (`dumpkv_model`).
    pub use_model: bool,
    /// Samples between trainings, and rows per training (`dumpkv_train_samples`).
    pub train_samples: usize,
    /// Garbage ratio that makes a table due before its lifetime (`dumpkv_force_ratio`).
    pub force_ratio: f64,
    /// Whether this open learns: collects samples, trains, writes the model file (not a
    /// read-only open).
    pub learns: bool,
}

/// The policy's figures, for `stats().gc.policy_stats`.
#[derive(Debug, Default)]
pub struct Figures {
    /// Trainings begun: handed to the training task, or run at the end of a GC job.
    pub trainings_started: AtomicU64,
    /// Of those, the ones handed to the training task.
    pub trainings_in_task: AtomicU64,
    pub trainings: AtomicU64,
    /// Fits `close()` gave up (their model dropped).
    pub trainings_abandoned: AtomicU64,
    pub trainings_skipped: AtomicU64,
    pub train_micros: AtomicU64,
    pub samples_compaction: AtomicU64,
    pub samples_gc: AtomicU64,
    pub predicted_short: AtomicU64,
    pub predicted_long: AtomicU64,
    pub predicted_default: AtomicU64,
    pub inference_nanos: AtomicU64,
    pub feature_lookups: AtomicU64,
    pub feature_lookup_errors: AtomicU64,
    pub feature_bytes_written: AtomicU64,
    pub features_folded: AtomicU64,
    pub picks_ttl: AtomicU64,
    pub picks_forced: AtomicU64,
    pub model_files_loaded: AtomicU64,
    pub model_file_errors: AtomicU64,
    pub model_bytes: AtomicU64,
    pub model_nodes: AtomicU64,
    /// Records of the tables of each class (default, short, long) that left the live set, by
    /// a GC job or freed whole by a compaction, and the garbage among them: each class's
    /// invalid ratio at collection (the paper's Figs. 8 and 9).
    pub collected_records: [AtomicU64; 3],
    pub collected_garbage: [AtomicU64; 3],
    /// Tables of each class a compaction freed whole (no GC job needed).
    pub tables_freed: [AtomicU64; 3],
}

/// Most victims whose class is remembered between their pick and their job's end (picks of
/// jobs that never ran are forgotten past it).
const MAX_REMEMBERED_VICTIMS: usize = 4096;

/// What the roles learn from, under one lock (held for a sample or a few hundred additions).
#[derive(Debug)]
struct Learning {
    /// `H_s`: true lifetimes, from compactions out of L0.
    short: LifetimeHistogram,
    /// `H_l`: ages of live records, from GC jobs.
    long: LifetimeHistogram,
    queues: SampleQueues,
    /// The GC garbage ratio `r` (garbage records ÷ records read, recent jobs weighted most);
    /// `None` before the first job.
    garbage_ratio: Option<f64>,
}

/// DumpKV's state in one open database.
#[derive(Debug)]
pub struct DumpKv {
    pub settings: Settings,
    files: PolicyFiles,
    learning: Mutex<Learning>,
    /// `l_s`, `l_l`, `l_d`, read without the lock by the router and the picker.
    points: [AtomicU64; 3],
    model: ArcSwapOption<Model>,
    /// A training is running (handed to the task, or on another GC thread).
    training: AtomicBool,
    /// The task trainings are handed to; `None`: they run at the end of the GC job that made
    /// them due (`trainer.rs`).
    trainer: Option<Trainer>,
    /// The class of each victim picked whose job has not finished.
    victim_class: Mutex<std::collections::HashMap<u64, u32>>,
    pub figures: Figures,
}

impl DumpKv {
    /// The state of a database opened with `settings`, its model read from `files` if one was
    /// saved (a damaged file is counted and ignored: training starts over); trainings go to
    /// `trainer`'s task if given (started with [`DumpKv::run_trainer`]).
    pub fn new(settings: Settings, files: PolicyFiles, trainer: Option<Trainer>) -> Self {
        let initial = LifetimePoints::initial(settings.unit);
        let window = (settings.train_samples as u64).saturating_mul(4);
        let dk = DumpKv {
            settings,
            files,
            learning: Mutex::new(Learning {
                short: LifetimeHistogram::new(window),
                long: LifetimeHistogram::new(window),
                queues: SampleQueues::new(settings.train_samples),
                garbage_ratio: None,
            }),
            points: [
                AtomicU64::new(initial.short),
                AtomicU64::new(initial.long),
                AtomicU64::new(initial.default),
            ],
            model: ArcSwapOption::empty(),
            victim_class: Mutex::new(std::collections::HashMap::new()),
            training: AtomicBool::new(false),
            trainer,
            figures: Figures::default(),
        };
        dk.load_model();
        dk
    }

    fn load_model(&self) {
        let data = match self.files.read(MODEL_SLOT) {
            Ok(Some(d)) => d,
            Ok(None) => return,
            Err(e) => {
                log::warn!("dumpkv: cannot read the model file: {e}");
                self.figures.model_file_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        match Model::decode(&data) {
            Ok(m) if m.unit == self.settings.unit => {
                self.figures.model_files_loaded.fetch_add(1, Ordering::Relaxed);
                self.install(m, data.len());
            }
            Ok(m) => log::warn!(
                "dumpkv: the saved model was trained with dumpkv_time_unit={}, this open runs {}: \
                 it is set aside and training starts over",
                m.unit,
                self.settings.unit
            ),
            Err(e) => {
                log::warn!("dumpkv: the model file is damaged ({e}); training starts over");
                self.figures.model_file_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn install(&self, model: Model, bytes: usize) {
        self.figures.model_bytes.store(bytes as u64, Ordering::Relaxed);
        self.figures
            .model_nodes
            .store(model.node_count() as u64, Ordering::Relaxed);
        self.model.store(Some(Arc::new(model)));
    }

    /// The current lifetime points.
    pub fn points(&self) -> LifetimePoints {
        LifetimePoints {
            short: self.points[0].load(Ordering::Relaxed),
            long: self.points[1].load(Ordering::Relaxed),
            default: self.points[2].load(Ordering::Relaxed),
        }
    }

    /// Whether the model predicts a long remaining lifetime for a version with `features`,
    /// `age` writes old; `None` without a model. Counts the call and its time.
    pub fn predict(&self, features: &Features, age: SeqNo) -> Option<bool> {
        let model = self.model.load();
        let model = model.as_ref()?;
        let start = Instant::now();
        let long = model.predicts_long(&features.model_input(age, self.settings.unit));
        self.figures
            .inference_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Some(long)
    }

    /// A compaction out of L0 found that the version with `features`, written at `seq` of
    /// `key`, lived `lifetime` writes: counted in `H_s`, and a sample of queue A with
    /// probability `EDWC_s / EDWC_l` (paper Eq. 2: frequently written keys are sampled less).
    pub fn learn_lifetime(&self, key: &[u8], seq: SeqNo, features: &Features, lifetime: SeqNo) {
        if !self.settings.learns {
            return;
        }
        let points = self.points();
        let unit = self.settings.unit;
        let (s, l) = (window_index(points.short, unit), window_index(points.long, unit));
        let p = f64::from(features.edwcs[s]) / f64::from(features.edwcs[l]).max(f64::MIN_POSITIVE);
        let sampled = coin(key, seq, 0xA) < p;
        let mut g = self.learning.lock();
        g.short.add(lifetime);
        if sampled {
            g.queues.add_compaction(Sample {
                features: features.clone(),
                writes: lifetime,
                rank: coin(key, seq, 0xA1),
            });
            self.figures.samples_compaction.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A GC job found the version with `features` of `key`, written at `seq`, live at `age`
    /// writes: counted in `H_l`, and a sample of queue B with probability the GC's valid
    /// ratio, `1 − r`.
    pub fn learn_live(&self, key: &[u8], seq: SeqNo, features: Features, age: SeqNo) {
        if !self.settings.learns {
            return;
        }
        let mut g = self.learning.lock();
        g.long.add(age);
        let p = 1.0 - g.garbage_ratio.unwrap_or(0.0);
        if coin(key, seq, 0xB) < p {
            g.queues.add_gc(Sample {
                features,
                writes: age,
                rank: coin(key, seq, 0xB1),
            });
            self.figures.samples_gc.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The picker chose table `number`, of `class`, as a victim.
    pub fn picked(&self, number: u64, class: u32) {
        let mut m = self.victim_class.lock();
        if m.len() >= MAX_REMEMBERED_VICTIMS {
            m.clear();
        }
        m.insert(number, class);
    }

    /// A GC job judged a record of victim `table`: counted for its class.
    pub fn judged(&self, table: u64, garbage: bool) {
        let Some(class) = self.victim_class.lock().get(&table).copied() else {
            return;
        };
        let i = (class as usize).min(2);
        self.figures.collected_records[i].fetch_add(1, Ordering::Relaxed);
        if garbage {
            self.figures.collected_garbage[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A flush or compaction freed a table of `class` of `records` records, all garbage.
    pub fn freed(&self, class: u32, records: u64) {
        let i = (class as usize).min(2);
        self.figures.collected_records[i].fetch_add(records, Ordering::Relaxed);
        self.figures.collected_garbage[i].fetch_add(records, Ordering::Relaxed);
        self.figures.tables_freed[i].fetch_add(1, Ordering::Relaxed);
    }

    /// A GC job over `victims` ended: their classes are forgotten.
    pub fn forget(&self, victims: &[u64]) {
        let mut m = self.victim_class.lock();
        for v in victims {
            m.remove(v);
        }
    }

    /// A GC job committed after reading `read` records of which `written` were live: the
    /// garbage ratio moves, the points follow.
    pub fn job_done(&self, read: u64, written: u64) {
        if read > 0 && self.settings.learns {
            let r = 1.0 - written.min(read) as f64 / read as f64;
            let mut g = self.learning.lock();
            g.garbage_ratio = Some(match g.garbage_ratio {
                None => r,
                Some(old) => old + RATIO_WEIGHT * (r - old),
            });
        }
        self.update_points();
    }

    /// At the end of a job: ages the histograms if due, and recomputes the points from them
    /// and the garbage ratio (the initial ones stay until a GC job has measured a ratio).
    pub fn update_points(&self) {
        let mut g = self.learning.lock();
        g.short.settle();
        g.long.settle();
        let Some(r) = g.garbage_ratio else {
            return;
        };
        let p = LifetimePoints::compute(&g.short, &g.long, r, self.points());
        drop(g);
        self.points[0].store(p.short, Ordering::Relaxed);
        self.points[1].store(p.long, Ordering::Relaxed);
        self.points[2].store(p.default, Ordering::Relaxed);
    }

    /// Whether enough samples arrived since the last training, from both queues.
    fn due_for_training(&self) -> bool {
        let g = self.learning.lock();
        let (a, b) = g.queues.lens();
        a > 0 && b > 0 && g.queues.fresh() >= self.settings.train_samples as u64
    }

    /// Called at the end of each GC job, on its thread: when enough samples arrived, takes a
    /// training set of the newest, labelled with the current points, and hands it to the
    /// training task, or (without one) trains at once on this thread, so the model is a
    /// function of the sequence of jobs (`trainer.rs`). A training of 128 Ki rows takes about
    /// a second of one core.
    pub fn maybe_train(&self) {
        if !(self.settings.learns && self.settings.use_model && self.due_for_training()) {
            return;
        }
        if self.training.swap(true, Ordering::AcqRel) {
            return;
        }
        self.figures.trainings_started.fetch_add(1, Ordering::Relaxed);
        let points = self.points();
        let set: TrainingSet = self.learning.lock().queues.take_training_set(
            self.settings.train_samples,
            &points,
            self.settings.unit,
        );
        match &self.trainer {
            Some(trainer) => {
                self.figures.trainings_in_task.fetch_add(1, Ordering::Relaxed);
                trainer.hand_over(set, self.settings.unit);
            }
            None => {
                let start = Instant::now();
                let result = Model::train(&set.0, &set.1, self.settings.unit);
                self.finish((result, start.elapsed()));
            }
        }
    }

    /// The training task's body (see [`Trainer::run`]), until `close()` stops it.
    pub fn run_trainer(&self, stop: &TaskStop) {
        let Some(trainer) = &self.trainer else {
            return;
        };
        if trainer.run(stop, |fitted| self.finish(fitted)) {
            self.figures
                .trainings_abandoned
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A training ended: its model is swapped in and saved. A set of one label only is
    /// skipped (counted).
    fn finish(&self, (result, took): Fitted) {
        self.figures
            .train_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        match result {
            Ok(model) => {
                let data = model.encode();
                self.install(model, data.len());
                self.figures.trainings.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = self.files.write(MODEL_SLOT, &data) {
                    log::warn!("dumpkv: cannot save the model: {e}");
                    self.figures.model_file_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(TrainError::OneLabel) => {
                self.figures.trainings_skipped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrainError::Crate(e)) => {
                log::warn!("dumpkv: training failed: {e}");
                self.figures.trainings_skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.training.store(false, Ordering::Release);
    }

    /// The figures, by name.
    pub fn stats(&self) -> BTreeMap<String, u64> {
        let f = &self.figures;
        let points = self.points();
        let (queue_a, queue_b) = self.learning.lock().queues.lens();
        let mut out: BTreeMap<String, u64> = [
            ("dumpkv_trainings_started", &f.trainings_started),
            ("dumpkv_trainings_in_task", &f.trainings_in_task),
            ("dumpkv_trainings", &f.trainings),
            ("dumpkv_trainings_abandoned", &f.trainings_abandoned),
            ("dumpkv_trainings_skipped", &f.trainings_skipped),
            ("dumpkv_train_micros", &f.train_micros),
            ("dumpkv_samples_compaction", &f.samples_compaction),
            ("dumpkv_samples_gc", &f.samples_gc),
            ("dumpkv_predicted_short", &f.predicted_short),
            ("dumpkv_predicted_long", &f.predicted_long),
            ("dumpkv_predicted_default", &f.predicted_default),
            ("dumpkv_inference_nanos", &f.inference_nanos),
            ("dumpkv_feature_lookups", &f.feature_lookups),
            ("dumpkv_feature_lookup_errors", &f.feature_lookup_errors),
            ("dumpkv_feature_bytes_written", &f.feature_bytes_written),
            ("dumpkv_features_folded", &f.features_folded),
            ("dumpkv_picks_ttl", &f.picks_ttl),
            ("dumpkv_picks_forced", &f.picks_forced),
            ("dumpkv_model_files_loaded", &f.model_files_loaded),
            ("dumpkv_model_file_errors", &f.model_file_errors),
            ("dumpkv_model_bytes", &f.model_bytes),
            ("dumpkv_model_nodes", &f.model_nodes),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
        .collect();
        for (i, class) in ["default", "short", "long"].iter().enumerate() {
            out.insert(
                format!("dumpkv_collected_records_{class}"),
                f.collected_records[i].load(Ordering::Relaxed),
            );
            out.insert(
                format!("dumpkv_collected_garbage_{class}"),
                f.collected_garbage[i].load(Ordering::Relaxed),
            );
            out.insert(
                format!("dumpkv_tables_freed_{class}"),
                f.tables_freed[i].load(Ordering::Relaxed),
            );
        }
        out.insert("dumpkv_l_s".into(), points.short);
        out.insert("dumpkv_l_l".into(), points.long);
        out.insert("dumpkv_l_d".into(), points.default);
        out.insert("dumpkv_queue_compaction".into(), queue_a as u64);
        out.insert("dumpkv_queue_gc".into(), queue_b as u64);
        out
    }
}

//! Policy `dumpkv`: a learned lifetime model places the values GC moves into short- or
//! long-lifetime value tables, collected when their lifetime (in writes) has passed.
//!
//! What is tested here: a seeded workload of two key groups with very different lifetimes
//! trains a model that tells held-out versions of each group apart (accuracy at least 0.8),
//! and the tables it fills are collected with more garbage in the short class than in the
//! long one; the model is saved after each training, reloaded at open (a read-only open loads
//! it and never trains or writes), and a damaged model file costs the model, never the open;
//! `dumpkv_model=false` gives every moved record the long lifetime; histories are folded into
//! handles by compactions out of L0 (the index tree's growth is measured); `gleaner check`
//! verifies the model file and `gleaner dump` prints it; bad options are refused by name.
//! The engine suites (model, crash, fault, stress, SIGKILL loop, policy switch) run `dumpkv`
//! as one of their variants.

#[allow(dead_code, reason = "only the figure helper is used here")]
mod common;
#[allow(dead_code, reason = "only the shared options are used here")]
mod rounds;

use std::collections::BTreeMap;
use std::path::Path;

use common::reads::own_figure as own;
use gleaner::gc::dumpkv::{Features, Model};
use gleaner::gc::policy_file::{decode_policy_file, encode_policy_file};
use gleaner::io::FaultFs;
use gleaner::{Db, GcPolicyKind, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Lifetimes are counted in units of this many writes.
const UNIT: u64 = 64;
/// The key groups: name, keys, share of writes; each group's keys are written in turn, so they
/// live about as long as each other (lifetimes drawn at random would make a key's remaining
/// lifetime a coin no history predicts). `flash` keys live about 500 writes: they die in the
/// default tables, before any GC, and set the short lifetime point; `short` keys about 1 100:
/// they outlive the default tables and die soon after; `long` keys about 40 000.
const GROUPS: [(&str, u32, f64); 3] = [
    ("flash", 300, 0.6),
    ("short", 330, 0.3),
    ("long", 4000, 0.1),
];
/// The group tested as short-lived, and the one tested as long-lived.
const SHORT: usize = 1;
const LONG: usize = 2;

/// The shape every test here runs (any policy).
fn shape(fs: &FaultFs) -> Options {
    rounds::inline_options(fs)
        .with_memtable_size(64 << 10)
        .with_value_table_size(32 << 10)
}

fn options(fs: &FaultFs) -> Options {
    shape(fs)
        .with_gc_policy(GcPolicyKind::Dumpkv)
        .with_dumpkv_time_unit(UNIT)
        .with_dumpkv_train_samples(512)
}

fn model_path() -> &'static Path {
    Path::new("/db/dumpkv.model.pol")
}

fn key(group: usize, i: u32) -> String {
    format!("{}{i:05}", GROUPS[group].0)
}

/// The workload: every long-lived key written once first, then each write to a group drawn by
/// its share, to that group's next key in turn; every `round` ends with a flush and GC to
/// quiescence. It keeps each key's write numbers (the n-th write of the run is sequence number
/// n: nothing else takes sequence numbers).
struct Workload {
    rng: StdRng,
    writes: u64,
    next: [u32; 3],
    history: BTreeMap<String, Vec<u64>>,
}

impl Workload {
    fn new(seed: u64) -> Self {
        Workload {
            rng: StdRng::seed_from_u64(seed),
            writes: 0,
            next: [0; 3],
            history: BTreeMap::new(),
        }
    }

    fn round(&mut self, db: &Db, writes: u32) {
        for _ in 0..writes {
            let group = if self.writes < u64::from(GROUPS[LONG].1) {
                LONG
            } else {
                let x: f64 = self.rng.random();
                if x < GROUPS[0].2 {
                    0
                } else if x < GROUPS[0].2 + GROUPS[1].2 {
                    1
                } else {
                    2
                }
            };
            let i = self.next[group];
            self.next[group] = (i + 1) % GROUPS[group].1;
            let key = key(group, i);
            self.writes += 1;
            let mut v = format!("{key} {} ", self.writes).into_bytes();
            v.resize(200, b'v');
            db.put(&key, &v).expect("put");
            self.history.entry(key).or_default().push(self.writes);
        }
        db.flush().expect("flush");
        for _ in 0..100 {
            if db.run_gc().expect("gc").jobs == 0 {
                break;
            }
        }
    }

    /// The history of `key`'s newest version as DumpKV folds it: its deltas and counters.
    fn features(&self, key: &str) -> (Features, u64) {
        let seqs = &self.history[key];
        let mut f = Features::first_write(true);
        for w in seqs.windows(2) {
            f = f.next_write(w[1] - w[0], UNIT);
        }
        (f, *seqs.last().expect("written"))
    }
}

/// Runs the workload on a new database until a model was trained and saved, then closes it.
fn train_once(fs: &FaultFs, w: &mut Workload) {
    let db = Db::open(Path::new("/db"), options(fs)).expect("open");
    while own(&db, "dumpkv_trainings") == 0 {
        assert!(w.writes < 100_000, "a model was trained");
        w.round(&db, 1000);
    }
    assert_eq!(
        own(&db, "dumpkv_trainings_in_task"),
        0,
        "inline: on the job's thread"
    );
    db.close().expect("close");
}

fn saved_model(fs: &FaultFs) -> Model {
    let bytes = fs.file_bytes(model_path()).expect("model file");
    let data = decode_policy_file("dumpkv.model.pol", &bytes).expect("policy file");
    Model::decode(&data).expect("model")
}

/// A seeded workload with two key groups of very different lifetimes trains a model that
/// classifies held-out versions of both (each key's newest version, seen now: not a sample any
/// training took) at least 80 % right, hot keys short and cold keys long; short tables are
/// collected with more garbage than long ones.
#[test]
fn a_trained_model_tells_short_lived_keys_from_long_lived_ones() {
    let fs = FaultFs::new(27);
    let db = Db::open(Path::new("/db"), options(&fs)).expect("open");
    let mut w = Workload::new(27);
    for _ in 0..40 {
        w.round(&db, 1000);
    }
    let trainings = own(&db, "dumpkv_trainings");
    assert!(trainings > 0, "{:?}", db.stats().gc.policy_stats);
    assert!(
        own(&db, "dumpkv_predicted_short") > 0 && own(&db, "dumpkv_predicted_long") > 0,
        "GC placed records by prediction: {:?}",
        db.stats().gc.policy_stats
    );
    // The model the last training saved is the one GC asks.
    let model = saved_model(&fs);
    assert_eq!(model.unit, UNIT);
    assert_eq!(
        own(&db, "dumpkv_model_nodes"),
        model.node_count() as u64,
        "the saved model is the one in use"
    );
    let now = w.writes;
    let score = |keys: Vec<String>, long: bool| {
        let right = keys
            .iter()
            .filter(|k| {
                let (f, seq) = w.features(k);
                model.predicts_long(&f.model_input(now - seq, UNIT)) == long
            })
            .count();
        right as f64 / keys.len() as f64
    };
    let group = |g: usize| (0..GROUPS[g].1).map(|i| key(g, i)).collect::<Vec<_>>();
    let short_right = score(group(SHORT), false);
    let long_right = score(group(LONG), true);
    assert!(
        short_right >= 0.8 && long_right >= 0.8,
        "accuracy: short-lived keys {short_right:.3} short, long-lived keys {long_right:.3} \
         long"
    );
    // Tables of the short class were collected fuller of garbage than tables of the long.
    let ratio = |class: &str| {
        let records = own(&db, &format!("dumpkv_collected_records_{class}"));
        let garbage = own(&db, &format!("dumpkv_collected_garbage_{class}"));
        assert!(records > 0, "{class} tables were collected");
        garbage as f64 / records as f64
    };
    let (short, long) = (ratio("short"), ratio("long"));
    assert!(
        short > long,
        "invalid ratio at collection: short {short:.3}, long {long:.3}"
    );
    db.close().expect("close");
}

/// With GC threads running, a training goes to the policy's training task (its fit on a
/// thread of the lowest priority) instead of the GC job's thread; its model is installed and
/// saved all the same, and the next open loads it.
#[test]
fn with_background_threads_the_training_task_trains_and_saves() {
    let fs = FaultFs::new(28);
    let mut w = Workload::new(28);
    let background = || {
        options(&fs)
            .with_inline_background_work(false)
            .with_gc_threads(1)
    };
    let db = Db::open(Path::new("/db"), background()).expect("open");
    while own(&db, "dumpkv_trainings") == 0 {
        assert!(w.writes < 200_000, "a model was trained");
        w.round(&db, 1000);
        // A fit handed over runs beside this thread: wait for it before the next round, so
        // the writes never outrun it (bounded; 512 rows take milliseconds of CPU, even at the
        // lowest priority on a loaded machine).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while own(&db, "dumpkv_trainings_started")
            > own(&db, "dumpkv_trainings") + own(&db, "dumpkv_trainings_skipped")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the training task ended a fit"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    assert!(fs.file_bytes(model_path()).is_some(), "saved");
    assert_eq!(
        own(&db, "dumpkv_trainings_in_task"),
        own(&db, "dumpkv_trainings_started"),
        "every training went to the task"
    );
    db.close().expect("close");
    // GC threads may have handed over another training since; `close` gave it up if so.
    let ended = [
        "dumpkv_trainings",
        "dumpkv_trainings_skipped",
        "dumpkv_trainings_abandoned",
    ];
    assert_eq!(
        ended.iter().map(|n| own(&db, n)).sum::<u64>(),
        own(&db, "dumpkv_trainings_started"),
        "every training started ended or was given up: {:?}",
        db.stats().gc.policy_stats
    );
    assert!(own(&db, "dumpkv_trainings_abandoned") <= 1);
    let db = Db::open(Path::new("/db"), background()).expect("reopen");
    assert_eq!(own(&db, "dumpkv_model_files_loaded"), 1);
    db.close().expect("close");
}

/// The model is saved after each training and reloaded at open, where GC asks it at once; a
/// read-only open loads it and never trains or writes; `check` verifies it, `dump` prints it.
#[test]
fn the_model_persists_and_a_read_only_open_only_reads_it() {
    let fs = FaultFs::new(5);
    let mut w = Workload::new(5);
    train_once(&fs, &mut w);
    let saved = fs.file_bytes(model_path()).expect("saved");
    {
        let ro = Db::open_read_only(Path::new("/db"), options(&fs)).expect("read-only");
        assert_eq!(own(&ro, "dumpkv_model_files_loaded"), 1);
        assert_eq!(own(&ro, "dumpkv_trainings"), 0);
        ro.close().expect("close");
    }
    assert_eq!(fs.file_bytes(model_path()).expect("kept"), saved);
    let db = Db::open(Path::new("/db"), options(&fs)).expect("reopen");
    assert_eq!(own(&db, "dumpkv_model_files_loaded"), 1);
    w.round(&db, 2000);
    assert!(
        own(&db, "dumpkv_predicted_short") + own(&db, "dumpkv_predicted_long") > 0,
        "GC asked the reloaded model: {:?}",
        db.stats().gc.policy_stats
    );
    assert_eq!(own(&db, "dumpkv_predicted_default"), 0, "never without one");
    db.close().expect("close");

    // Offline tools, on a real directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let data = decode_policy_file("dumpkv.model.pol", &saved).expect("data");
    let path = dir.path().join("dumpkv.model.pol");
    std::fs::write(&path, &saved).expect("write");
    let mut text = Vec::new();
    gleaner::tools::dump_file(&path, &mut text, false).expect("dump");
    let text = String::from_utf8(text).expect("utf8");
    let model = Model::decode(&data).expect("model");
    assert!(
        text.contains(&format!(
            "model: trees={} nodes={}",
            model.trees(),
            model.node_count()
        )),
        "{text}"
    );
    assert!(text.contains("tree 0 node 0: x["), "{text}");
}

/// A damaged model file is reported and set aside: the open succeeds, training starts over
/// and writes a good file again.
#[test]
fn a_damaged_model_file_costs_the_model_not_the_open() {
    let fs = FaultFs::new(9);
    let mut w = Workload::new(9);
    train_once(&fs, &mut w);
    let good = fs.file_bytes(model_path()).expect("saved");
    // A flipped byte: the file's checksum catches it.
    let mut flipped = good.clone();
    flipped[10] ^= 0x40;
    // A file whose checksum holds but whose model is malformed: the model's own checks.
    let data = decode_policy_file("dumpkv.model.pol", &good).expect("data");
    let mut bad_model = data.clone();
    bad_model[0] = b'X';
    let malformed = encode_policy_file(&bad_model);
    for (what, bytes, decode_errors) in [("flipped", flipped, 0), ("malformed", malformed, 1)] {
        fs.set_file_bytes(model_path(), bytes).expect("damage");
        let report = gleaner::tools::check_db(Path::new("/db"), &options(&fs)).expect("check");
        assert!(
            report
                .warnings
                .iter()
                .any(|p| p.to_string().contains("dumpkv.model.pol")),
            "{what}: check warns: {report:?}"
        );
        assert!(report.problems.is_empty(), "{what}: {report:?}");
        let db = Db::open(Path::new("/db"), options(&fs)).expect("open despite the damage");
        assert_eq!(own(&db, "dumpkv_model_files_loaded"), 0, "{what}");
        assert_eq!(
            own(&db, "dumpkv_model_file_errors"),
            decode_errors,
            "{what}"
        );
        // No model: GC keeps moved records in the default class until a training.
        let before = own(&db, "dumpkv_trainings");
        while own(&db, "dumpkv_trainings") == before {
            assert!(w.writes < 400_000, "{what}: training started over");
            w.round(&db, 1000);
        }
        assert!(own(&db, "dumpkv_predicted_default") > 0, "{what}");
        db.close().expect("close");
        Model::decode(
            &decode_policy_file("m", &fs.file_bytes(model_path()).expect("rewritten"))
                .expect("good again"),
        )
        .expect("a model again");
    }
}

/// Without the model, every record GC moves gets the long lifetime, and nothing is trained.
#[test]
fn without_the_model_moved_records_go_long() {
    let fs = FaultFs::new(11);
    let db = Db::open(Path::new("/db"), options(&fs).with_dumpkv_model(false)).expect("open");
    let mut w = Workload::new(11);
    for _ in 0..10 {
        w.round(&db, 1000);
    }
    let moved = db.stats().gc.records_written;
    assert!(moved > 0);
    assert_eq!(own(&db, "dumpkv_predicted_long"), moved);
    assert_eq!(own(&db, "dumpkv_trainings"), 0);
    assert!(fs.file_bytes(model_path()).is_none(), "no model file");
    db.close().expect("close");
}

/// Compactions out of L0 fold each key's history into the handle of its newest version: the
/// feature bytes in the index tree, measured against the same workload under `terarkdb`.
#[test]
fn histories_are_folded_into_handles_and_their_bytes_are_measured() {
    let run = |policy: GcPolicyKind| {
        let fs = FaultFs::new(13);
        let opts = if policy == GcPolicyKind::Dumpkv {
            options(&fs)
        } else {
            shape(&fs).with_gc_policy(policy)
        };
        let db = Db::open(Path::new("/db"), opts).expect("open");
        let mut w = Workload::new(13);
        for _ in 0..10 {
            w.round(&db, 1000);
        }
        db.compact_range(None, None).expect("compact");
        let index_bytes: u64 = db.stats().levels.iter().map(|l| l.bytes).sum();
        (db, index_bytes)
    };
    let (dumpkv, with) = run(GcPolicyKind::Dumpkv);
    let (terarkdb, without) = run(GcPolicyKind::Terarkdb);
    assert!(own(&dumpkv, "dumpkv_features_folded") > 0);
    assert!(own(&dumpkv, "dumpkv_feature_lookups") >= own(&dumpkv, "dumpkv_features_folded"));
    // Histories cost index bytes (the paper: 14 to 18 % more), never less.
    assert!(with > without, "dumpkv {with}, terarkdb {without}");
    dumpkv.close().expect("close");
    terarkdb.close().expect("close");
}

/// Options out of range are refused by name, and nothing is created.
#[test]
fn bad_options_are_refused_by_name() {
    for (opts, name) in [
        (
            Options::default().with_dumpkv_time_unit(1000),
            "dumpkv_time_unit",
        ),
        (
            Options::default().with_dumpkv_time_unit(0),
            "dumpkv_time_unit",
        ),
        (
            Options::default().with_dumpkv_train_samples(10),
            "dumpkv_train_samples",
        ),
        (
            Options::default().with_dumpkv_force_ratio(1.5),
            "dumpkv_force_ratio",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        let err = Db::open(&path, opts.with_gc_policy(GcPolicyKind::Dumpkv)).expect_err("refused");
        assert!(err.to_string().contains(name), "{err}");
        assert!(!path.exists(), "{name}: nothing created");
    }
    // Another policy's open refuses them as not its own.
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Db::open(
        dir.path(),
        Options::default().with_dumpkv_train_samples(1024),
    )
    .expect_err("not scavenger's");
    assert!(err.to_string().contains("dumpkv_train_samples"), "{err}");
}

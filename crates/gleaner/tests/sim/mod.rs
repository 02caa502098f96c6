//! The workload and checks shared by the seeded simulations (`tests/crash.rs`,
//! `tests/fault_sim.rs`): a seeded stream of puts (inline and separated values), deletes and
//! batches, some synced, run with a snapshot held over stretches of it, iterator walks, and
//! manual flush, compaction and GC; and the prefix property the recovered state must satisfy.

#![allow(
    dead_code,
    reason = "each simulation uses its own part of the shared helpers"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use gleaner::io::{FaultFs, TornMode};
use gleaner::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub type Map = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
pub enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
}

impl Op {
    /// Applies the operation to a model map.
    pub fn apply(&self, m: &mut Map) {
        match self {
            Op::Put(k, v) => {
                m.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                m.remove(k);
            }
            Op::Batch(ops) => {
                for (k, v) in ops {
                    match v {
                        Some(v) => m.insert(k.clone(), v.clone()),
                        None => m.remove(k),
                    };
                }
            }
        }
    }
}

pub fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(4 << 10)
        .with_key_table_size(4 << 10)
        .with_level_base_size(16 << 10)
        .with_block_size(256)
        .with_l0_compaction_trigger(2)
        .with_l0_slowdown_trigger(6)
        .with_l0_stop_trigger(12)
        .with_max_manifest_size(4 << 10)
        // Most values are separated into small value tables, and GC runs all the time.
        .with_min_separated_value_size(100)
        .with_value_table_size(4 << 10)
        .with_gc_garbage_ratio(0.05)
}

/// After a recovery: garbage accounting is exact; and once closed, the directory checks clean
/// with no file the version does not list (orphans of interrupted jobs are removed at open, and
/// what later jobs made obsolete is deleted by the time close returns).
pub fn check_recovered_state(db: Db, path: &Path, opts: &Options, ctx: &str) {
    let r = db
        .recount_garbage()
        .unwrap_or_else(|e| panic!("{ctx}: recount: {e}"));
    assert!(
        r.mismatches.is_empty(),
        "{ctx}: garbage accounting drifted: {:#?}",
        r.mismatches
    );
    db.close().unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
    drop(db);
    let report =
        gleaner::tools::check::check_db(path, opts).unwrap_or_else(|e| panic!("{ctx}: check: {e}"));
    assert!(
        report.problems.is_empty(),
        "{ctx}: check found problems: {:#?}",
        report.problems
    );
    let orphans: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.detail.contains("orphan"))
        .collect();
    assert!(
        orphans.is_empty(),
        "{ctx}: orphans after close: {orphans:#?}"
    );
}

pub fn workload(seed: u64, len: usize) -> Vec<(Op, bool)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let key = |rng: &mut StdRng| format!("k{:03}", rng.random_range(0..150u32)).into_bytes();
    let value = |rng: &mut StdRng, i: usize| {
        let len = if rng.random_bool(0.05) {
            rng.random_range(3000..9000)
        } else {
            rng.random_range(1..200)
        };
        let mut v = format!("v{i}-").into_bytes();
        v.resize(len.max(v.len()), b'a' + (i % 26) as u8);
        v
    };
    (0..len)
        .map(|i| {
            let op = match rng.random_range(0..10) {
                0..=5 => Op::Put(key(&mut rng), value(&mut rng, i)),
                6..=7 => Op::Delete(key(&mut rng)),
                _ => Op::Batch(
                    (0..rng.random_range(1..8))
                        .map(|_| {
                            (
                                key(&mut rng),
                                rng.random_bool(0.7).then(|| value(&mut rng, i)),
                            )
                        })
                        .collect(),
                ),
            };
            (op, rng.random_bool(0.15))
        })
        .collect()
}

/// Runs `ops` until one fails. Returns how many were acknowledged. Reads ride along: a snapshot
/// held for a stretch of writes (so compaction and GC must keep the versions it sees, up to the
/// crash), and now and then an iterator walk; manual flush, compaction and GC cross the crash
/// point too.
pub fn run(db: &Db, ops: &[(Op, bool)]) -> usize {
    run_until_error(db, ops).0
}

/// What stopped a run early: the failed call (a write, or a manual flush, GC or compaction)
/// and its error.
#[derive(Debug)]
pub struct Stop {
    /// Whether the failed call was a write (rather than a manual flush, GC or compaction).
    pub write: bool,
    pub error: gleaner::Error,
}

/// As [`run`], and also returns what stopped the run early, if anything did.
pub fn run_until_error(db: &Db, ops: &[(Op, bool)]) -> (usize, Option<Stop>) {
    let mut snapshot = None;
    for (i, (op, sync)) in ops.iter().enumerate() {
        match i % 150 {
            20 => snapshot = Some(db.snapshot()),
            120 => snapshot = None,
            _ => {}
        }
        if i % 89 == 30 {
            // A short walk between writes: it pins the version it reads while background work
            // goes on. Its errors do not matter here (past the crash point anything may fail).
            if let Ok(it) = db.range(.., &ReadOptions::default()) {
                it.take(40).for_each(drop);
            }
        }
        if let Some(s) = &snapshot
            && i % 37 == 0
        {
            let _ = db.get_with("k001", &ReadOptions::default().at(s));
        }
        let wo = WriteOptions { sync: *sync };
        let r = match op {
            Op::Put(k, v) => {
                let mut b = WriteBatch::new();
                b.put(k, v);
                db.write(b, &wo)
            }
            Op::Delete(k) => {
                let mut b = WriteBatch::new();
                b.delete(k);
                db.write(b, &wo)
            }
            Op::Batch(items) => {
                let mut b = WriteBatch::new();
                for (k, v) in items {
                    match v {
                        Some(v) => b.put(k, v),
                        None => b.delete(k),
                    }
                }
                db.write(b, &wo)
            }
        };
        if let Err(error) = r {
            return (i, Some(Stop { write: true, error }));
        }
        if i % 97 == 50 {
            // Manual work also crosses the crash point now and then.
            if let Err(error) = db.flush() {
                return (
                    i + 1,
                    Some(Stop {
                        write: false,
                        error,
                    }),
                );
            }
        }
        if i % 131 == 70
            && let Err(error) = db.run_gc()
        {
            return (
                i + 1,
                Some(Stop {
                    write: false,
                    error,
                }),
            );
        }
        if i % 211 == 100
            && let Err(error) = db.compact_range(None, None)
        {
            return (
                i + 1,
                Some(Stop {
                    write: false,
                    error,
                }),
            );
        }
    }
    (ops.len(), None)
}

pub fn contents(db: &Db) -> Map {
    db.range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("scan item"))
        .collect()
}

/// Checks the prefix property: `recovered` equals the state after some prefix of
/// `ops[..=attempted]` (the write in flight at the crash may or may not have landed) that
/// includes every acknowledged synced write.
pub fn check_prefix(recovered: &Map, ops: &[(Op, bool)], acked: usize, ctx: &str) {
    let must_include = ops[..acked]
        .iter()
        .rposition(|(_, sync)| *sync)
        .map_or(0, |i| i + 1);
    check_prefix_between(
        recovered,
        ops,
        must_include,
        (acked + 1).min(ops.len()),
        ctx,
    );
}

/// Checks that `recovered` equals the state after the first `p` operations for some `p` in
/// `must_include..=attempted`.
pub fn check_prefix_between(
    recovered: &Map,
    ops: &[(Op, bool)],
    must_include: usize,
    attempted: usize,
    ctx: &str,
) {
    let mut state = Map::new();
    for p in 0..=attempted {
        if p > 0 {
            ops[p - 1].0.apply(&mut state);
        }
        if p >= must_include && &state == recovered {
            return;
        }
    }
    panic!(
        "{ctx}: recovered state ({} keys) is not the state after any prefix of {} in \
         [{must_include}, {attempted}]",
        recovered.len(),
        "writes"
    );
}

pub fn seed() -> u64 {
    match std::env::var("GLEANER_SEED") {
        Ok(s) => s.parse().expect("GLEANER_SEED must be a number"),
        Err(_) => rand::rng().random(),
    }
}

/// How background work runs in a simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// On the writing thread at fixed points (`inline_background_work`): every run performs
    /// the same file operations in the same order, so a crash point replays exactly.
    Inline,
    /// On the background threads, as in production: interleavings vary from run to run.
    Threads,
}

impl Schedule {
    /// `o` with this schedule.
    pub fn tune(self, o: Options) -> Options {
        o.with_inline_background_work(self == Schedule::Inline)
    }
}

pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|s| {
        s.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

pub const TORN_MODES: [TornMode; 3] = [
    TornMode::None,
    TornMode::KeepRandomPrefix,
    TornMode::KeepPrefixWithGarbage,
];

/// Runs `ops` to the end without a crash; returns the file system's mutating operations, the
/// operations fault rules see (reads included), and the digest of the mutating ones.
pub fn crash_free_run(
    ops: &[(Op, bool)],
    tune: &crate::common::Tune,
    schedule: Schedule,
    fs_seed: u64,
    ctx: &str,
) -> (u64, u64, u64) {
    let fs = FaultFs::new(fs_seed);
    let db = Db::open("/crash/db", schedule.tune(tune(options(&fs)))).expect("open");
    assert_eq!(run(&db, ops), ops.len(), "{ctx}: crash-free run");
    // The crash points must fall inside GC jobs and value-table writes too.
    let s = db.stats();
    assert!(
        s.gc.jobs > 0 && s.values.tables > 0,
        "{ctx}: the workload exercises GC: {:?}",
        s.gc
    );
    db.close().expect("close");
    (fs.mutating_ops(), fs.operations(), fs.operation_digest())
}

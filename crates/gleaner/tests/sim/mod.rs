//! The workload and checks shared by the seeded simulations (`tests/crash.rs`,
//! `tests/fault_sim.rs`): a seeded stream of puts (inline and separated values, some expiring),
//! deletes, range deletes and batches, some synced, run with a snapshot held over stretches of
//! it, iterator walks, and manual flush, compaction and GC; and the prefix property the
//! recovered state must satisfy.
//!
//! Time is simulated: the databases read a manual clock ([`clock`], one per test thread), which a
//! run sets to [`time_at`] its operation's index before each operation, so an expiry is a point
//! in the workload; a recovered state is judged at the clock's time when it is read.

#![allow(
    dead_code,
    reason = "each simulation uses its own part of the shared helpers"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use gleaner::expiry::ManualClock;
use gleaner::io::{FaultFs, TornMode};
use gleaner::{Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// A key and its value, as scans return them.
type Entry = (Vec<u8>, Vec<u8>);

/// The clock's time before the first operation (milliseconds since the epoch).
pub const T0: u64 = 1_700_000_000_000;

/// Simulated milliseconds between two operations.
const STEP_MS: u64 = 10;

thread_local! {
    /// The simulations' clock: each test thread runs its simulations one after the other.
    static CLOCK: Arc<ManualClock> = Arc::new(ManualClock::new(T0));
}

/// This thread's simulation clock (every database [`options`] makes reads it).
pub fn clock() -> Arc<ManualClock> {
    CLOCK.with(Arc::clone)
}

/// A file system for a fresh simulated database, with this thread's clock set back to [`T0`]
/// (a database reads the clock from its open on, and its time never goes back: one left ahead
/// by an earlier simulation on the thread would expire the new one's writes early).
pub fn fresh_fs(seed: u64) -> FaultFs {
    clock().set(T0);
    FaultFs::new(seed)
}

/// The time operation `i` of a workload runs at.
pub fn time_at(i: usize) -> u64 {
    T0 + i as u64 * STEP_MS
}

/// The model of the acknowledged writes: each key's value, and when the keys whose value
/// expires do.
#[derive(Debug, Clone, Default)]
pub struct Model {
    values: Map,
    expiring: BTreeMap<Vec<u8>, u64>,
}

impl Model {
    /// Applies one operation.
    pub fn apply(&mut self, op: &Op) {
        let mut put = |k: &Vec<u8>, v: Option<&Vec<u8>>, expiry: Option<u64>| {
            match v {
                Some(v) => self.values.insert(k.clone(), v.clone()),
                None => self.values.remove(k),
            };
            match expiry {
                Some(e) => self.expiring.insert(k.clone(), e),
                None => self.expiring.remove(k),
            };
        };
        match op {
            Op::Put(k, v) => put(k, Some(v), None),
            Op::PutExpiring(k, v, e) => put(k, Some(v), Some(*e)),
            Op::Delete(k) => put(k, None, None),
            Op::Batch(ops) => {
                for (k, v) in ops {
                    put(k, v.as_ref(), None);
                }
            }
            Op::DeleteRange(start, end) => {
                self.values.retain(|k, _| !(k >= start && k < end));
                self.expiring.retain(|k, _| !(k >= start && k < end));
            }
        }
    }

    /// What a reader at time `now` reads: the values of the keys not expired then.
    pub fn at(&self, now: u64) -> Map {
        let mut m = self.values.clone();
        for (k, e) in &self.expiring {
            if *e <= now {
                m.remove(k);
            }
        }
        m
    }
}

#[derive(Debug, Clone)]
pub enum Op {
    Put(Vec<u8>, Vec<u8>),
    /// A put that expires at the given time (see [`time_at`]).
    PutExpiring(Vec<u8>, Vec<u8>, u64),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    /// A range delete of `[start, end)`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

impl Op {
    /// The keys of the key space the operation writes.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        match self {
            Op::Put(k, _) | Op::PutExpiring(k, _, _) | Op::Delete(k) => vec![k.clone()],
            Op::Batch(items) => items.iter().map(|(k, _)| k.clone()).collect(),
            Op::DeleteRange(start, end) => (0..KEY_SPACE)
                .map(key)
                .filter(|k| k >= start && k < end)
                .collect(),
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
        // Expiring values go to tables of their own, which expire whole.
        .with_expiry_group_ms(200)
        .with_clock(clock())
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
    let any_key = |rng: &mut StdRng| key(rng.random_range(0..KEY_SPACE));
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
            let op = match rng.random_range(0..20) {
                0..=9 => Op::Put(any_key(&mut rng), value(&mut rng, i)),
                // Expiring within the next 40 operations, now and then at once.
                10..=11 => Op::PutExpiring(
                    any_key(&mut rng),
                    value(&mut rng, i),
                    time_at(i) + rng.random_range(0..=40) * STEP_MS,
                ),
                12..=14 => Op::Delete(any_key(&mut rng)),
                15 => {
                    let start = rng.random_range(0..KEY_SPACE);
                    let end = start + rng.random_range(1..20);
                    Op::DeleteRange(key(start), key(end))
                }
                _ => Op::Batch(
                    (0..rng.random_range(1..8))
                        .map(|_| {
                            (
                                any_key(&mut rng),
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

/// Distinct keys the workload writes: `k000` to `k149`.
pub const KEY_SPACE: u32 = 150;

/// Key `i` of the workload's key space.
pub fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

/// What a run checks its reads against, and what makes a failed read acceptable.
pub struct Checks<'a> {
    /// The database's file system: a read may fail only while a fault it injects strikes.
    pub fs: &'a FaultFs,
    /// Names the run in failures (seed, variant, point and how to replay it).
    pub ctx: &'a str,
    /// Also recount the garbage each time a held snapshot is released, while it is still held,
    /// so a GC that reclaimed a record the snapshot reads is reported by the recount as well as
    /// by the reads. Crash-free runs only: the recount reads every key table, and its reads
    /// would shift the operation counts the fault points are placed by.
    pub recount_under_snapshot: bool,
}

impl<'a> Checks<'a> {
    /// Checks for a run on `fs`, without recounts.
    pub fn new(fs: &'a FaultFs, ctx: &'a str) -> Self {
        Checks {
            fs,
            ctx,
            recount_under_snapshot: false,
        }
    }

    /// A read failed with `e`. That is acceptable only when a fault was injected while it ran
    /// (after an `EIO` a read may fail, it must never return a wrong or missing value).
    fn read_failed(&self, what: &str, faults_before: u64, e: &gleaner::Error) {
        assert!(
            self.fs.injected_faults() > faults_before,
            "{}: {what} failed with no fault injected during it: {e}",
            self.ctx
        );
    }

    /// Walks the whole database as of `snapshot` (or now), forward or in reverse, and requires
    /// exactly the entries of `expect`, in order (or an error while a fault strikes, after
    /// exactly the entries expected up to there).
    fn walk(&self, db: &Db, snapshot: Option<&Snapshot>, expect: &Map, reverse: bool, what: &str) {
        let faults = self.fs.injected_faults();
        let ro = match snapshot {
            Some(s) => ReadOptions::default().at(s),
            None => ReadOptions::default(),
        };
        let what = format!("{what} ({})", if reverse { "reverse" } else { "forward" });
        let it = match db.range(.., &ro) {
            Ok(it) => it,
            Err(e) => return self.read_failed(&what, faults, &e),
        };
        let mut want: Box<dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>> = if reverse {
            Box::new(expect.iter().rev())
        } else {
            Box::new(expect.iter())
        };
        let got: Box<dyn Iterator<Item = gleaner::Result<Entry>>> = if reverse {
            Box::new(it.rev())
        } else {
            Box::new(it)
        };
        for (n, item) in got.enumerate() {
            match item {
                Ok((k, v)) => {
                    let w = want.next();
                    assert!(
                        w == Some((&k, &v)),
                        "{}: {what}: entry {n} is {} = {}, expected {}",
                        self.ctx,
                        show(&k),
                        show(&v),
                        w.map_or("the end".to_string(), |(k, v)| format!(
                            "{} = {}",
                            show(k),
                            show(v)
                        )),
                    );
                }
                Err(e) => return self.read_failed(&what, faults, &e),
            }
        }
        if let Some((k, v)) = want.next() {
            panic!(
                "{}: {what} ended before {} = {}",
                self.ctx,
                show(k),
                show(v)
            );
        }
    }

    /// Gets each of `keys` as of `snapshot` (or now) and requires exactly its value in
    /// `expect`, or its absence (or an error while a fault strikes).
    fn gets<'k>(
        &self,
        db: &Db,
        snapshot: Option<&Snapshot>,
        keys: impl IntoIterator<Item = &'k Vec<u8>>,
        expect: &Map,
        what: &str,
    ) {
        let ro = match snapshot {
            Some(s) => ReadOptions::default().at(s),
            None => ReadOptions::default(),
        };
        for k in keys {
            let faults = self.fs.injected_faults();
            match db.get_with(k, &ro) {
                Ok(got) => assert!(
                    got.as_ref() == expect.get(k),
                    "{}: {what}: get {} returned {}, expected {}",
                    self.ctx,
                    show(k),
                    got.as_deref().map_or("nothing".to_string(), show),
                    expect.get(k).map_or("nothing".to_string(), |v| show(v))
                ),
                Err(e) => self.read_failed(&format!("{what}: get {}", show(k)), faults, &e),
            }
        }
    }

    /// A snapshot read whole: a walk each way must equal the state it was taken at, and so must
    /// a get of every key written since (the keys whose versions the snapshot reads are
    /// shadowed, so only a snapshot keeps GC and compaction from dropping them).
    fn whole_snapshot(&self, db: &Db, held: &Held, what: &str) {
        let what = format!("{what} (snapshot taken after {} writes)", held.after);
        self.walk(db, Some(&held.snapshot), &held.state, false, &what);
        self.walk(db, Some(&held.snapshot), &held.state, true, &what);
        self.gets(
            db,
            Some(&held.snapshot),
            &held.written_since,
            &held.state,
            &what,
        );
    }
}

/// A snapshot the run holds, with the state it must read: the model after the writes
/// acknowledged before it was taken.
pub struct Held {
    snapshot: Snapshot,
    state: Map,
    /// Writes acknowledged when it was taken.
    after: usize,
    /// Keys written (and acknowledged) since it was taken.
    written_since: BTreeSet<Vec<u8>>,
}

/// A value or key for a failure message: its length and first bytes.
fn show(b: &[u8]) -> String {
    let head = String::from_utf8_lossy(&b[..b.len().min(16)]).into_owned();
    if b.len() > 16 {
        format!("{head:?}... ({} bytes)", b.len())
    } else {
        format!("{head:?}")
    }
}

/// Runs `ops` until one fails. Returns how many were acknowledged. Reads ride along and are
/// checked exactly against a model of the acknowledged writes (a read may fail only while an
/// injected fault strikes it; it may never return a wrong or missing value):
///
/// - a snapshot is held over writes 20 to 120 of every 150 (so compaction and GC must keep the
///   versions it sees, up to the crash) with the model as of when it was taken; it is walked
///   every 37 writes (forward and reverse by turns) and read whole (a walk each way and a get
///   of every key written since it was taken) before it is released, and when the run stops,
///   after whatever failed;
/// - every 89 writes the current state is walked (forward and reverse by turns).
///
/// Manual flush, compaction and GC cross the crash point too.
pub fn run(db: &Db, ops: &[(Op, bool)], checks: &Checks) -> usize {
    run_until_error(db, ops, checks).0
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
pub fn run_until_error(db: &Db, ops: &[(Op, bool)], checks: &Checks) -> (usize, Option<Stop>) {
    let mut held: Option<Held> = None;
    // The acknowledged writes: ops[..i] when op i is about to run.
    let mut model = Model::default();
    let clock = clock();
    let stop = |i: usize, write: bool, error, held: Option<Held>| {
        // The snapshot must read exactly what it did before, whatever failed.
        if let Some(h) = &held {
            checks.whole_snapshot(
                db,
                h,
                &format!("snapshot read after the run stopped at {i}"),
            );
        }
        (i, Some(Stop { write, error }))
    };
    for (i, (op, sync)) in ops.iter().enumerate() {
        clock.set(time_at(i));
        let now = time_at(i);
        match i % 150 {
            20 => {
                held = Some(Held {
                    snapshot: db.snapshot(),
                    state: model.at(now),
                    after: i,
                    written_since: BTreeSet::new(),
                })
            }
            120 => {
                if let Some(h) = held.take() {
                    checks.whole_snapshot(db, &h, &format!("snapshot read before release at {i}"));
                    if checks.recount_under_snapshot {
                        let r = db
                            .recount_garbage()
                            .unwrap_or_else(|e| panic!("{}: recount at {i}: {e}", checks.ctx));
                        assert!(
                            r.mismatches.is_empty(),
                            "{}: recount under the snapshot at {i}: {:#?}",
                            checks.ctx,
                            r.mismatches
                        );
                    }
                }
            }
            _ => {}
        }
        if i % 89 == 30 {
            // A walk between writes, forward and reverse by turns: it pins the version it reads
            // while background work goes on.
            let what = format!("walk of the current state at {i}");
            checks.walk(db, None, &model.at(now), (i / 89) % 2 == 1, &what);
        }
        if let Some(h) = &held
            && i % 37 == 0
        {
            let what = format!("snapshot walk at {i}");
            checks.walk(db, Some(&h.snapshot), &h.state, (i / 37) % 2 == 1, &what);
        }
        let wo = WriteOptions { sync: *sync };
        let r = match op {
            Op::Put(k, v) => {
                let mut b = WriteBatch::new();
                b.put(k, v);
                db.write(b, &wo)
            }
            Op::PutExpiring(k, v, e) => {
                let mut b = WriteBatch::new();
                b.put_with_expiry(k, v, *e);
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
            Op::DeleteRange(start, end) => {
                let mut b = WriteBatch::new();
                b.delete_range(start, end);
                db.write(b, &wo)
            }
        };
        if let Err(error) = r {
            return stop(i, true, error, held);
        }
        model.apply(op);
        if let Some(h) = &mut held {
            h.written_since.extend(op.keys());
        }
        if i % 97 == 50 {
            // Manual work also crosses the crash point now and then.
            if let Err(error) = db.flush() {
                return stop(i + 1, false, error, held);
            }
        }
        if i % 131 == 70
            && let Err(error) = db.run_gc()
        {
            return stop(i + 1, false, error, held);
        }
        if i % 211 == 100
            && let Err(error) = db.compact_range(None, None)
        {
            return stop(i + 1, false, error, held);
        }
    }
    if let Some(h) = &held {
        checks.whole_snapshot(db, h, "snapshot read at the end of the run");
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
/// `must_include..=attempted`, as read at the clock's time now (when it was read).
pub fn check_prefix_between(
    recovered: &Map,
    ops: &[(Op, bool)],
    must_include: usize,
    attempted: usize,
    ctx: &str,
) {
    let now = gleaner::expiry::Clock::now_ms(&*clock());
    let mut state = Model::default();
    for p in 0..=attempted {
        if p > 0 {
            state.apply(&ops[p - 1].0);
        }
        if p >= must_include && &state.at(now) == recovered {
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

/// In a partitioned tree, that the run moved keys into the hot partition: a suite whose
/// workload never moves any proves nothing about moves.
pub fn assert_moved_keys(db: &Db, ctx: &str) {
    let p = db.stats().partitions;
    assert!(
        !p.partitioned || p.entries_moved_to_hot > 0,
        "{ctx}: the workload moves keys between the partitions: {p:?}"
    );
}

/// Runs `ops` to the end without a crash; returns the file system's mutating operations, the
/// operations fault rules see (reads included), and the digest of the mutating ones.
pub fn crash_free_run(
    ops: &[(Op, bool)],
    tune: &dyn Fn(Options) -> Options,
    schedule: Schedule,
    fs_seed: u64,
    ctx: &str,
) -> (u64, u64, u64) {
    let fs = fresh_fs(fs_seed);
    let db = Db::open("/crash/db", schedule.tune(tune(options(&fs)))).expect("open");
    let checks = Checks {
        recount_under_snapshot: true,
        ..Checks::new(&fs, ctx)
    };
    assert_eq!(run(&db, ops, &checks), ops.len(), "{ctx}: crash-free run");
    // The crash points must fall inside GC (jobs, or compactions relocating values under
    // `blobdb`) and value-table writes too.
    let s = db.stats();
    assert!(
        (s.gc.jobs > 0 || s.gc.relocated_values > 0) && s.values.tables > 0,
        "{ctx}: the workload exercises GC: {:?}",
        s.gc
    );
    // And expiry: compactions drop expired versions, and value tables expire whole.
    assert!(
        s.compaction.dropped_expired > 0 && s.values.tables_expired > 0,
        "{ctx}: the workload exercises expiry: {:?} {:?}",
        s.compaction,
        s.values
    );
    // And, in a partitioned tree, moves: the crash points must fall inside them too. (Inline
    // only: on threads the detector ticks when its thread runs, which a fast run may outpace.)
    if schedule == Schedule::Inline {
        assert_moved_keys(&db, ctx);
    }
    db.close().expect("close");
    (fs.mutating_ops(), fs.operations(), fs.operation_digest())
}

//! Seeded fault simulation: the crash simulation's workload (`tests/sim`), with background work
//! inline so that every point replays exactly, hit by an I/O error at a chosen file operation:
//! `EIO` once at the n-th operation of any kind (reads, appends, syncs, creates, renames,
//! removals, directory syncs), or `ENOSPC` on every append from the n-th one on, a full disk,
//! until space is freed. Wherever the error lands (a WAL write, a flush, a compaction, a GC job,
//! a manifest write, a read), the database must:
//!
//! - surface it: the run stops at a failed call, or the failure is confined to a GC job or a
//!   read that the workload retries;
//! - return exactly the model's state from every read during the run (through the snapshot it
//!   holds, as of when it was taken; of the current state, the acknowledged writes), or an error
//!   only from a read the injected fault strikes (`tests/sim`);
//! - refuse writes after a failed write until reopened (a failed fsync poisons the WAL);
//! - stay readable, with exactly the acknowledged writes visible;
//! - and after a reopen (with or without a power loss first) hold a prefix of the writes that
//!   includes every acknowledged one (every synced one after a power loss), with exact garbage
//!   accounting, a clean `gleaner check`, no orphan file, and take writes again.
//!
//! `GLEANER_FAULT_POINTS` sets the points per GC variant (default 40, so 360 in all);
//! `GLEANER_SEED` replays a run, and a failing point prints the variables that run it alone.

use std::path::Path;

use gleaner::io::{FaultFs, FaultKind, FaultOp, FaultRule, TornMode};
use gleaner::{Db, Error};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;
mod sim;

use sim::{
    Checks, Map, Op, Schedule, TORN_MODES, check_prefix, check_prefix_between,
    check_recovered_state, contents, env_u64, options, run, run_until_error, seed, workload,
};

/// The injected error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `EIO` once, at the `at`-th operation of any kind after the first open.
    EioOnce,
    /// `ENOSPC` on the `at`-th append after the first open and on every later one, until the
    /// workload ends and space is "freed".
    DiskFull,
}

/// One point of the simulation.
#[derive(Debug, Clone, Copy)]
struct FaultPoint {
    fault: Fault,
    at: u64,
    /// Power is lost after the workload (torn this way) instead of a clean close.
    crash: Option<TornMode>,
    fs_seed: u64,
}

impl FaultPoint {
    fn rule(&self) -> FaultRule {
        let (op, times, kind) = match self.fault {
            Fault::EioOnce => (FaultOp::Any, Some(1), FaultKind::Eio),
            Fault::DiskFull => (FaultOp::Append, None, FaultKind::Enospc),
        };
        FaultRule {
            op,
            path_contains: None,
            skip: self.at,
            times,
            kind,
        }
    }
}

const PATH: &str = "/faults/db";

/// A GC variant's options transformer composed with a compaction style's.
type Tuned<'a> = &'a dyn Fn(gleaner::Options) -> gleaner::Options;

fn opts(fs: &FaultFs, tune: Tuned<'_>) -> gleaner::Options {
    Schedule::Inline.tune(tune(options(fs)))
}

/// The operations of any kind and the appends of a fault-free run, counted from after the
/// first open, as the fault rules count them.
fn count_operations(ops: &[(Op, bool)], tune: Tuned<'_>, fs_seed: u64) -> (u64, u64) {
    let fs = sim::fresh_fs(fs_seed);
    let db = Db::open(PATH, opts(&fs, tune)).expect("open");
    for op in [FaultOp::Any, FaultOp::Append] {
        fs.add_fault(FaultRule::counter(op, None));
    }
    assert_eq!(
        run(&db, ops, &Checks::new(&fs, "fault-free run")),
        ops.len(),
        "fault-free run"
    );
    sim::assert_moved_keys(&db, "fault-free run");
    let counts = fs.fault_rule_matches();
    (counts[0], counts[1])
}

/// The state after the first `n` operations, as read at the simulation clock's time now.
fn state_after(ops: &[(Op, bool)], n: usize) -> Map {
    let mut m = sim::Model::default();
    for (op, _) in &ops[..n] {
        m.apply(op);
    }
    m.at(gleaner::expiry::Clock::now_ms(&*sim::clock()))
}

/// How a point went.
#[derive(Debug, Default)]
struct Tally {
    tried: u64,
    struck: u64,
    /// The fault stopped the run at a write.
    stopped_write: u64,
    /// The fault stopped the run at a manual flush, GC or compaction.
    stopped_manual: u64,
}

/// Runs the workload into `point`'s fault and checks everything the module comment promises.
fn fault_once(
    ops: &[(Op, bool)],
    tune: Tuned<'_>,
    point: FaultPoint,
    ctx: &str,
    tally: &mut Tally,
) {
    let path = Path::new(PATH);
    let fs = sim::fresh_fs(point.fs_seed);
    let db = Db::open(path, opts(&fs, tune)).unwrap_or_else(|e| panic!("{ctx}: first open: {e}"));
    fs.add_fault(point.rule());
    let (acked, stop) = run_until_error(&db, ops, &Checks::new(&fs, ctx));
    let struck = fs.fault_rule_matches()[0] > point.at;
    tally.tried += 1;
    tally.struck += u64::from(struck);
    if let Some(stop) = &stop {
        assert!(
            struck,
            "{ctx}: the run failed without a fault: {:?}",
            stop.error
        );
        if stop.write {
            tally.stopped_write += 1;
        } else {
            tally.stopped_manual += 1;
        }
    }
    fs.clear_faults();
    // A failed write leaves the WAL untrustworthy: writes are refused until reopened.
    if let Some(stop) = &stop
        && stop.write
        && matches!(stop.error, Error::Io { .. })
    {
        let err = db
            .put("probe", "x")
            .expect_err("a write after a failed write must fail");
        assert!(
            matches!(err, Error::ReadOnly(_)),
            "{ctx}: after {:?}, a write failed with {err}",
            stop.error
        );
    }
    // Readable, with exactly the acknowledged writes (a failed write applied nothing).
    let live = db
        .range(.., &gleaner::ReadOptions::default())
        .unwrap_or_else(|e| panic!("{ctx}: scan after the fault: {e}"))
        .map(|r| r.unwrap_or_else(|e| panic!("{ctx}: scan item after the fault: {e}")))
        .collect::<Map>();
    assert!(
        live == state_after(ops, acked),
        "{ctx}: after the fault the database shows other than the {acked} acknowledged writes"
    );
    // A write stopped by the fault may have reached the WAL before its sync failed.
    let attempted = match &stop {
        Some(s) if s.write => (acked + 1).min(ops.len()),
        _ => acked,
    };
    match point.crash {
        None => drop(db),
        Some(torn) => {
            drop(db);
            fs.crash(torn);
        }
    }
    let db = Db::open(path, opts(&fs, tune))
        .unwrap_or_else(|e| panic!("{ctx}: reopen after the fault: {e}"));
    let recovered = contents(&db);
    match point.crash {
        // Nothing was lost from the device: every acknowledged write is back.
        None => check_prefix_between(&recovered, ops, acked, attempted, ctx),
        Some(_) => check_prefix(&recovered, ops, acked, ctx),
    }
    check_recovered_state(db, path, &opts(&fs, tune), ctx);
    let db = Db::open(path, opts(&fs, tune)).unwrap_or_else(|e| panic!("{ctx}: third open: {e}"));
    db.put("after-fault", "ok")
        .unwrap_or_else(|e| panic!("{ctx}: write after reopen: {e}"));
    assert_eq!(
        db.get("after-fault").expect("get"),
        Some(b"ok".to_vec()),
        "{ctx}"
    );
}

/// The seeded fault simulation: under every GC variant, `GLEANER_FAULT_POINTS` points spread
/// over the workload, alternating `EIO` once and a full disk, each followed by a clean close or
/// by a power loss torn one of three ways.
#[test]
fn an_io_error_or_full_disk_anywhere_loses_no_acknowledged_write() {
    let seed = seed();
    eprintln!("fault simulation seed: {seed} (replay with GLEANER_SEED={seed})");
    let ops = workload(seed, 700);
    let only_variant = std::env::var("GLEANER_FAULT_VARIANT").ok();
    let crash_of = |i: u64| (!i.is_multiple_of(4)).then(|| TORN_MODES[(i % 3) as usize]);
    if let Some(at) = env_u64("GLEANER_FAULT_AT") {
        let variant = only_variant.expect("GLEANER_FAULT_AT needs GLEANER_FAULT_VARIANT");
        let (_, tune) = common::gc_variants()
            .into_iter()
            .find(|(n, _)| *n == variant)
            .unwrap_or_else(|| panic!("no GC variant named {variant}"));
        let style = std::env::var("GLEANER_FAULT_STYLE").unwrap_or_else(|_| "leveled".into());
        let (_, style_tune) = common::compaction_styles()
            .into_iter()
            .find(|(n, _)| *n == style)
            .unwrap_or_else(|| panic!("no compaction style named {style}"));
        let tune = |o| style_tune(tune(o));
        let point = FaultPoint {
            fault: if env_u64("GLEANER_FAULT_FULL") == Some(1) {
                Fault::DiskFull
            } else {
                Fault::EioOnce
            },
            at,
            crash: env_u64("GLEANER_FAULT_CRASH").and_then(crash_of),
            fs_seed: env_u64("GLEANER_FAULT_FS_SEED").unwrap_or(seed),
        };
        let ctx = format!("replay of {variant}@{style} {point:?}");
        fault_once(&ops, &tune, point, &ctx, &mut Tally::default());
        return;
    }
    let points = env_u64("GLEANER_FAULT_POINTS").unwrap_or(40);
    let mut tally = Tally::default();
    for (v, (variant, tune)) in common::gc_variants().into_iter().enumerate() {
        if only_variant.as_ref().is_some_and(|o| *o != variant) {
            continue;
        }
        // Each variant under the compaction style the rotation deals it (`common::styles_for`).
        for (style, style_tune) in common::styles_for(seed, v) {
            let tune = |o| style_tune(tune(o));
            let (all_ops, appends) = count_operations(&ops, &tune, seed);
            let mut rng = StdRng::seed_from_u64(seed ^ 0xfa17 ^ v as u64);
            for i in 0..points {
                let (fault, total) = if i % 2 == 0 {
                    (Fault::EioOnce, all_ops)
                } else {
                    (Fault::DiskFull, appends)
                };
                let at = total * i / points + rng.random_range(0..(total / points).max(1));
                let point = FaultPoint {
                    fault,
                    at,
                    crash: crash_of(i),
                    fs_seed: seed.wrapping_add(i),
                };
                let ctx = format!(
                    "seed {seed} variant {variant}@{style} {point:?} of {total}; replay with \
                 GLEANER_SEED={seed} GLEANER_FAULT_VARIANT={variant} GLEANER_FAULT_STYLE={style} \
                 GLEANER_FAULT_AT={at} GLEANER_FAULT_FULL={} GLEANER_FAULT_CRASH={i} \
                 GLEANER_FAULT_FS_SEED={} cargo test -p gleaner --test fault_sim",
                    u8::from(fault == Fault::DiskFull),
                    point.fs_seed
                );
                fault_once(&ops, &tune, point, &ctx, &mut tally);
            }
        }
    }
    eprintln!("fault simulation: {tally:?}");
    assert!(
        tally.tried > 0,
        "no GC variant matched GLEANER_FAULT_VARIANT"
    );
    // The points are spread over operations a fault-free run performs, so nearly all strike;
    // many stop the run (the rest fail a GC job or a read, which the workload rides over).
    assert!(
        tally.struck * 10 >= tally.tried * 9 && tally.stopped_write * 4 >= tally.tried,
        "too few faults struck or stopped a write: {tally:?}"
    );
}

/// Found by the fault simulation: a compaction that dropped a handle into a table GC had
/// collected looked the record up in the table it was copied to, and when that read failed
/// (`EIO`) it counted the drop as unresolved and committed. The garbage was lost for good: the
/// table's accounting kept a record live that nothing referenced, so it was never collected.
/// Now the compaction fails before its manifest edit (the database stays writable) and counts
/// the drop when it runs again.
#[test]
fn a_read_error_while_placing_compaction_garbage_fails_the_compaction_instead_of_losing_it() {
    let fs = sim::fresh_fs(11);
    let path = Path::new("/placing/db");
    let opts = || {
        options(&fs)
            .with_gc_threads(0)
            .with_gc_garbage_ratio(0.3)
            .with_l0_compaction_trigger(100)
            .with_l0_slowdown_trigger(100)
            .with_l0_stop_trigger(200)
    };
    let key = |i: u32| format!("key{i:03}");
    let value = |i: u32, round: u32| {
        let mut v = format!("{i}-{round}-").into_bytes();
        v.resize(300, b'a' + round as u8);
        v
    };
    let db = Db::open(path, opts()).expect("open");
    for i in 0..60u32 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    // Half the records become garbage; GC copies the other half to new tables, leaving the
    // index tree's handles to name the collected tables (inheritance leads to the copies).
    for i in 0..30u32 {
        db.put(key(i), value(i, 1)).expect("overwrite");
    }
    db.compact_range(None, None).expect("compact");
    let gc = db.run_gc().expect("gc");
    assert!(gc.jobs > 0, "GC collected the half-garbage tables");
    // Overwriting the copied records makes the next compaction drop handles into collected
    // tables: placing each drop reads the dense index of the copy.
    for i in 30..60u32 {
        db.put(key(i), value(i, 2)).expect("overwrite");
    }
    db.flush().expect("flush");
    fs.add_fault(FaultRule {
        op: FaultOp::Read,
        path_contains: Some(".vst".into()),
        skip: 0,
        times: Some(1),
        kind: FaultKind::Eio,
    });
    let err = db
        .compact_range(None, None)
        .expect_err("the compaction meets the read error");
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(fs.fault_rule_matches()[0] >= 1, "the fault struck");
    assert_eq!(db.stats().values.unresolved_drops, 0);
    drop(db);
    fs.clear_faults();
    let db = Db::open(path, opts()).expect("reopen");
    db.compact_range(None, None)
        .expect("the compaction runs again");
    let stats = db.stats();
    assert_eq!(stats.values.unresolved_drops, 0, "{:?}", stats.values);
    let recount = db.recount_garbage().expect("recount");
    assert!(
        recount.mismatches.is_empty(),
        "garbage lost: {:?}",
        recount.mismatches
    );
    for i in 0..60u32 {
        let round = if i < 30 { 1 } else { 2 };
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i, round)));
    }
}

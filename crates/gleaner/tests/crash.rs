//! Crash tests on the fault-injecting file system.
//!
//! A workload of puts, deletes and batches (some synced), with a snapshot held over stretches of
//! it, iterator walks, and manual flush, compaction and GC, with memtables and tables so small
//! that flushes, compactions and manifest writes happen all the time, runs until the file system
//! "loses power" after a chosen number of mutating operations. The database is then reopened on
//! what survived (unsynced data dropped, sometimes torn) and must hold exactly the state after
//! some prefix of the attempted writes that includes every write acknowledged with `sync`:
//! nothing synced is lost, nothing is resurrected, nothing never written appears. Every read of
//! the run, before the power loss and after it until the reopen (walks and gets through the
//! snapshot it holds, walks of the current state), must return exactly the model's state at
//! that snapshot or of the acknowledged writes (`tests/sim`).
//!
//! Seeded: the seed is printed; rerun with `GLEANER_SEED=<seed>`. The main simulation runs
//! background work inline (`inline_background_work`), so the same seed performs the same file
//! operations in the same order and a failing crash point, which prints the variables that run
//! it alone, replays exactly. A second simulation runs the background threads, whose
//! interleavings vary between runs; the property is checked whatever the interleaving.
//! `GLEANER_CRASH_POINTS` / `GLEANER_CRASH_THREAD_POINTS` set the crash points per GC variant,
//! `GLEANER_CRASH_SECS` repeats rounds with new seeds for that long. Every fourth crash point
//! reopens the database under another GC variant (a policy switch at the recovery, with the old
//! policy's unfinished work on disk: a `titan` job between its edits, `novkv` aliases in the
//! WAL, ...); its replay line names it (`GLEANER_CRASH_REOPEN_AS`).

use std::path::Path;

use gleaner::io::{FaultFs, FaultKind, FaultOp, FaultRule, TornMode};
use gleaner::{Db, Error, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;
mod sim;

use sim::{
    Checks, Map, Op, Schedule, TORN_MODES, check_prefix, check_recovered_state, contents,
    crash_free_run, env_u64, options, run, seed, workload,
};

/// One crash point of the simulation: where power is lost and how the unsynced tail survives.
#[derive(Debug, Clone, Copy)]
struct CrashPoint {
    /// Mutating file-system operations before the crash.
    at: u64,
    torn: TornMode,
    /// Seed of the fault file system (it decides what a torn write keeps).
    fs_seed: u64,
    /// The GC variant (index into `common::gc_variants`) the database is reopened under after
    /// the crash, when it switches policies there (docs/gc.md, "Switching policies").
    reopen_as: Option<usize>,
    /// The compaction style (index into `common::compaction_styles`) the database runs under.
    style: usize,
    /// The style it is reopened under after the crash, when it switches styles there.
    reopen_style: Option<usize>,
}

/// Runs the workload on a fresh database with GC variant `variant` (an index into
/// `common::gc_variants`) until power is lost at `point`, reopens (under another GC variant or
/// compaction style when the point says so), and checks the prefix property, the garbage
/// accounting, a clean `gleaner check`, and that the recovered database takes writes and
/// survives a clean reopen.
fn crash_once(
    ops: &[(Op, bool)],
    variant: usize,
    schedule: Schedule,
    point: CrashPoint,
    ctx: &str,
) {
    let path = Path::new("/crash/db");
    let variants = common::gc_variants();
    let styles = common::compaction_styles();
    let (tune, style) = (&variants[variant].1, &styles[point.style].1);
    let after = &variants[point.reopen_as.unwrap_or(variant)].1;
    let after_style = &styles[point.reopen_style.unwrap_or(point.style)].1;
    let first = |fs: &FaultFs| schedule.tune(style(tune(options(fs))));
    let opts = |fs: &FaultFs| schedule.tune(after_style(after(options(fs))));
    let fs = sim::fresh_fs(point.fs_seed);
    let db = Db::open(path, first(&fs)).unwrap_or_else(|e| panic!("{ctx}: first open: {e}"));
    fs.set_crash_after(point.at);
    let acked = run(&db, ops, &Checks::new(&fs, ctx));
    // Power is lost: nothing after the freeze reaches the disk; the handle's close fails.
    drop(db);
    fs.crash(point.torn);
    let db = Db::open(path, opts(&fs)).unwrap_or_else(|e| panic!("{ctx}: reopen after crash: {e}"));
    let recovered = contents(&db);
    check_prefix(&recovered, ops, acked, ctx);
    check_recovered_state(db, path, &opts(&fs), ctx);
    let db = Db::open(path, opts(&fs)).unwrap_or_else(|e| panic!("{ctx}: reopen after check: {e}"));
    // The recovered database accepts writes and survives a clean reopen.
    db.put("after-crash", "ok").expect("write after recovery");
    db.close().expect("close after recovery");
    drop(db);
    let db = Db::open(path, opts(&fs)).expect("clean reopen");
    assert_eq!(
        db.get("after-crash").expect("get"),
        Some(b"ok".to_vec()),
        "{ctx}"
    );
    let mut expect = recovered;
    expect.insert(b"after-crash".to_vec(), b"ok".to_vec());
    assert_eq!(contents(&db), expect, "{ctx}: state after a clean reopen");
}

/// The seeded crash simulation under `schedule`: for every GC variant, `points` crash points
/// spread over the workload's mutating operations, each torn one of three ways, under the
/// compaction style `common::styles_for` deals the variant (both with `GLEANER_STYLES=all`).
/// Every fourth point (the fourth of four) reopens under another GC variant, and every fourth
/// (the second of four) under the other compaction style. A failure names the seed, variant,
/// style and point, and the variables that run that point alone; with `GLEANER_CRASH_SECS` it
/// runs round after round (each with a new seed) until that many seconds have passed. Returns
/// the crash points tried.
fn simulate(test: &str, schedule: Schedule, points: u64) -> u64 {
    let first_seed = seed();
    let only_variant = std::env::var("GLEANER_CRASH_VARIANT").ok();
    let names: Vec<String> = common::gc_variants().into_iter().map(|(n, _)| n).collect();
    let style_names: Vec<String> = common::compaction_styles()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let index_of = |list: &[String], name: &str| {
        list.iter()
            .position(|n| n == name)
            .unwrap_or_else(|| panic!("no GC variant or compaction style named {name}"))
    };
    if let Some(at) = env_u64("GLEANER_CRASH_AT") {
        let variant = only_variant.expect("GLEANER_CRASH_AT needs GLEANER_CRASH_VARIANT");
        let torn = TORN_MODES[env_u64("GLEANER_CRASH_TORN").unwrap_or(0) as usize % 3];
        let fs_seed = env_u64("GLEANER_CRASH_FS_SEED").unwrap_or(first_seed);
        let var = |name: &str| std::env::var(name).ok();
        let point = CrashPoint {
            at,
            torn,
            fs_seed,
            reopen_as: var("GLEANER_CRASH_REOPEN_AS").map(|n| index_of(&names, &n)),
            style: index_of(
                &style_names,
                &var("GLEANER_CRASH_STYLE").unwrap_or_else(|| "leveled".into()),
            ),
            reopen_style: var("GLEANER_CRASH_REOPEN_STYLE").map(|n| index_of(&style_names, &n)),
        };
        let ops = workload(first_seed, 700);
        let ctx = format!("replay of {variant} {schedule:?} {point:?}");
        crash_once(&ops, index_of(&names, &variant), schedule, point, &ctx);
        return 1;
    }
    let deadline = env_u64("GLEANER_CRASH_SECS")
        .map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s));
    let mut tried = 0u64;
    let mut round = 0u64;
    let mut styles_run = std::collections::BTreeSet::new();
    loop {
        let seed = first_seed.wrapping_add(round.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        eprintln!(
            "{test}: {schedule:?} round {round}, seed {seed} (replay with GLEANER_SEED={seed})"
        );
        let ops = workload(seed, 700);
        for (v, variant) in names.iter().enumerate() {
            if only_variant.as_ref().is_some_and(|o| o != variant) {
                continue;
            }
            for (style_name, style_tune) in common::styles_for(seed, v) {
                let style = index_of(&style_names, &style_name);
                styles_run.insert(style_name.clone());
                // Count the mutating operations of a crash-free run to spread the crash points
                // over it.
                let tune = &common::gc_variants()[v].1;
                let tuned = |o| style_tune(tune(o));
                let ctx = format!("{variant}@{style_name}");
                let (total, _, _) = crash_free_run(&ops, &tuned, schedule, seed, &ctx);
                let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed ^ v as u64);
                for i in 0..points {
                    // Evenly spread, jittered so different seeds probe different operations.
                    let base = total * i / points;
                    let at = base + rng.random_range(0..(total / points).max(1));
                    let torn_index = i % 3;
                    // Every fourth point switches policies at the reopen, to a variant the
                    // seed picks (never its own), and another fourth switches styles.
                    let reopen_as = (i % 4 == 3).then(|| {
                        let other = rng.random_range(0..names.len() - 1);
                        if other >= v { other + 1 } else { other }
                    });
                    let reopen_style = (i % 4 == 1).then(|| (style + 1) % style_names.len());
                    let point = CrashPoint {
                        at,
                        torn: TORN_MODES[torn_index as usize],
                        fs_seed: seed.wrapping_add(i),
                        reopen_as,
                        style,
                        reopen_style,
                    };
                    let mut reopen = reopen_as.map_or(String::new(), |r| {
                        format!(" GLEANER_CRASH_REOPEN_AS={}", names[r])
                    });
                    if let Some(r) = reopen_style {
                        reopen += &format!(" GLEANER_CRASH_REOPEN_STYLE={}", style_names[r]);
                    }
                    let ctx = format!(
                        "seed {seed} variant {variant} style {style_name} schedule {schedule:?} \
                         crash point {at} of {total} torn {:?}; replay with GLEANER_SEED={seed} \
                         GLEANER_CRASH_VARIANT={variant} GLEANER_CRASH_STYLE={style_name} \
                         GLEANER_CRASH_AT={at} GLEANER_CRASH_TORN={torn_index} \
                         GLEANER_CRASH_FS_SEED={}{reopen} cargo test -p gleaner --test crash {test}",
                        point.torn, point.fs_seed
                    );
                    crash_once(&ops, v, schedule, point, &ctx);
                    tried += 1;
                }
            }
        }
        round += 1;
        if deadline.is_none_or(|d| std::time::Instant::now() >= d) {
            break;
        }
    }
    eprintln!("{test}: {tried} crash points in {round} round(s), styles {styles_run:?}");
    assert!(tried > 0, "no GC variant matched GLEANER_CRASH_VARIANT");
    if only_variant.is_none() && std::env::var("GLEANER_STYLES").is_err() {
        assert_eq!(
            styles_run.len(),
            style_names.len(),
            "every compaction style ran"
        );
    }
    tried
}

/// The seeded crash simulation with background work inline, so every crash point replays
/// exactly: `GLEANER_CRASH_POINTS` points per GC variant (default 120, so 1,080 in all).
#[test]
fn recovery_after_a_crash_at_any_point_yields_a_prefix_of_the_writes() {
    let points = env_u64("GLEANER_CRASH_POINTS").unwrap_or(120);
    simulate(
        "recovery_after_a_crash_at_any_point",
        Schedule::Inline,
        points,
    );
}

/// The same simulation with background threads, whose interleavings the inline schedule never
/// produces (a replay repeats the workload and the crash point, not the interleaving):
/// `GLEANER_CRASH_THREAD_POINTS` points per GC variant (default 30).
#[test]
fn recovery_after_a_crash_with_background_threads_yields_a_prefix_of_the_writes() {
    let points = env_u64("GLEANER_CRASH_THREAD_POINTS").unwrap_or(30);
    simulate(
        "recovery_after_a_crash_with_background_threads",
        Schedule::Threads,
        points,
    );
}

/// The inline schedule is deterministic: under every GC variant two crash-free runs of the
/// same workload perform the same file operations in the same order, and two runs crashed at
/// the same point leave byte-identical file systems and recover the same state. This is what
/// makes a printed crash point replay exactly. Each variant's figures are printed
/// (`--nocapture`): with a fixed `GLEANER_SEED` they show whether a change that must not alter
/// behaviour (a refactoring) left every file operation as it was.
#[test]
fn the_inline_schedule_repeats_exactly() {
    let seed = seed();
    eprintln!("determinism test seed: {seed} (replay with GLEANER_SEED={seed})");
    let ops = workload(seed, 700);
    for (variant, tune) in common::gc_variants() {
        // Leveled with the options as they are (the figures docs/architecture.md records),
        // then tiered.
        for (style, style_tune) in common::compaction_styles() {
            let name = if style == "leveled" {
                variant.clone()
            } else {
                format!("{variant}@{style}")
            };
            let tuned = |o| {
                let o = tune(o);
                if style == "leveled" { o } else { style_tune(o) }
            };
            inline_schedule_repeats(&ops, &tuned, seed, &name);
        }
    }
}

/// Two crash-free runs of `ops` with `tune`'s options perform the same operations, and two
/// runs crashed at the same point leave the same files and recover the same state.
fn inline_schedule_repeats(
    ops: &[(Op, bool)],
    tune: &dyn Fn(gleaner::Options) -> gleaner::Options,
    seed: u64,
    variant: &str,
) {
    let first = crash_free_run(ops, tune, Schedule::Inline, seed, variant);
    eprintln!(
        "{variant}: {} mutating operations, {} in all, digest {:016x}",
        first.0, first.1, first.2
    );
    let second = crash_free_run(ops, tune, Schedule::Inline, seed, variant);
    assert_eq!(
        first, second,
        "{variant}: (mutating operations, all operations, digest) differ between runs"
    );
    let image = |at: u64| {
        let fs = sim::fresh_fs(seed);
        let opts = Schedule::Inline.tune(tune(options(&fs)));
        let db = Db::open("/crash/db", opts.clone()).expect("open");
        fs.set_crash_after(at);
        let ctx = format!("{variant}: crash at {at}");
        let acked = run(&db, ops, &Checks::new(&fs, &ctx));
        drop(db);
        fs.crash(TornMode::KeepPrefixWithGarbage);
        let files: Vec<_> = fs
            .list_files()
            .into_iter()
            .map(|p| {
                let bytes = fs.file_bytes(&p);
                (p, bytes)
            })
            .collect();
        let db = Db::open("/crash/db", opts).expect("reopen");
        (acked, files, contents(&db))
    };
    let at = first.0 * 2 / 3;
    let a = image(at);
    assert!(
        a.0 < ops.len(),
        "{variant}: the crash at {at} stopped the workload"
    );
    assert!(
        a == image(at),
        "{variant}: two crashes at operation {at} differ"
    );
}

#[test]
fn crashes_inside_flush_compaction_manifest_and_recovery_keep_the_prefix_property() {
    let seed = seed();
    eprintln!("targeted crash test seed: {seed} (replay with GLEANER_SEED={seed})");
    let ops = workload(seed, 500);
    let path = Path::new("/targeted/db");
    // (operation, file) pairs where power is lost: manifest appends, syncs and rollovers, CURRENT
    // replacement, flush and compaction table writes, WAL creation at memtable switches,
    // deletion of obsolete files, and directory syncs.
    let targets: &[(FaultOp, &str)] = &[
        (FaultOp::Append, "MANIFEST"),
        (FaultOp::Sync, "MANIFEST"),
        (FaultOp::Create, "MANIFEST"),
        (FaultOp::Rename, "CURRENT"),
        (FaultOp::Append, ".sst"),
        (FaultOp::Sync, ".sst"),
        (FaultOp::Create, ".sst"),
        (FaultOp::Create, ".log"),
        (FaultOp::Remove, ".log"),
        (FaultOp::Remove, ".sst"),
        (FaultOp::Append, ".vst"),
        (FaultOp::Sync, ".vst"),
        (FaultOp::Create, ".vst"),
        (FaultOp::Remove, ".vst"),
        (FaultOp::SyncDir, "/targeted"),
    ];
    let torn_modes = [
        TornMode::None,
        TornMode::KeepRandomPrefix,
        TornMode::KeepPrefixWithGarbage,
    ];
    let mut case = 0u64;
    let mut fired = 0u64;
    for &(op, file) in targets {
        for skip in [0u64, 1, 2, 4, 7, 12, 20] {
            case += 1;
            let torn = torn_modes[(case % 3) as usize];
            let ctx = format!(
                "seed {seed} power loss at {op:?} #{} of {file} torn {torn:?}",
                skip + 1
            );
            let fs = sim::fresh_fs(seed.wrapping_add(case));
            let db =
                Db::open(path, options(&fs)).unwrap_or_else(|e| panic!("{ctx}: first open: {e}"));
            fs.add_fault(FaultRule {
                op,
                path_contains: Some(file.to_string()),
                skip,
                times: Some(1),
                kind: FaultKind::PowerLoss,
            });
            let acked = run(&db, &ops, &Checks::new(&fs, &ctx));
            drop(db);
            if fs.is_frozen() {
                fired += 1;
            }
            fs.crash(torn);
            // Every few cases, lose power again during recovery itself.
            if case.is_multiple_of(4) {
                fs.set_crash_after(case % 13 + 1);
                let _ = Db::open(path, options(&fs)).map(drop);
                fs.crash(torn);
            }
            let db = Db::open(path, options(&fs))
                .unwrap_or_else(|e| panic!("{ctx}: reopen after crash: {e}"));
            check_prefix(&contents(&db), &ops, acked, &ctx);
            check_recovered_state(db, path, &options(&fs), &ctx);
        }
    }
    eprintln!("power loss struck in {fired} of {case} cases");
    // Rare operations (CURRENT renames) run out before the larger skips; most cases must crash.
    assert!(
        fired * 4 >= case * 3,
        "only {fired} of {case} targeted crashes happened"
    );
}

#[test]
fn a_failed_wal_sync_makes_the_database_read_only_until_reopened() {
    let fs = sim::fresh_fs(7);
    let path = Path::new("/sync-fail/db");
    let db = Db::open(path, options(&fs)).expect("open");
    db.write(
        {
            let mut b = WriteBatch::new();
            b.put("durable", "1");
            b
        },
        &WriteOptions::sync(),
    )
    .expect("synced write");
    fs.add_fault(FaultRule {
        op: FaultOp::Sync,
        path_contains: Some(".log".into()),
        skip: 0,
        times: Some(1),
        kind: FaultKind::Eio,
    });
    let mut b = WriteBatch::new();
    b.put("maybe", "2");
    let err = db.write(b, &WriteOptions::sync()).expect_err("sync fails");
    assert!(matches!(err, Error::Io { .. }), "{err}");
    // The fault is gone, but the database must not trust the WAL any more.
    let err = db.put("later", "3").expect_err("read-only");
    assert!(matches!(err, Error::ReadOnly(_)), "{err}");
    assert!(db.stats().background_error.is_some());
    assert_eq!(
        db.get("durable").expect("reads still work"),
        Some(b"1".to_vec())
    );
    drop(db);
    let db = Db::open(path, options(&fs)).expect("reopen");
    assert_eq!(db.get("durable").expect("get"), Some(b"1".to_vec()));
    assert_eq!(db.get("later").expect("get"), None);
    db.put("later", "3").expect("writable again");
}

#[test]
fn out_of_space_in_a_flush_stops_writes_and_loses_nothing() {
    let fs = sim::fresh_fs(8);
    let path = Path::new("/enospc/db");
    let db = Db::open(path, options(&fs)).expect("open");
    fs.add_fault(FaultRule {
        op: FaultOp::Append,
        path_contains: Some(".sst".into()),
        skip: 0,
        times: None,
        kind: FaultKind::Enospc,
    });
    let mut acked = Map::new();
    let mut failed = None;
    for i in 0..2000u32 {
        let k = format!("key{i:05}").into_bytes();
        let v = vec![b'v'; 100];
        match db.put(&k, &v) {
            Ok(()) => {
                acked.insert(k, v);
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let err = failed.expect("a flush must fail and stop writes");
    assert!(matches!(err, Error::ReadOnly(_)), "{err}");
    let bg = db
        .stats()
        .background_error
        .expect("background error recorded");
    assert!(
        bg.contains("28") || bg.to_lowercase().contains("space"),
        "{bg}"
    );
    drop(db);
    fs.clear_faults();
    let db = Db::open(path, options(&fs)).expect("reopen with space");
    assert_eq!(contents(&db), acked, "every acknowledged write survives");
}

/// The mutating operations the GC test tells apart, one counting rule each (in this order).
const GC_OP_KINDS: [FaultOp; 7] = [
    FaultOp::Create,
    FaultOp::Append,
    FaultOp::Flush,
    FaultOp::Sync,
    FaultOp::Rename,
    FaultOp::Remove,
    FaultOp::SyncDir,
];

/// The steps of a GC job the test must see among its operations: writing outputs, syncing them,
/// syncing the directory, writing and syncing the manifest edit, deleting victims.
const GC_STEPS: [(FaultOp, &str); 7] = [
    (FaultOp::Create, ".vst"),
    (FaultOp::Append, ".vst"),
    (FaultOp::Sync, ".vst"),
    (FaultOp::SyncDir, "/gc-crash"),
    (FaultOp::Append, "MANIFEST"),
    (FaultOp::Sync, "MANIFEST"),
    (FaultOp::Remove, ".vst"),
];

/// The steps of a write-back job (`titan`): writing and syncing outputs, the edit installing
/// them, the write-backs into the WAL and its sync, the edit retiring the victims (which stay
/// on disk until no reader needs them, so the job deletes none).
const WRITE_BACK_GC_STEPS: [(FaultOp, &str); 8] = [
    (FaultOp::Create, ".vst"),
    (FaultOp::Append, ".vst"),
    (FaultOp::Sync, ".vst"),
    (FaultOp::SyncDir, "/gc-crash"),
    (FaultOp::Append, "MANIFEST"),
    (FaultOp::Sync, "MANIFEST"),
    (FaultOp::Append, ".log"),
    (FaultOp::Sync, ".log"),
];

/// The steps the test must see a variant's GC jobs take.
fn gc_steps(variant: &str) -> &'static [(FaultOp, &'static str)] {
    if variant == "titan" {
        &WRITE_BACK_GC_STEPS
    } else {
        &GC_STEPS
    }
}

/// Adds rules that never fire and only count: one per kind of mutating operation
/// ([`GC_OP_KINDS`]), then one per step of `steps`. Rules see the operations attempted
/// before a freeze, so after a crash at the job's operation `k` the kind counts sum to `k`.
fn add_counting_rules(fs: &FaultFs, steps: &[(FaultOp, &str)]) {
    let kinds = GC_OP_KINDS.iter().map(|&op| (op, None));
    let steps = steps.iter().map(|&(op, f)| (op, Some(f.to_string())));
    for (op, path_contains) in kinds.chain(steps) {
        fs.add_fault(FaultRule::counter(op, path_contains));
    }
}

#[test]
fn power_loss_at_every_step_of_a_gc_job_loses_nothing() {
    // A database with garbage spread over its value tables, GC only on request and background
    // work inline, so every run of the setup performs the same file operations and `run_gc`
    // the same jobs. A fault-free run counts the jobs' mutating operations; then, under every GC
    // variant, power is lost at each of them in turn (while GC writes outputs, syncs them, writes
    // or syncs the manifest edit, deletes victims, ...), and every case must strike inside GC.
    let key = |i: u32| format!("key{i:04}").into_bytes();
    let value = |i: u32, round: u32| {
        let mut v = format!("{i}-{round}-").into_bytes();
        v.resize(300 + (i as usize % 5) * 40, b'a' + round as u8);
        v
    };
    let keys_n: u32 = std::env::var("KEYSN").map_or(60, |v| v.parse().unwrap());
    #[allow(non_snake_case)]
    let KEYS = keys_n;
    let path = Path::new("/gc-crash/db");
    // Opens a fresh database on `fs` and fills it; returns it and what it must hold.
    let setup = |fs: &FaultFs, opts: &gleaner::Options, ctx: &str, steps| {
        let db = Db::open(path, opts.clone()).expect("open");
        let mut expect = Map::new();
        for i in 0..KEYS {
            db.put(key(i), value(i, 0)).expect("put");
            expect.insert(key(i), value(i, 0));
        }
        for i in (0..KEYS).filter(|i| i % 3 == 0) {
            db.put(key(i), value(i, 1)).expect("overwrite");
            expect.insert(key(i), value(i, 1));
        }
        let mut sync = WriteBatch::new();
        sync.put("synced", "yes");
        db.write(sync, &WriteOptions::sync()).expect("synced write");
        expect.insert(b"synced".to_vec(), b"yes".to_vec());
        db.compact_range(None, None).expect("compact");
        assert!(
            db.stats().values.garbage_records > 0,
            "{ctx}: garbage to collect"
        );
        add_counting_rules(fs, steps);
        (db, expect)
    };
    let kinds = GC_OP_KINDS.len();
    let mut cases = 0u64;
    // Policies without GC jobs (`blobdb`: compactions relocate values) have none to cut; the
    // crash simulation cuts power inside their compactions.
    let variants = common::gc_variants()
        .into_iter()
        .filter(|(v, _)| common::runs_gc_jobs(v));
    for (variant, tune) in variants {
        let opts = |fs: &FaultFs| {
            Schedule::Inline.tune(tune(
                options(fs).with_gc_threads(0).with_gc_garbage_ratio(0.1),
            ))
        };
        // The fault-free run: how many mutating operations GC performs, and of which kinds.
        let steps = gc_steps(&variant);
        let fs = sim::fresh_fs(7);
        let (db, _) = setup(&fs, &opts(&fs), &variant, steps);
        let before = fs.mutating_ops();
        let gc = db.run_gc().expect("fault-free GC");
        let ops = fs.mutating_ops() - before;
        let all = fs.fault_rule_matches();
        drop(db);
        assert!(gc.jobs > 0 && ops > 0, "{variant}: GC ran: {gc:?}");
        assert_eq!(
            all[..kinds].iter().sum::<u64>(),
            ops,
            "{variant}: every operation of the job is one of the kinds counted: {all:?}"
        );
        for (s, (op, file)) in steps.iter().enumerate() {
            assert!(
                all[kinds + s] > 0,
                "{variant}: the GC jobs never {op:?} {file}"
            );
        }
        eprintln!("{variant}: {} GC jobs, {ops} mutating operations", gc.jobs);
        // Crash at each operation, last first: the counts of the run that crashed one operation
        // later say which kind of operation this one is. Each crash loses the unsynced tails,
        // once whole and once torn with garbage.
        let mut later = all;
        for at in (0..ops).rev() {
            let mut now = None;
            for torn in [TornMode::None, TornMode::KeepPrefixWithGarbage] {
                let ctx = format!(
                    "GC {variant}: power loss at mutating operation {at} of {ops} of run_gc, \
                     torn {torn:?}"
                );
                let fs = sim::fresh_fs(7);
                let (db, expect) = setup(&fs, &opts(&fs), &ctx, steps);
                fs.set_crash_after(at);
                let gc = db.run_gc();
                assert!(fs.is_frozen(), "{ctx}: power loss did not strike inside GC");
                let counts = fs.fault_rule_matches();
                let diff: Vec<usize> = (0..kinds).filter(|&i| later[i] != counts[i]).collect();
                assert!(
                    diff.len() == 1 && later[diff[0]] == counts[diff[0]] + 1,
                    "{ctx}: the operations before the crash differ from the fault-free run's \
                     ({counts:?}, one operation later {later:?})"
                );
                let op = GC_OP_KINDS[diff[0]];
                // Deleting victims is best effort (the job has committed; a victim left behind
                // is an orphan the next open removes); any earlier step fails the job.
                assert!(
                    gc.is_err() || op == FaultOp::Remove,
                    "{ctx}: GC cannot succeed after power loss at a {op:?}"
                );
                drop(db);
                fs.crash(torn);
                let db = Db::open(path, opts(&fs)).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
                assert_eq!(contents(&db), expect, "{ctx}: every value survives");
                // GC after the crash finishes the job that was interrupted.
                db.run_gc()
                    .unwrap_or_else(|e| panic!("{ctx}: gc after recovery: {e}"));
                assert_eq!(contents(&db), expect, "{ctx}: and after GC");
                check_recovered_state(db, path, &opts(&fs), &ctx);
                cases += 1;
                now = Some(counts);
            }
            later = now.expect("two crashes at this operation");
        }
    }
    eprintln!("power loss struck inside GC in all {cases} cases");
}

/// `diffkv`'s merges are relocations inside a compaction: power lost at any mutating operation
/// of a compaction that merges (its value tables written and synced, its key tables, the
/// directory sync, the manifest edit, the inputs deleted) loses nothing, a compaction after the
/// crash merges again, and the garbage stays exact.
#[test]
fn power_loss_at_every_step_of_a_merge_loses_nothing() {
    let (_, tune) = common::gc_variants()
        .into_iter()
        .find(|(v, _)| v == "diffkv")
        .expect("the diffkv variant");
    let path = Path::new("/merge-crash/db");
    // No GC, and no compaction but the test's: flushes pile up in L0 until `compact_range`.
    let opts = |fs: &FaultFs| {
        Schedule::Inline.tune(tune(
            options(fs)
                .with_gc_threads(0)
                .with_l0_compaction_trigger(100)
                .with_l0_slowdown_trigger(200)
                .with_l0_stop_trigger(300),
        ))
    };
    let key = |i: u32| format!("key{i:04}").into_bytes();
    // 300 to 460 bytes: medium under the variant's limits (100 and 400), some large.
    let value = |i: u32, round: u32| {
        let mut v = format!("{i}-{round}-").into_bytes();
        v.resize(300 + (i as usize % 5) * 40, b'a' + round as u8);
        v
    };
    let setup = |fs: &FaultFs| {
        let db = Db::open(path, opts(fs)).expect("open");
        let mut expect = Map::new();
        for round in 0..3u32 {
            for i in (0..60u32).filter(|i| round == 0 || i % (round + 2) == 0) {
                db.put(key(i), value(i, round)).expect("put");
                expect.insert(key(i), value(i, round));
            }
            db.flush().expect("flush");
        }
        (db, expect)
    };
    let fs = sim::fresh_fs(8);
    let (db, _) = setup(&fs);
    let before = fs.mutating_ops();
    db.compact_range(None, None).expect("fault-free compaction");
    let ops = fs.mutating_ops() - before;
    let s = db.stats();
    let merges = s.gc.policy_stats.get("diffkv_merges").copied().unwrap_or(0);
    assert!(
        s.gc.relocated_values > 0 && merges > 0,
        "the compaction merged: {:?}",
        s.gc.policy_stats
    );
    drop(db);
    let mut cases = 0;
    for at in 0..ops {
        for torn in [TornMode::None, TornMode::KeepPrefixWithGarbage] {
            let ctx =
                format!("merge: power loss at mutating operation {at} of {ops}, torn {torn:?}");
            let fs = sim::fresh_fs(8);
            let (db, expect) = setup(&fs);
            fs.set_crash_after(at);
            let _ = db.compact_range(None, None);
            assert!(
                fs.is_frozen(),
                "{ctx}: power loss did not strike inside the compaction"
            );
            drop(db);
            fs.crash(torn);
            let db = Db::open(path, opts(&fs)).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            assert_eq!(contents(&db), expect, "{ctx}: every value survives");
            db.compact_range(None, None)
                .unwrap_or_else(|e| panic!("{ctx}: compaction after recovery: {e}"));
            assert_eq!(contents(&db), expect, "{ctx}: and after the merge");
            check_recovered_state(db, path, &opts(&fs), &ctx);
            cases += 1;
        }
    }
    eprintln!("power loss struck inside a merging compaction in all {cases} cases");
}

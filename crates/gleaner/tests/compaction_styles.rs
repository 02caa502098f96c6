//! The two compaction styles (`compaction_style`, docs/architecture.md, "Compaction
//! strategies"): a database reopened across them keeps every key exactly (checked against a
//! `BTreeMap` model), tiered compaction keeps several runs per level and drops a deletion only
//! where no older run holds its key, leveled compaction merges a level's runs into one, and the
//! tiered options are refused or dropped where leveled compaction would ignore them.
//!
//! Background work runs inline, so every test performs the same operations on every run; the
//! random ones print their seed (`GLEANER_SEED` replays it), and `GLEANER_STYLE_SWITCHES` sets
//! the number of reopens of the switching test (default 8).

mod sim;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{CompactionStyle, Compression, Db, Error, Options, ReadOptions, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small tables and memtables so that flushes and compactions run all the time, separated
/// values, background work inline.
fn base(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_memtable_size(4 << 10)
        .with_key_table_size(4 << 10)
        .with_level_base_size(16 << 10)
        .with_level_multiplier(4)
        .with_min_separated_value_size(100)
        .with_value_table_size(8 << 10)
        .with_gc_garbage_ratio(0.05)
}

fn style(o: Options, s: CompactionStyle) -> Options {
    o.with_compaction_style(s)
}

fn contents(db: &Db) -> Map {
    db.range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("item"))
        .collect()
}

/// Every key of the model reads its value, a scan returns exactly the model, the garbage
/// recount is exact.
fn assert_matches(db: &Db, model: &Map, ctx: &str) {
    assert!(
        contents(db) == *model,
        "{ctx}: a scan differs from the model"
    );
    for (k, v) in model {
        assert_eq!(
            db.get(k).expect("get").as_ref(),
            Some(v),
            "{ctx}: {}",
            String::from_utf8_lossy(k)
        );
    }
    let r = db.recount_garbage().expect("recount");
    assert!(r.mismatches.is_empty(), "{ctx}: {:#?}", r.mismatches);
}

/// Closes `db` and requires a clean `gleaner check`.
fn close_and_check(db: Db, path: &Path, opts: &Options, ctx: &str) {
    db.close().expect("close");
    drop(db);
    let report = gleaner::tools::check::check_db(path, opts).expect("check");
    assert!(
        report.problems.is_empty(),
        "{ctx}: check found problems: {:#?}",
        report.problems
    );
}

/// The most runs any level below L0 holds now.
fn most_runs(db: &Db) -> usize {
    db.stats()
        .levels
        .iter()
        .skip(1)
        .map(|l| l.runs)
        .max()
        .unwrap_or(0)
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:04}", rng.random_range(0..400)).into_bytes()
}

fn value(rng: &mut StdRng, step: usize) -> Vec<u8> {
    let len = if rng.random_bool(0.3) {
        rng.random_range(100..600)
    } else {
        rng.random_range(1..60)
    };
    let mut v = format!("{step}-").into_bytes();
    v.resize(len.max(v.len()), b'a' + (step % 26) as u8);
    v
}

/// Random puts, deletes and batches into `db` and `model`, with flushes, range compactions and
/// GC runs among them; every read along the way is checked.
fn churn(db: &Db, model: &mut Map, rng: &mut StdRng, ops: usize, ctx: &str) {
    for step in 0..ops {
        match rng.random_range(0..100) {
            0..=49 => {
                let (k, v) = (key(rng), value(rng, step));
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            50..=64 => {
                let k = key(rng);
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            65..=74 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.random_range(1..10) {
                    let k = key(rng);
                    if rng.random_bool(0.7) {
                        let v = value(rng, step);
                        b.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        b.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(b, &Default::default()).expect("write");
            }
            75..=89 => {
                let k = key(rng);
                assert_eq!(db.get(&k).expect("get").as_ref(), model.get(&k), "{ctx}");
            }
            90..=94 => db.flush().expect("flush"),
            95..=96 => {
                let (a, b) = (key(rng), key(rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                db.compact_range(Some(&lo), Some(&hi)).expect("compact");
            }
            _ => {
                db.run_gc().expect("gc");
            }
        }
    }
}

fn seed() -> u64 {
    match std::env::var("GLEANER_SEED") {
        Ok(s) => s.parse().expect("GLEANER_SEED must be a number"),
        Err(_) => rand::rng().random(),
    }
}

/// A database reopened under leveled and tiered compaction in turn, with writes, compactions
/// and GC under each, equals its model at every reopen and after every round; under leveled,
/// no level below L0 holds more than one run once the round's work is done; under tiered some
/// level held several at a time. Every close checks clean.
#[test]
fn reopening_across_styles_keeps_every_key() {
    let seed = seed();
    eprintln!("style switch seed: {seed} (replay with GLEANER_SEED={seed})");
    let switches = sim::env_u64("GLEANER_STYLE_SWITCHES").unwrap_or(8);
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultFs::new(seed);
    let path = Path::new("/switch");
    let mut model = Map::new();
    let mut tiered_runs = 0;
    // Start with either style, as the seed says.
    let first = CompactionStyle::ALL[rng.random_range(0..2)];
    for round in 0..switches {
        let now = CompactionStyle::ALL[(first as usize + round as usize) % 2];
        let ctx = format!("seed {seed} round {round} under {}", now.name());
        let opts = style(base(&fs), now);
        let db = Db::open(path, opts.clone()).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
        assert_matches(&db, &model, &format!("{ctx}, at the reopen"));
        for _ in 0..4 {
            churn(&db, &mut model, &mut rng, 300, &ctx);
            if now == CompactionStyle::Tiered {
                tiered_runs = tiered_runs.max(most_runs(&db));
            }
        }
        db.flush().expect("flush");
        if now == CompactionStyle::Leveled {
            assert!(
                most_runs(&db) <= 1,
                "{ctx}: leveled compaction left several runs in a level: {:?}",
                db.stats().levels
            );
        }
        assert_eq!(db.stats().compaction.style, now.name(), "{ctx}");
        assert_matches(&db, &model, &ctx);
        close_and_check(db, path, &opts, &ctx);
    }
    assert!(
        switches < 2 || tiered_runs >= 2,
        "seed {seed}: tiered compaction never kept two runs in a level"
    );
}

/// Options for the targeted tiered tests: uncompressed tables of equal-sized entries (so equal
/// flushes are equal runs), runs within twice each other's size similar, no merge for space.
fn tiered(fs: &FaultFs) -> Options {
    base(fs)
        .with_compaction_style(CompactionStyle::Tiered)
        .with_memtable_size(1 << 20)
        .with_compression(Compression::None)
        .with_tiered_run_trigger(2)
        .with_tiered_size_ratio(1.0)
        .with_tiered_max_space_amplification(100.0)
        .with_min_separated_value_size(1 << 20)
}

/// Puts `keys` (each a number) with 32-byte values naming `round`, then flushes.
fn flush_keys(db: &Db, model: &mut Map, keys: impl Iterator<Item = u32>, round: u32) {
    for i in keys {
        let (k, v) = (
            format!("key{i:05}").into_bytes(),
            format!("{round:032}").into_bytes(),
        );
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    }
    db.flush().expect("flush");
}

/// Under tiered compaction a merge of the newest runs keeps a deletion whose key an older run
/// still holds (dropping it would resurrect the old value), and the level keeps both runs; a
/// merge of everything drops it.
#[test]
fn a_tiered_merge_keeps_a_deletion_while_an_older_run_holds_the_key() {
    let fs = FaultFs::new(1);
    let path = Path::new("/tombstone");
    let opts = tiered(&fs);
    let db = Db::open(path, opts.clone()).expect("open");
    let mut model = Map::new();
    // Two equal flushes: similar runs, merged into one run of the last level.
    flush_keys(&db, &mut model, 0..400, 0);
    flush_keys(&db, &mut model, 400..800, 0);
    let last = db.stats().levels.len() - 1;
    let shape = |db: &Db| {
        let s = db.stats();
        (s.levels[0].files, s.levels[last].runs)
    };
    assert_eq!(shape(&db), (0, 1), "one run at the bottom");
    // A deletion of a key that run holds, in a small run, then another small run: the two
    // small ones are similar, the big one is not; they merge into a second run above it.
    db.delete("key00005").expect("delete");
    model.remove(b"key00005".as_slice());
    flush_keys(&db, &mut model, 800..820, 1);
    flush_keys(&db, &mut model, 820..841, 1);
    let s = db.stats();
    assert_eq!(shape(&db), (0, 2), "{:?}", s.levels);
    assert_eq!(
        s.compaction.dropped_tombstones, 0,
        "the older run holds the key"
    );
    assert_eq!(db.get("key00005").expect("get"), None);
    assert_matches(&db, &model, "after the merge of the small runs");
    // Everything merged: the deletion meets the only version it hides, and both go.
    db.compact_range(None, None).expect("compact");
    assert_eq!(shape(&db), (0, 1));
    assert_eq!(db.stats().compaction.dropped_tombstones, 1);
    assert_matches(&db, &model, "after the full merge");
    close_and_check(db, path, &opts, "tombstones");
    let db = Db::open(path, opts).expect("reopen");
    assert_matches(&db, &model, "after a reopen");
}

/// A tiered database whose last level holds several runs reopens under leveled compaction: it
/// reads right at once, and the open's own work merges the runs into one.
#[test]
fn a_level_of_several_runs_is_merged_into_one_under_leveled_compaction() {
    let fs = FaultFs::new(2);
    let path = Path::new("/to-leveled");
    let opts = tiered(&fs);
    let db = Db::open(path, opts.clone()).expect("open");
    let mut model = Map::new();
    flush_keys(&db, &mut model, 0..400, 0);
    flush_keys(&db, &mut model, 400..800, 0);
    flush_keys(&db, &mut model, 100..120, 1);
    flush_keys(&db, &mut model, 120..140, 1);
    assert_eq!(most_runs(&db), 2, "{:?}", db.stats().levels);
    close_and_check(db, path, &opts, "tiered");
    let leveled = base(&fs).with_compaction_style(CompactionStyle::Leveled);
    let db = Db::open(path, leveled.clone()).expect("reopen leveled");
    assert_eq!(most_runs(&db), 1, "merged by the open's own work");
    assert!(db.stats().compaction.compactions > 0);
    assert_matches(&db, &model, "under leveled");
    close_and_check(db, path, &leveled, "leveled");
}

/// A leveled database with data in several levels reopens under tiered compaction, which takes
/// each level's run as a run of its own; a full manual compaction leaves one run.
#[test]
fn a_leveled_tree_reopens_tiered_and_a_full_compaction_leaves_one_run() {
    let fs = FaultFs::new(3);
    let path = Path::new("/to-tiered");
    let mut rng = StdRng::seed_from_u64(3);
    let leveled = base(&fs).with_compaction_style(CompactionStyle::Leveled);
    let db = Db::open(path, leveled.clone()).expect("open");
    let mut model = Map::new();
    churn(&db, &mut model, &mut rng, 1500, "leveled");
    db.flush().expect("flush");
    let levels_in_use = db.stats().levels.iter().filter(|l| l.files > 0).count();
    assert!(levels_in_use >= 2, "{:?}", db.stats().levels);
    close_and_check(db, path, &leveled, "leveled");
    let tiered = base(&fs).with_compaction_style(CompactionStyle::Tiered);
    let db = Db::open(path, tiered.clone()).expect("reopen tiered");
    assert_matches(&db, &model, "under tiered");
    churn(&db, &mut model, &mut rng, 500, "tiered");
    db.compact_range(None, None).expect("compact");
    let runs: usize = db.stats().levels.iter().map(|l| l.runs).sum();
    assert_eq!(runs, 1, "{:?}", db.stats().levels);
    assert_matches(&db, &model, "after the full compaction");
    close_and_check(db, path, &tiered, "tiered");
}

fn invalid(e: Error) -> String {
    match e {
        Error::InvalidArgument(m) => m,
        other => panic!("expected InvalidArgument, got {other}"),
    }
}

/// A tiered option set explicitly under leveled compaction is refused, naming it; its default
/// is accepted; a bad style names `compaction_style`. A value saved under tiered is dropped
/// when the database switches to leveled, so a switch back starts from the default.
#[test]
fn tiered_options_are_refused_under_leveled_and_dropped_by_a_switch() {
    let fs = FaultFs::new(4);
    let path = Path::new("/options");
    let leveled = || base(&fs).with_compaction_style(CompactionStyle::Leveled);
    let e = invalid(
        Db::open(path, leveled().with_tiered_size_ratio(0.5)).expect_err("not read by leveled"),
    );
    assert!(
        e.contains("tiered_size_ratio") && e.contains("tiered") && e.contains("leveled"),
        "{e}"
    );
    drop(Db::open(path, leveled().with_tiered_size_ratio(0.01)).expect("the default asks nothing"));
    let mut o = base(&fs);
    let e = invalid(o.set("compaction_style", "universal").expect_err("unknown"));
    assert!(e.contains("compaction_style"), "{e}");
    let e = invalid(
        Db::open(
            path,
            base(&fs)
                .with_compaction_style(CompactionStyle::Tiered)
                .with_tiered_run_trigger(30),
        )
        .expect_err("above the slowdown trigger"),
    );
    assert!(e.contains("tiered_run_trigger"), "{e}");
    let tuned = base(&fs)
        .with_compaction_style(CompactionStyle::Tiered)
        .with_tiered_size_ratio(0.5);
    drop(Db::open(path, tuned).expect("tiered, tuned"));
    let db = Db::open(path, base(&fs)).expect("the saved style and ratio");
    assert_eq!(db.options().compaction_style(), CompactionStyle::Tiered);
    assert_eq!(db.options().tiered_size_ratio(), 0.5);
    drop(db);
    drop(Db::open(path, leveled()).expect("switch to leveled"));
    let db = Db::open(
        path,
        base(&fs).with_compaction_style(CompactionStyle::Tiered),
    )
    .expect("back to tiered");
    assert_eq!(
        db.options().tiered_size_ratio(),
        gleaner::options::DEFAULT_TIERED_SIZE_RATIO,
        "dropped by the switch"
    );
}

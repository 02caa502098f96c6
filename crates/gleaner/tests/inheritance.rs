//! Handles that name a garbage-collected value table resolve through inheritance records, however
//! many GC generations lie between the handle and the table that holds its record now.
//!
//! With hotness-aware writing a GC job writes a hot and a cold run; both may cover a key, and
//! every victim of the job records both as its children. When the hot and cold outputs of one
//! job are collected together by the next, the paths through the records double with each
//! generation while the live tables stay few. A handle whose key table is never compacted keeps
//! naming the first victim, so reading it walks all of that. The walk once counted visits and
//! gave up after 1,000: about ten generations spent them in the hot subtree, the cold table that
//! held the record was never reached, and `get` of a live key returned `Corruption`.

use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::options::DEFAULT_STALE_HANDLE_SHARE;
use gleaner::{Db, GcPolicyKind, Options};

/// Keys whose handles stay stale: written once, in the key table that is never compacted.
const STALE_KEYS: u32 = 40;
/// GC generations in which the hot and cold outputs of the previous one are collected
/// together. The old walk failed from about 11 on.
const GENERATIONS: u32 = 14;

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_gc_threads(0)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_num_levels(3)
        .with_memtable_size(16 << 20)
        .with_key_table_size(16 << 20)
        .with_value_table_size(16 << 20)
        .with_gc_max_input_size(1 << 30)
        .with_min_separated_value_size(100)
        .with_gc_garbage_ratio(0.001)
        // The stale key table must stay stale until the test rewrites it.
        .with_stale_handle_share(0.0)
}

fn value(key: &str, round: u32) -> Vec<u8> {
    let mut v = format!("{key} round {round} ").into_bytes();
    v.resize(600, b'v');
    v
}

fn stale_key(i: u32) -> String {
    format!("key-{i:03}")
}

/// Keys of a churn set `tag`: two that sort before and after every stale key, so a value table
/// holding them covers all stale keys, and `GENERATIONS` interior ones, one of which is
/// overwritten in each generation (its old record becomes garbage of the table holding it).
fn churn_keys(tag: &str) -> (Vec<String>, Vec<String>) {
    let bounds = vec![format!("kex-{tag}"), format!("kez-{tag}")];
    let interior = (0..GENERATIONS)
        .map(|g| format!("key-{:03}-{tag}", g * 2))
        .collect();
    (bounds, interior)
}

/// Writes `puts` in one memtable and flushes it (each flush is compacted into L1 at once).
fn flush_puts(db: &Db, puts: &[(&str, u32)]) {
    for (k, round) in puts {
        db.put(k, value(k, *round)).expect("put");
    }
    db.flush().expect("flush");
}

#[test]
fn a_stale_handle_resolves_through_many_generations_of_overlapping_hot_and_cold_outputs() {
    let fs = FaultFs::new(1);
    let path = std::path::Path::new("/db");
    let mut model: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();
    let mut put = |db: &Db, keys: &[String], round: u32| {
        let puts: Vec<(&str, u32)> = keys.iter().map(|k| (k.as_str(), round)).collect();
        for k in keys {
            model.insert(k.clone(), round);
        }
        flush_puts(db, &puts);
    };

    // The stale key table: the stale keys and some doomed ones go to value table V0; the doomed
    // ones are overwritten, and the compaction that merges both flushes counts their garbage in
    // V0 and, with a tiny level base, moves the result to the bottom level (L2).
    {
        let db = Db::open(
            path,
            options(&fs)
                .with_level_base_size(1 << 10)
                .with_l0_compaction_trigger(2),
        )
        .expect("open");
        let stale: Vec<String> = (0..STALE_KEYS).map(stale_key).collect();
        let doomed: Vec<String> = (0..STALE_KEYS)
            .step_by(4)
            .map(|i| format!("{}-z", stale_key(i)))
            .collect();
        let first: Vec<String> = stale.iter().chain(&doomed).cloned().collect();
        put(&db, &first, 0);
        put(&db, &doomed, 1);
        let levels = db.stats().levels;
        assert_eq!(
            levels.iter().map(|l| l.files).collect::<Vec<_>>(),
            vec![0, 0, 1],
            "the stale key table is alone at the bottom"
        );
        db.close().expect("close");
    }

    // From here on L1 never reaches its target, so nothing is compacted into L2: the stale
    // handles keep naming V0 for good. Every flush is compacted into L1 at once, which counts
    // the garbage of overwritten churn keys.
    let db = Db::open(
        path,
        options(&fs)
            .with_level_base_size(1 << 40)
            .with_l0_compaction_trigger(1),
    )
    .expect("reopen");
    let (s_bounds, s_interior) = churn_keys("s");
    let s_all: Vec<String> = s_bounds.iter().chain(&s_interior).cloned().collect();
    // The hot set: written twice, so the second flush finds its keys in the DropCache and writes
    // them to a hot table; then one of them is overwritten, which gives that table garbage.
    put(&db, &s_all, 0);
    put(&db, &s_all, 1);
    put(&db, &s_interior[..1], 2);
    // Generation 1: V0 (garbage of the doomed keys) and the hot table go together: the stale
    // keys' records to a cold output that keeps no garbage (and so is never collected again),
    // the hot keys' to a hot one; V0's handles resolve to both, hot first.
    let gc = db.run_gc().expect("gc");
    assert_eq!(
        (gc.jobs, gc.totals.victims),
        (1, 2),
        "one job collects V0 and the hot keys' table"
    );

    // The cold set, spanning the stale keys too: written once (cold), with filler keys that are
    // overwritten so that its table has garbage.
    let (d_bounds, d_interior) = churn_keys("d");
    let d_all: Vec<String> = d_bounds.iter().chain(&d_interior).cloned().collect();
    let filler: Vec<String> = (0..4).map(|i| format!("key-{i:03}-e")).collect();
    for g in 2..=GENERATIONS {
        if g == 2 {
            let first: Vec<String> = d_all.iter().chain(&filler).cloned().collect();
            put(&db, &first, 0);
            put(&db, &filler, 1);
        } else {
            // Garbage in the cold output of the last generation.
            put(&db, &d_interior[g as usize - 2..g as usize - 1], g);
        }
        // Garbage in the hot output of the last generation.
        put(&db, &s_interior[g as usize - 1..g as usize], g);
        let gc = db.run_gc().expect("gc");
        assert_eq!(
            (gc.jobs, gc.totals.victims),
            (1, 2),
            "generation {g}: one job collects the last hot and cold outputs"
        );
    }
    let stats = db.stats();
    // V0's, and those of the hot outputs of generations 1 to G - 1 and the cold outputs of
    // generations 2 to G - 1, which the stale handles reach through V0.
    assert!(
        stats.values.inheritance_records as u32 >= 2 * GENERATIONS - 2,
        "{} inheritance records",
        stats.values.inheritance_records
    );
    assert_eq!(
        stats.levels.iter().map(|l| l.files).collect::<Vec<_>>()[2],
        1,
        "the stale key table was never compacted"
    );

    let check_all = |db: &Db, when: &str| {
        for i in 0..STALE_KEYS {
            let k = stale_key(i);
            assert_eq!(
                db.get(&k)
                    .unwrap_or_else(|e| panic!("{when}: get {k}: {e}")),
                Some(value(&k, 0)),
                "{when}: {k}"
            );
        }
        for (k, round) in &model {
            assert_eq!(
                db.get(k).unwrap_or_else(|e| panic!("{when}: get {k}: {e}")),
                Some(value(k, *round)),
                "{when}: {k}"
            );
        }
        let recount = db.recount_garbage().expect("recount");
        assert!(
            recount.mismatches.is_empty(),
            "{when}: {:#?}",
            recount.mismatches
        );
        assert_eq!(recount.reclaimed_early, 0, "{when}: nothing is shadowed");
    };
    check_all(&db, "through inheritance");
    let via = db.stats().operations.gets_via_inheritance;
    assert!(
        via >= u64::from(STALE_KEYS),
        "the stale keys were read through inheritance ({via})"
    );

    // Reopened with stale-handle rewrites on (option `stale_handle_share`, default), the
    // open's compactions find the stale key table (every handle into V0, collected after the
    // table was written) and rewrite its handles to the tables holding each record: the tree's
    // shape asks for nothing, and no write comes.
    db.close().expect("close");
    let db = Db::open(
        path,
        options(&fs).with_stale_handle_share(DEFAULT_STALE_HANDLE_SHARE),
    )
    .expect("reopen");
    let stats = db.stats();
    assert!(
        stats.compaction.stale_handle_compactions >= 1,
        "{:?}",
        stats.compaction
    );
    assert!(stats.values.handles_rewritten >= u64::from(STALE_KEYS));
    assert_eq!(
        stats.levels.iter().map(|l| l.files).collect::<Vec<_>>()[2],
        1,
        "the stale key table was rewritten in place"
    );
    check_all(&db, "after the handles were rewritten");
    let via = db.stats().operations.gets_via_inheritance;
    for i in 0..STALE_KEYS {
        db.get(stale_key(i)).expect("get");
    }
    assert_eq!(
        db.stats().operations.gets_via_inheritance,
        via,
        "no stale key is read through inheritance any more"
    );
    // Nothing else qualifies: another open rewrites nothing.
    db.close().expect("close");
    let db = Db::open(
        path,
        options(&fs).with_stale_handle_share(DEFAULT_STALE_HANDLE_SHARE),
    )
    .expect("reopen");
    assert_eq!(db.stats().compaction.stale_handle_compactions, 0);
    check_all(&db, "after reopen");
}

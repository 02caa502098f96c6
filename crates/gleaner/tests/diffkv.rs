//! Policy `diffkv`: values by size — small ones inline, medium ones in the vTree (merged by
//! the index tree's compactions into sorted groups of their level), large ones in vLogs (new and
//! GC-moved apart, collected greedily).
//!
//! What is tested here: each value lands in its class and medium values move down the vTree as
//! their keys move down the index tree, while large ones stay in their vLogs until GC moves
//! them into cold vLogs; the scan-optimised merge bounds the sorted groups over a key at the
//! deepest level (and without it they grow with every round); vTables of key ranges no
//! compaction reaches are collected by GC; bad options are refused by name. The engine suites
//! (model, crash, fault, stress, SIGKILL loop, policy switch) run `diffkv` as one of their
//! variants.

#[allow(dead_code, reason = "only the dump and read helpers are used here")]
mod common;
#[allow(dead_code, reason = "only the shared options are used here")]
mod rounds;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use common::dump::{Layout, manifest_dump, newest_entries};
use common::reads::{assert_reads as check, own_figure as own};
use gleaner::gc::diffkv::{CLASS_VLOG_COLD, CLASS_VLOG_HOT, CLASS_VTREE, TableMeta};
use gleaner::io::FaultFs;
use gleaner::{Db, GcPolicyKind, Options, Partitioning};

const SMALL_MAX: u64 = 100;
const LARGE_MIN: u64 = 2_000;

/// Inline background work on the real file system (so `gleaner dump` reads the tables), a
/// small tree that grows levels quickly, GC only on request.
fn options() -> Options {
    rounds::inline_options(&FaultFs::new(28))
        .with_file_system(Arc::new(gleaner::io::PosixFs::new()))
        .with_gc_policy(GcPolicyKind::Diffkv)
        .with_min_separated_value_size(SMALL_MAX)
        .with_diffkv_small_max(SMALL_MAX)
        .with_diffkv_large_min(LARGE_MIN)
        .with_memtable_size(32 << 10)
        .with_key_table_size(4 << 10)
        .with_level_base_size(4 << 10)
        .with_level_multiplier(3)
        .with_l0_compaction_trigger(2)
        .with_value_table_size(16 << 10)
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

/// Key `i`'s size class: 0 small, 1 medium, 2 large.
fn size_class(i: u32) -> u32 {
    i % 3
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let len = match size_class(i) {
        0 => 40,
        1 => 300 + (i as usize % 7) * 50,
        _ => LARGE_MIN as usize + (i as usize % 5) * 100,
    };
    let mut v = format!("{i}/{round}/").into_bytes();
    v.resize(len, b'a' + (round % 26) as u8);
    v
}

/// A vTable's metadata.
fn meta(layout: &Layout, table: u64) -> TableMeta {
    let t = &layout.value_tables[&table];
    let (tag, data) = t.meta.as_ref().expect("diffkv tables carry metadata");
    assert_eq!(tag, "diffkv");
    TableMeta::decode(data).expect("decodes")
}

/// Every value in its class; every medium value in a vTable no deeper than its key's entry,
/// and at the deepest level in a vTable of that level (merged on the way down) unless GC wrote
/// it. Returns the value table of each separated key.
fn check_placement(dir: &Path, ctx: &str) -> BTreeMap<String, u64> {
    let layout = Layout::read(dir);
    let deepest = layout
        .key_tables
        .values()
        .copied()
        .max()
        .expect("key tables");
    let mut out = BTreeMap::new();
    for (k, (key_table, handle)) in newest_entries(dir) {
        let i: u32 = k["key".len()..].parse().expect("key number");
        let level = layout.key_tables[&key_table];
        match (size_class(i), handle) {
            (0, None) => {}
            (0, Some(h)) => panic!("{ctx}: small {k} separated into {h:?}"),
            (_, None) => panic!("{ctx}: {k} inline"),
            (1, Some((table, _))) => {
                assert_eq!(layout.value_tables[&table].class, CLASS_VTREE, "{ctx}: {k}");
                let m = meta(&layout, table);
                if !m.by_gc {
                    assert!(
                        m.level <= level,
                        "{ctx}: {k} at L{level}, its vTable at {m:?}"
                    );
                    if level == deepest {
                        assert_eq!(m.level, deepest, "{ctx}: {k} merged into the deepest level");
                    }
                }
                out.insert(k, table);
            }
            (_, Some((table, _))) => {
                let class = layout.value_tables[&table].class;
                assert!(
                    class == CLASS_VLOG_HOT || class == CLASS_VLOG_COLD,
                    "{ctx}: large {k} in class {class}"
                );
                out.insert(k, table);
            }
        }
    }
    out
}

/// Values land by size; as the tree grows, medium values are merged down with their keys, and
/// large ones stay in the vLogs flushes wrote until GC moves them into cold vLogs.
#[test]
fn values_land_by_size_and_medium_ones_move_down_with_their_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut model = BTreeMap::new();
    let keys = 1800;
    let db = Db::open(&path, options()).expect("open");
    for i in 0..keys {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.flush().expect("flush");
    for class in ["small", "medium", "large"] {
        let placed = own(&db, &format!("diffkv_placed_{class}"));
        assert_eq!(placed, u64::from(keys / 3), "{class} values flushed");
    }
    db.close().expect("close");
    let first = check_placement(&path, "after the load");
    // Rounds that overwrite the medium keys (and no large one) grow the tree and merge.
    let db = Db::open(&path, options()).expect("reopen");
    for round in 1..6 {
        for i in (0..keys).filter(|i| size_class(*i) < 2 && i % 5 != round % 5) {
            db.put(key(i), value(i, round)).expect("put");
            model.insert(key(i), value(i, round));
        }
        db.flush().expect("flush");
    }
    check(&db, &model, "after the rounds");
    assert!(
        own(&db, "diffkv_merges") > 0,
        "{:?}",
        db.stats().gc.policy_stats
    );
    let levels = db.stats().levels;
    let deepest = levels.iter().rposition(|l| l.files > 0).expect("tables");
    assert!(deepest >= 3, "the tree grew: {levels:?}");
    // Compactions into levels above the two deepest moved handles, not values (lazy merge).
    assert!(
        own(&db, "diffkv_lazy_skips") > 0,
        "{:?}",
        db.stats().gc.policy_stats
    );
    db.close().expect("close");
    let later = check_placement(&path, "after the rounds");
    // `gleaner dump` says what the metadata means: flushed vTables at level 0, merged ones at
    // their output level.
    let manifest = manifest_dump(&path);
    let said = |pred: &dyn Fn(&str) -> bool| {
        manifest
            .lines()
            .any(|l| l.starts_with("  policy_meta: policy=diffkv data=") && pred(l))
    };
    assert!(said(&|l| l.ends_with(" (level 0)")), "{manifest}");
    assert!(
        said(&|l| l.contains(" (level ") && !l.ends_with(" (level 0)")),
        "{manifest}"
    );
    let large_kept = (0..keys)
        .filter(|i| size_class(*i) == 2)
        .all(|i| later[&key(i)] == first[&key(i)]);
    assert!(large_kept, "large values stay in the vLogs the load wrote");
    // Overwriting the large keys leaves garbage in the hot vLogs; GC moves their survivors
    // into cold ones.
    let db = Db::open(&path, options().with_diffkv_gc_ratio(0.1)).expect("reopen");
    for i in (0..keys).filter(|i| size_class(*i) == 2 && i % 2 == 0) {
        db.put(key(i), value(i, 9)).expect("put");
        model.insert(key(i), value(i, 9));
    }
    db.compact_range(None, None).expect("compact");
    let gc = db.run_gc().expect("gc");
    assert!(gc.jobs > 0, "{gc:?}");
    check(&db, &model, "after GC");
    db.compact_range(None, None).expect("compact");
    db.close().expect("close");
    let layout = Layout::read(&path);
    let after_gc = check_placement(&path, "after GC");
    let cold = after_gc
        .values()
        .filter(|t| layout.value_tables[*t].class == CLASS_VLOG_COLD)
        .count();
    assert!(cold > 0, "GC moved large survivors into cold vLogs");
}

/// The most vTables at `level` over one key.
fn sorted_runs(layout: &Layout, level: u32) -> usize {
    let tables: Vec<(&str, &str)> = layout
        .value_tables
        .iter()
        .filter(|(_, t)| t.class == CLASS_VTREE)
        .filter(|(n, _)| {
            let m = meta(layout, **n);
            !m.by_gc && m.level == level
        })
        .map(|(_, t)| (t.smallest.as_str(), t.largest.as_str()))
        .collect();
    tables
        .iter()
        .map(|(lo, _)| tables.iter().filter(|(s, l)| s <= lo && lo <= l).count())
        .max()
        .unwrap_or(0)
}

/// Rounds that overwrite a part of the keys, each compacted down: every round appends a sorted
/// group over the whole key range at the deepest level. With the scan-optimised merge the
/// groups over any key stay within `diffkv_max_sorted_runs` + 1 (the group the last merge
/// wrote); without it (a limit too high to reach) they grow with the rounds.
#[test]
fn the_scan_optimised_merge_bounds_the_sorted_groups_over_a_key() {
    let run = |max_runs: u64| {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        // Only the run tags merge: no table is tagged for its garbage.
        let opts = options()
            .with_diffkv_max_sorted_runs(max_runs)
            .with_diffkv_gc_ratio(1.0)
            .with_diffkv_vtree_gc_ratio(1.0);
        let mut most = 0;
        let mut model = BTreeMap::new();
        for round in 0..8u32 {
            let db = Db::open(&path, opts.clone()).expect("open");
            for i in (0..300).filter(|i| size_class(*i) == 1 && (round == 0 || i % 4 == round % 4))
            {
                db.put(key(i), value(i, round)).expect("put");
                model.insert(key(i), value(i, round));
            }
            db.compact_range(None, None).expect("compact");
            check(&db, &model, &format!("round {round}"));
            db.close().expect("close");
            let layout = Layout::read(&path);
            let deepest = layout.key_tables.values().copied().max().expect("tables");
            most = most.max(sorted_runs(&layout, deepest));
        }
        most
    };
    let bounded = run(2);
    assert!(
        bounded <= 3,
        "at most 2 + 1 sorted groups over a key: {bounded}"
    );
    let unbounded = run(1000);
    assert!(
        unbounded > 3,
        "without the merge the groups pile up: {unbounded}"
    );
}

/// Past the run limit, the merge takes the small new groups over a key before the large old one
/// under them: a level holding one large group and a small group added per round rewrites the
/// small ones, never the large one, which only grows old (the authors' rule tagged every
/// vTable over the key, rewriting the large group each time the limit was passed).
#[test]
fn the_run_bound_merges_the_small_new_groups_not_the_large_old_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let opts = options()
        .with_diffkv_max_sorted_runs(3)
        .with_diffkv_gc_ratio(1.0)
        .with_diffkv_vtree_gc_ratio(1.0);
    let medium: Vec<u32> = (0..3000).filter(|i| size_class(*i) == 1).collect();
    let mut model = BTreeMap::new();
    let (mut moved_for_runs, mut most) = (0, 0);
    // The vTables of the large group, how many, and their level.
    let (mut large, mut large_count, mut large_level) = (BTreeSet::new(), 0, 0);
    for round in 0..13u32 {
        let db = Db::open(&path, opts.clone()).expect("open");
        // Round 0 writes the large group; each later one ten values spread over its range.
        let keys: Vec<u32> = if round == 0 {
            medium.clone()
        } else {
            (0..10).map(|j| medium[(round + 97 * j) as usize]).collect()
        };
        for i in keys {
            db.put(key(i), value(i, round)).expect("put");
            model.insert(key(i), value(i, round));
        }
        db.compact_range(None, None).expect("compact");
        check(&db, &model, &format!("round {round}"));
        moved_for_runs += own(&db, "diffkv_moves_for_runs");
        db.close().expect("close");
        let layout = Layout::read(&path);
        let deepest = layout.key_tables.values().copied().max().expect("tables");
        most = most.max(sorted_runs(&layout, deepest));
        let vtables: BTreeSet<u64> = layout
            .value_tables
            .iter()
            .filter(|(_, t)| t.class == CLASS_VTREE)
            .map(|(n, _)| *n)
            .collect();
        // The first small round deepens the tree and merges everything into the new level:
        // the large group is the group with the most vTables there after it.
        if round <= 1 {
            let mut groups: BTreeMap<Option<u64>, BTreeSet<u64>> = BTreeMap::new();
            for n in vtables {
                groups
                    .entry(meta(&layout, n).written_at)
                    .or_default()
                    .insert(n);
            }
            large = groups
                .into_values()
                .max_by_key(|g| g.len())
                .expect("vTables");
            large_count = large.len();
            large_level = deepest;
        } else {
            assert_eq!(deepest, large_level, "the tree keeps its depth");
            large.retain(|n| vtables.contains(n));
        }
    }
    assert!(most <= 4, "at most 3 + 1 sorted groups over a key: {most}");
    // The large group's vTables are all still there (its values were never moved)...
    assert!(
        large_count >= 10,
        "the large group spans vTables: {large_count}"
    );
    assert_eq!(large.len(), large_count, "vTables of the large group left");
    // ... and the small groups merged a few times each (one rewrite of the large group alone
    // would be a thousand).
    assert!(
        (1..medium.len() as u64).contains(&moved_for_runs),
        "values moved for the run bound: {moved_for_runs} (large group: {})",
        medium.len()
    );
}

/// A scan reads the medium values of its range group by group: records of one sorted group that
/// lie close together come in one read, and a group read forward again is read ahead, so a
/// scan over interleaved groups costs a few reads per vTable it meets, not one per value.
#[test]
fn a_scan_reads_a_few_times_per_vtable_not_once_per_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let medium = |i: u32, round: u32| {
        let mut v = format!("{i}/{round}/").into_bytes();
        v.resize(400 + (i as usize % 5) * 30, b'a' + (round % 26) as u8);
        v
    };
    let mut model = BTreeMap::new();
    // Groups interleave: each round rewrites every fourth key and is merged into the deepest
    // level as a group of its own.
    for round in 0..5u32 {
        let db = Db::open(&path, options().with_diffkv_max_sorted_runs(1000)).expect("open");
        for i in (0..3000u32).filter(|i| round == 0 || i % 4 == round % 4) {
            db.put(key(i), medium(i, round)).expect("put");
            model.insert(key(i), medium(i, round));
        }
        db.compact_range(None, None).expect("compact");
        db.close().expect("close");
    }
    // One key per vTable the scan meets, read before counting so that every table is open.
    let tables: BTreeMap<u64, String> = newest_entries(&path)
        .into_iter()
        .filter_map(|(k, (_, h))| h.map(|(table, _)| (table, k)))
        .collect();
    // With reader threads (prefetching is off under inline background work), and the key
    // tables' blocks cached by a scan that reads no value, so what is counted is value reads.
    let db = Db::open(
        &path,
        options()
            .with_inline_background_work(false)
            .with_block_cache_size(16 << 20)
            .with_scan_prefetch_depth(16),
    )
    .expect("open");
    let lazy = gleaner::ReadOptions {
        lazy_values: true,
        ..Default::default()
    };
    let mut it = db.iter(&lazy).expect("iter");
    it.seek_to_first().expect("seek");
    let mut keys = 0;
    while it.valid() {
        keys += 1;
        it.next().expect("next");
    }
    drop(it);
    assert_eq!(keys, model.len());
    for k in tables.values() {
        assert!(db.get(k).expect("get").is_some());
    }
    let reads = || db.stats().io.get("user_read").map_or(0, |c| c.read_ops);
    let before = reads();
    let mut got = BTreeMap::new();
    for item in db
        .range(.., &gleaner::ReadOptions::default())
        .expect("range")
    {
        let (k, v) = item.expect("item");
        got.insert(String::from_utf8(k).expect("utf8"), v);
    }
    let scan_reads = reads() - before;
    assert_eq!(got, model, "the scan is exact");
    // Per vTable at most two reads (the first run, then a window that covers the rest of a
    // table of `value_table_size`), and the first value, which the scan reads itself.
    assert!(
        scan_reads <= 2 * tables.len() as u64 + 1,
        "{scan_reads} reads for {} values in {} vTables",
        model.len(),
        tables.len()
    );
    assert!(
        scan_reads * 4 < model.len() as u64,
        "{scan_reads} reads for {} values",
        model.len()
    );
    db.close().expect("close");
}

/// A vTable no merge takes keeps its garbage until GC collects it at `diffkv_vtree_gc_ratio`
/// (the authors' keyless vTables could be reclaimed only by a merge through their keys).
#[test]
fn vtables_no_merge_takes_are_collected_by_gc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let opts = options()
        .with_diffkv_gc_ratio(1.0)
        .with_diffkv_vtree_gc_ratio(0.2);
    let db = Db::open(&path, opts).expect("open");
    let medium: Vec<u32> = (0..600).filter(|i| size_class(*i) == 1).collect();
    let mut model = BTreeMap::new();
    for &i in &medium {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.compact_range(None, None).expect("compact");
    // Deleting every other key leaves half of each deepest vTable garbage; the compaction that
    // drops the deleted versions leaves the live half in place (a vTable of its own level, not
    // tagged), and no merge comes for it.
    for &i in medium.iter().filter(|i| *i % 2 == 0) {
        db.delete(key(i)).expect("delete");
        model.remove(&key(i));
    }
    db.compact_range(None, None).expect("compact");
    let gc = db.run_gc().expect("gc");
    assert!(gc.jobs > 0 && gc.totals.victims > 0, "{gc:?}");
    check(&db, &model, "after GC");
    for &i in medium.iter().filter(|i| *i % 2 == 0) {
        assert_eq!(db.get(key(i)).expect("get"), None);
    }
    db.close().expect("close");
    let layout = Layout::read(&path);
    let by_gc = layout
        .value_tables
        .iter()
        .filter(|(_, t)| t.class == CLASS_VTREE)
        .any(|(n, _)| meta(&layout, *n).by_gc);
    assert!(
        by_gc,
        "GC wrote the live medium values into vTables of its own"
    );
}

/// Bad options are refused by name: the thresholds out of order, a ratio of 0, and
/// `min_separated_value_size` set apart from `diffkv_small_max`.
#[test]
fn bad_options_are_refused_by_name() {
    let fs = FaultFs::new(29);
    let base = || rounds::inline_options(&fs).with_gc_policy(GcPolicyKind::Diffkv);
    for (opts, name) in [
        (
            base()
                .with_diffkv_small_max(5000)
                .with_diffkv_large_min(4000),
            "diffkv_small_max",
        ),
        (base().with_diffkv_gc_ratio(0.0), "diffkv_gc_ratio"),
        (
            base().with_diffkv_vtree_gc_ratio(1.5),
            "diffkv_vtree_gc_ratio",
        ),
        (
            base().with_diffkv_max_sorted_runs(0),
            "diffkv_max_sorted_runs",
        ),
        (base().with_diffkv_merge_levels(0), "diffkv_merge_levels"),
        (
            base().with_num_levels(4).with_diffkv_merge_levels(5),
            "diffkv_merge_levels",
        ),
        (
            base()
                .with_min_separated_value_size(100)
                .with_diffkv_small_max(128),
            "min_separated_value_size",
        ),
    ] {
        let err = Db::open(Path::new("/db"), opts).expect_err(name);
        assert!(err.to_string().contains(name), "{name}: {err}");
        assert!(fs.list_files().is_empty(), "{name}: nothing written");
    }
    // Another policy refuses the options only `diffkv` reads.
    let err = Db::open(
        Path::new("/db"),
        rounds::inline_options(&fs).with_diffkv_max_sorted_runs(3),
    )
    .expect_err("refused");
    assert!(err.to_string().contains("diffkv_max_sorted_runs"), "{err}");
}

/// Each partition of a partitioned index tree has a vTree of its own: a medium value merges
/// into the deepest level of its key's partition, the cold partition's too while the hot one
/// is the deeper (the merges once counted levels in the whole tree, and the cold partition's
/// never merged); the values of keys moved into the hot partition join its vTree at its first
/// merge through them, even when the moved table reaches the bottom by a trivial move.
#[test]
fn each_partition_merges_medium_values_into_a_vtree_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    // Keys move only when the test says: the detector does not tick.
    let opts = options()
        .with_partitioning(Partitioning::Dpkv)
        .with_dpkv_decay_interval(86_400.0);
    let keys = 1800;
    let hot = |i: u32| (1000..1200).contains(&i);
    let mut model = BTreeMap::new();
    let db = Db::open(&path, opts.clone()).expect("open");
    db.move_hot_prefixes(&[b"key010", b"key011"]).expect("move");
    for round in 0..4 {
        for i in (0..keys).filter(|i| size_class(*i) < 2 && (round == 0 || i % 4 != round)) {
            db.put(key(i), value(i, round)).expect("put");
            model.insert(key(i), value(i, round));
        }
        db.flush().expect("flush");
    }
    db.compact_range(None, None).expect("compact");
    check(&db, &model, "after the rounds");
    db.close().expect("close");
    let placed = |ctx: &str, hot: &dyn Fn(u32) -> bool| {
        let layout = Layout::read(&path);
        let deepest = |p: u32| {
            layout
                .key_tables
                .values()
                .copied()
                .filter(|l| l / 12 == p)
                .max()
        };
        let (cold_bottom, hot_bottom) = (deepest(0).expect("cold"), deepest(1).expect("hot"));
        assert!(
            hot_bottom > cold_bottom,
            "{ctx}: L{cold_bottom}, L{hot_bottom}"
        );
        let mut merged = [0, 0];
        for (k, (key_table, handle)) in newest_entries(&path) {
            let i: u32 = k["key".len()..].parse().expect("key number");
            let level = layout.key_tables[&key_table];
            let partition = level / 12;
            assert_eq!(partition, u32::from(hot(i)), "{ctx}: {k} at L{level}");
            let Some((table, _)) = handle.filter(|_| size_class(i) == 1) else {
                continue;
            };
            let m = meta(&layout, table);
            if level == [cold_bottom, hot_bottom][partition as usize] && !m.by_gc {
                assert_eq!(
                    m.level, level,
                    "{ctx}: {k} merged into its partition's bottom"
                );
                merged[partition as usize] += 1;
            }
        }
        assert!(merged[0] > 0 && merged[1] > 0, "{ctx}: {merged:?}");
    };
    placed("after the rounds", &hot);
    // Keys 1100..1199 move cold; 1500..1599 hot. Their values sit in the other partition's
    // vTree until a merge there takes them.
    let hot_now = |i: u32| (1000..1100).contains(&i) || (1500..1600).contains(&i);
    let db = Db::open(&path, opts).expect("reopen");
    db.move_hot_prefixes(&[b"key010", b"key015"]).expect("move");
    db.compact_range(None, None).expect("compact");
    check(&db, &model, "after the move");
    db.close().expect("close");
    placed("after the move", &hot_now);
}

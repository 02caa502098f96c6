//! Range deletes through `Db` (issue 25): validated before anything is written, and honoured
//! by point reads and iterators in both directions, snapshots included. (Crate tests: no public
//! API writes a range tombstone until flushes, key tables and compaction keep them.)

use std::path::Path;
use std::sync::Arc;

use crate::io::FaultFs;
use crate::options::MAX_KEY_SIZE;
use crate::{Db, Options, WriteBatch};

fn open() -> Db {
    let opts = Options::default().with_file_system(Arc::new(FaultFs::new(1)));
    Db::open(Path::new("/rd"), opts).expect("open")
}

#[test]
fn an_empty_or_oversized_range_delete_is_refused_and_writes_nothing() {
    let db = open();
    db.put("b", "1").expect("put");
    let before = db.stats().last_sequence;
    for (start, end) in [
        (b"c".to_vec(), b"a".to_vec()),
        (b"b".to_vec(), b"b".to_vec()),
        (b"a".to_vec(), vec![b'z'; MAX_KEY_SIZE + 1]),
        (vec![b'a'; MAX_KEY_SIZE + 1], b"z".to_vec()),
    ] {
        let mut batch = WriteBatch::new();
        batch.put("x", "y");
        batch.delete_range(&start, &end);
        let err = db
            .write(batch, &crate::WriteOptions::default())
            .expect_err("refused");
        assert!(
            matches!(err, crate::Error::InvalidArgument(_)),
            "{}..{} bytes: {err}",
            start.len(),
            end.len()
        );
    }
    assert_eq!(
        db.stats().last_sequence,
        before,
        "no sequence number was used"
    );
    assert_eq!(
        db.get("x").expect("get"),
        None,
        "nothing of the batch was written"
    );
    assert_eq!(db.get("b").expect("get"), Some(b"1".to_vec()));
}

#[test]
fn a_range_delete_in_a_batch_hides_the_memtables_older_versions() {
    let db = open();
    for k in ["a", "b", "c"] {
        db.put(k, "old").expect("put");
    }
    let snap = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.delete_range("a", "c");
    batch.put("b", "new");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    assert_eq!(db.get("a").expect("get"), None);
    assert_eq!(
        db.get("b").expect("get"),
        Some(b"new".to_vec()),
        "written after"
    );
    assert_eq!(
        db.get("c").expect("get"),
        Some(b"old".to_vec()),
        "end is exclusive"
    );
    let at = crate::ReadOptions {
        snapshot: Some(&snap),
        ..Default::default()
    };
    assert_eq!(db.get_with("a", &at).expect("get"), Some(b"old".to_vec()));
}

/// User keys and values, in key order.
type Pairs = Vec<(String, String)>;

/// Every user key and value an iterator sees, forward then backward.
fn scan(db: &Db, opts: &crate::ReadOptions<'_>) -> (Pairs, Pairs) {
    let mut it = db.iter(opts).expect("iter");
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    let mut fwd = Vec::new();
    it.seek_to_first().expect("seek");
    while it.valid() {
        fwd.push((text(it.key()), text(it.value())));
        it.next().expect("next");
    }
    let mut back = Vec::new();
    it.seek_to_last().expect("seek");
    while it.valid() {
        back.push((text(it.key()), text(it.value())));
        it.prev().expect("prev");
    }
    back.reverse();
    (fwd, back)
}

#[test]
fn iterators_skip_what_a_range_delete_hides_in_both_directions() {
    let db = open();
    for k in ["a", "b", "c", "d", "e"] {
        db.put(k, format!("{k}1")).expect("put");
    }
    let snap = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.delete_range("b", "e");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    db.put("c", "c2").expect("put");
    let pairs = |v: &[(&str, &str)]| -> Pairs {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let now = pairs(&[("a", "a1"), ("c", "c2"), ("e", "e1")]);
    let (fwd, back) = scan(&db, &crate::ReadOptions::default());
    assert_eq!(fwd, now);
    assert_eq!(back, now);
    // Seeks land past the deleted keys, in both directions.
    let mut it = db.iter(&crate::ReadOptions::default()).expect("iter");
    it.seek(b"b").expect("seek");
    assert_eq!(it.key(), b"c");
    it.seek(b"d").expect("seek");
    assert_eq!(it.key(), b"e");
    it.seek_for_prev(b"b").expect("seek");
    assert_eq!(it.key(), b"a");
    it.seek_for_prev(b"d").expect("seek");
    assert_eq!(it.key(), b"c");
    // A snapshot older than the delete sees every key.
    let at = crate::ReadOptions {
        snapshot: Some(&snap),
        ..Default::default()
    };
    let then = pairs(&[
        ("a", "a1"),
        ("b", "b1"),
        ("c", "c1"),
        ("d", "d1"),
        ("e", "e1"),
    ]);
    let (fwd, back) = scan(&db, &at);
    assert_eq!(fwd, then);
    assert_eq!(back, then);
}

/// A memtable holding only range tombstones is not empty: the write path switches it, and a
/// reopen replays and flushes it, without error.
#[test]
fn a_memtable_of_range_tombstones_alone_flushes_and_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let mut batch = WriteBatch::new();
    batch.delete_range("a", "b");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    assert!(db.stats().memtable_bytes > 0);
    db.flush().expect("flush");
    db.close().expect("close");
    let mut batch = WriteBatch::new();
    batch.delete_range("c", "d");
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    db.write(batch, &crate::WriteOptions::default())
        .expect("write");
    db.close().expect("close");
    Db::open(dir.path(), Options::default())
        .expect("reopen, replaying a WAL of one range delete")
        .close()
        .expect("close");
}

/// Random puts, deletes, range deletes and flushes over a small key space, against a model:
/// full scans in both directions and point reads agree at every step, and after compaction.
#[test]
fn random_range_deletes_agree_with_a_model_in_both_directions() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let opts = Options::default()
            .with_file_system(Arc::new(FaultFs::new(seed)))
            .with_inline_background_work(true);
        let db = Db::open(Path::new("/rdm"), opts).expect("open");
        let mut model: BTreeMap<String, String> = BTreeMap::new();
        let key = |n: u32| format!("k{n:03}");
        for step in 0..120 {
            match rng.random_range(0..10) {
                0..=4 => {
                    let k = key(rng.random_range(0..60));
                    let v = format!("{k}@{step}");
                    db.put(&k, &v).expect("put");
                    model.insert(k, v);
                }
                5 => {
                    let k = key(rng.random_range(0..60));
                    db.delete(&k).expect("delete");
                    model.remove(&k);
                }
                6..=7 => {
                    let a = rng.random_range(0..60);
                    let (s, e) = (key(a), key(a + rng.random_range(1..20)));
                    db.delete_range(&s, &e).expect("delete_range");
                    model.retain(|k, _| !(k >= &s && k < &e));
                }
                8 => db.flush().expect("flush"),
                _ => db.compact_range(None, None).expect("compact"),
            }
            let lo = rng.random_bool(0.3).then(|| key(rng.random_range(0..60)));
            let hi = rng.random_bool(0.3).then(|| key(rng.random_range(0..60)));
            let want: Pairs = model
                .iter()
                .filter(|(k, _)| lo.as_ref().is_none_or(|l| *k >= l))
                .filter(|(k, _)| hi.as_ref().is_none_or(|h| *k < h))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let opts = crate::ReadOptions::default().bounds(
                lo.clone().map(String::into_bytes),
                hi.clone().map(String::into_bytes),
            );
            let (fwd, back) = scan(&db, &opts);
            assert_eq!(fwd, want, "seed {seed} step {step} {lo:?}..{hi:?}: forward");
            assert_eq!(
                back, want,
                "seed {seed} step {step} {lo:?}..{hi:?}: backward"
            );
            // A walk turning at random: each turn starts where the last move left the
            // children, which a skip over a deleted range may have left far apart.
            let keys: Vec<&String> = want.iter().map(|(k, _)| k).collect();
            let mut it = db.iter(&opts).expect("iter");
            it.seek_to_last().expect("seek");
            let mut at = keys.len().checked_sub(1);
            for _ in 0..30 {
                let Some(i) = at else { break };
                assert!(it.valid(), "seed {seed} step {step}: walk ended early");
                assert_eq!(
                    it.key(),
                    keys[i].as_bytes(),
                    "seed {seed} step {step}: walk"
                );
                if rng.random_bool(0.5) {
                    it.next().expect("next");
                    at = (i + 1 < keys.len()).then_some(i + 1);
                } else {
                    it.prev().expect("prev");
                    at = i.checked_sub(1);
                }
            }
            if at.is_none() {
                assert!(!it.valid(), "seed {seed} step {step}: walk past the end");
            }
            for n in 0..60 {
                let k = key(n);
                let got = db
                    .get(&k)
                    .expect("get")
                    .map(|v| String::from_utf8(v).unwrap());
                assert_eq!(
                    got.as_ref(),
                    model.get(&k),
                    "seed {seed} step {step}: get {k}"
                );
            }
        }
    }
}

/// A range delete of separated values through flush, reopen and compaction: reads honour it at
/// every stage (a snapshot older than it still reads the keys); the flushed tombstone is
/// recorded with its table, whose manifest bounds cover it (`gleaner check` agrees); compaction
/// drops the covered entries, counting their values' garbage exactly, and at the bottom of the
/// tree drops the tombstone too once the snapshot is gone.
#[test]
fn a_range_delete_lives_through_flush_reopen_and_compaction() {
    let fs: Arc<FaultFs> = Arc::new(FaultFs::new(7));
    let opts = Options::default()
        .with_file_system(fs.clone())
        .with_inline_background_work(true)
        .with_min_separated_value_size(64);
    let path = Path::new("/rdl");
    let value = |k: &str| format!("{k}-{}", "v".repeat(200));
    let db = Db::open(path, opts.clone()).expect("open");
    for i in 0..200 {
        let k = format!("k{i:03}");
        db.put(&k, value(&k)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let snap = db.snapshot();
    db.delete_range("k050", "k150").expect("delete_range");
    db.put("k100", value("new")).expect("put");
    let expect_now = |db: &Db| {
        assert_eq!(
            db.get("k049").expect("get"),
            Some(value("k049").into_bytes())
        );
        assert_eq!(db.get("k050").expect("get"), None);
        assert_eq!(db.get("k149").expect("get"), None);
        assert_eq!(
            db.get("k150").expect("get"),
            Some(value("k150").into_bytes())
        );
        assert_eq!(
            db.get("k100").expect("get"),
            Some(value("new").into_bytes())
        );
        let (fwd, back) = scan(db, &crate::ReadOptions::default());
        assert_eq!(fwd.len(), 101, "100 outside the range and k100");
        assert_eq!(fwd, back);
    };
    expect_now(&db);
    db.flush().expect("flush");
    assert_eq!(db.stats().range_tombstones, 1, "the flushed table holds it");
    expect_now(&db);
    let at = crate::ReadOptions {
        snapshot: Some(&snap),
        ..Default::default()
    };
    assert_eq!(
        db.get_with("k060", &at).expect("get"),
        Some(value("k060").into_bytes()),
        "a snapshot older than the delete still reads the range"
    );
    // With the snapshot, compaction keeps what it reads.
    db.compact_range(None, None).expect("compact");
    expect_now(&db);
    assert_eq!(
        db.get_with("k060", &at).expect("get"),
        Some(value("k060").into_bytes())
    );
    assert_eq!(db.stats().compaction.dropped_range_deleted, 0);
    drop(snap);
    db.close().expect("close");
    drop(db);
    let report = crate::tools::check::check_db(path, &opts).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    let db = Db::open(path, opts.clone()).expect("reopen");
    expect_now(&db);
    db.compact_range(None, None).expect("compact");
    expect_now(&db);
    let stats = db.stats();
    // k100's old version is older than the tombstone too.
    assert_eq!(stats.compaction.dropped_range_deleted, 100, "k050..k150");
    assert_eq!(
        stats.range_tombstones, 0,
        "nothing older is left for it to delete"
    );
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:?}", recount.mismatches);
    // The 100 deleted values, k100's old one among them.
    assert_eq!(stats.values.garbage_records, 100, "{:?}", stats.values);
    db.close().expect("close");
    drop(db);
    let report = crate::tools::check::check_db(path, &opts).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Block-cache lookups so far: the blocks reads and scans asked for.
fn blocks(db: &Db) -> u64 {
    let c = db.stats().cache;
    c.hits + c.misses
}

/// Entries and blocks a full scan visits in one direction.
fn scan_cost(db: &Db, forward: bool) -> (usize, u64, u64) {
    let before = blocks(db);
    let mut it = db.iter(&crate::ReadOptions::default()).expect("iter");
    let mut keys = 0;
    if forward {
        it.seek_to_first().expect("seek");
    } else {
        it.seek_to_last().expect("seek");
    }
    while it.valid() {
        keys += 1;
        if forward {
            it.next().expect("next");
        } else {
            it.prev().expect("prev");
        }
    }
    (keys, it.entries_visited(), blocks(db) - before)
}

/// A range delete over 100,000 keys costs reads no per-key work: a full scan in either
/// direction visits the entries outside the range and a seek per source past it, and a point
/// read inside the range is answered by the tombstone without reading a block of the tables
/// below it — with the tombstone in the memtable and after it was flushed above the keys.
#[test]
fn a_range_delete_over_100000_keys_costs_reads_no_per_key_work() {
    let opts = Options::default()
        .with_file_system(Arc::new(FaultFs::new(3)))
        .with_inline_background_work(true);
    let db = Db::open(Path::new("/rdc"), opts).expect("open");
    let key = |i: u32| format!("k{i:06}");
    for i in 0..120_000 {
        db.put(key(i), "value").expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    // What scanning all 120,000 keys costs in each direction (a backward scan looks at the
    // entry before each key twice: once to end the key, once as the next key).
    let base = [true, false].map(|forward| {
        let (keys, entries, blocks) = scan_cost(&db, forward);
        assert_eq!(keys, 120_000);
        assert!(entries >= 120_000, "every entry: {entries}");
        (entries, blocks)
    });
    db.delete_range(key(10_000), key(110_000))
        .expect("delete_range");
    for stage in [
        "tombstone in the memtable",
        "tombstone flushed above the keys",
    ] {
        for (forward, (base_entries, base_blocks)) in [true, false].into_iter().zip(base) {
            let (keys, entries, blocks_scanned) = scan_cost(&db, forward);
            eprintln!(
                "{stage}, forward {forward}: {entries} entries and {blocks_scanned} blocks for \
                 20,000 keys; {base_entries} and {base_blocks} for 120,000 before the delete"
            );
            assert_eq!(keys, 20_000, "{stage}");
            // A sixth of the keys: a sixth of the cost, and a seek.
            assert!(
                entries <= base_entries / 6 + 100,
                "{stage}, forward {forward}: {entries} entries visited for 20,000 keys, \
                 {base_entries} for 120,000"
            );
            assert!(
                blocks_scanned <= base_blocks / 6 + 10,
                "{stage}, forward {forward}: {blocks_scanned} blocks, {base_blocks} for all keys"
            );
        }
        let before = blocks(&db);
        for i in (10_000..110_000).step_by(100) {
            assert_eq!(db.get(key(i)).expect("get"), None, "{stage}");
        }
        assert_eq!(
            blocks(&db) - before,
            0,
            "{stage}: reads inside the range read no block"
        );
        let before = blocks(&db);
        for i in (0..10_000).step_by(10) {
            assert!(db.get(key(i)).expect("get").is_some(), "{stage}");
        }
        assert!(
            blocks(&db) - before >= 1000,
            "{stage}: reads outside read the keys' blocks"
        );
        db.flush().expect("flush");
    }
}

/// A read-only open honours range tombstones wherever they are: in a key table, and in the WAL
/// it replays into memory.
#[test]
fn a_read_only_open_honours_range_tombstones_in_tables_and_in_the_wal() {
    let opts = Options::default()
        .with_file_system(Arc::new(FaultFs::new(11)))
        .with_inline_background_work(true);
    let path = Path::new("/rdro");
    let db = Db::open(path, opts.clone()).expect("open");
    for i in 0..100 {
        db.put(format!("k{i:03}"), "v").expect("put");
    }
    db.flush().expect("flush");
    db.delete_range("k010", "k020").expect("delete_range");
    db.flush().expect("flush");
    let mut batch = WriteBatch::new();
    batch.delete_range("k050", "k060");
    db.write(batch, &crate::WriteOptions::sync())
        .expect("write");
    assert_eq!(
        db.stats().range_tombstones,
        2,
        "one in a table, one in the memtable"
    );
    db.close().expect("close");
    drop(db);
    let ro = Db::open_read_only(path, opts).expect("open read-only");
    assert_eq!(
        ro.stats().range_tombstones,
        2,
        "the table's, and the replayed WAL's"
    );
    for (k, live) in [
        ("k009", true),
        ("k010", false),
        ("k055", false),
        ("k060", true),
    ] {
        assert_eq!(ro.get(k).expect("get").is_some(), live, "{k}");
    }
    let (fwd, back) = scan(&ro, &crate::ReadOptions::default());
    assert_eq!(fwd.len(), 80);
    assert_eq!(fwd, back);
}

/// Compacts a database of 2,000 separated values, 1,600 of which a flushed range delete covers,
/// under `policy`; `snapshot` holds a snapshot taken before the delete through the compaction.
/// Returns the compaction's figures and the bytes it read.
fn compact_under_a_range_delete(
    policy: crate::GcPolicyKind,
    snapshot: bool,
) -> (crate::stats::CompactionStats, u64) {
    let read = |db: &Db| db.stats().io["compaction_read"].read_bytes;
    let opts = Options::default()
        .with_file_system(Arc::new(FaultFs::new(13)))
        .with_inline_background_work(true)
        .with_gc_policy(policy)
        .with_min_separated_value_size(64)
        .with_key_table_size(1 << 10);
    let db = Db::open(Path::new("/rdw"), opts).expect("open");
    let key = |i: u32| format!("k{i:05}");
    for i in 0..2000 {
        db.put(key(i), format!("{i}-{}", "v".repeat(100)))
            .expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let snap = snapshot.then(|| db.snapshot());
    db.delete_range(key(200), key(1800)).expect("delete_range");
    db.flush().expect("flush");
    let before = db.stats().compaction;
    let read_before = read(&db);
    db.compact_range(None, None).expect("compact");
    let bytes_read = read(&db) - read_before;
    let keys = db
        .range(.., &crate::ReadOptions::default())
        .expect("range")
        .count();
    assert_eq!(keys, 400, "{policy:?}");
    if let Some(s) = &snap {
        let at = crate::ReadOptions::default().at(s);
        assert_eq!(
            db.range(.., &at).expect("range").count(),
            2000,
            "{policy:?}"
        );
    }
    let recount = db.recount_garbage().expect("recount");
    assert!(
        recount.mismatches.is_empty(),
        "{policy:?}: {:?}",
        recount.mismatches
    );
    let stats = db.stats();
    if !snapshot {
        assert_eq!(stats.values.garbage_records, 1600, "{policy:?}");
    }
    let mut after = stats.compaction;
    after.tables_dropped_whole -= before.tables_dropped_whole;
    after.dropped_range_deleted -= before.dropped_range_deleted;
    (after, bytes_read)
}

/// Key tables a range delete covers entirely are dropped by compaction without being read,
/// their values' garbage counted exactly from their dependence; not when a snapshot still reads
/// them, nor under a policy that needs every dropped entry (`novkv`'s drop keys).
#[test]
fn tables_a_range_delete_covers_whole_are_dropped_without_being_read() {
    let (c, read_whole) = compact_under_a_range_delete(crate::GcPolicyKind::Scavenger, false);
    assert!(c.tables_dropped_whole >= 10, "{c:?}");
    assert_eq!(c.dropped_range_deleted, 1600, "{c:?}");
    let (c, _) = compact_under_a_range_delete(crate::GcPolicyKind::Scavenger, true);
    assert_eq!(c.tables_dropped_whole, 0, "a snapshot reads them: {c:?}");
    assert_eq!(c.dropped_range_deleted, 0, "{c:?}");
    let (c, read_all) = compact_under_a_range_delete(crate::GcPolicyKind::Novkv, false);
    assert_eq!(
        c.tables_dropped_whole, 0,
        "drop keys need every entry: {c:?}"
    );
    assert_eq!(c.dropped_range_deleted, 1600, "{c:?}");
    let (c, _) = compact_under_a_range_delete(crate::GcPolicyKind::Blobdb, false);
    assert!(
        c.tables_dropped_whole >= 10,
        "relocation keeps nothing of them: {c:?}"
    );
    eprintln!("compaction read {read_whole} bytes dropping tables whole, {read_all} reading them");
    assert!(
        read_whole * 2 < read_all,
        "{read_whole} bytes read dropping tables whole, {read_all} reading them"
    );
}

/// A flood of range deletes switches memtables by their count, whatever `memtable_size`
/// allows: each memtable's tombstones stay bounded, and every flush and read stays exact.
#[test]
fn a_flood_of_range_deletes_switches_memtables_by_their_count() {
    let opts = Options::default()
        .with_file_system(Arc::new(FaultFs::new(17)))
        .with_inline_background_work(true)
        .with_memtable_size(1 << 30);
    let db = Db::open(Path::new("/rdf"), opts).expect("open");
    let n = 2 * crate::memtable::MAX_RANGE_TOMBSTONES + 100;
    for i in 0..n {
        db.put(format!("k{i:06}"), "v").expect("put");
        // Every other key: [k, k\0) deletes exactly k.
        if i % 2 == 0 {
            db.delete_range(format!("k{i:06}"), format!("k{i:06}\0"))
                .expect("delete_range");
        }
    }
    let stats = db.stats();
    assert!(
        stats.compaction.flushes >= 1,
        "switched by count: {:?}",
        stats.compaction
    );
    assert_eq!(
        stats.range_tombstones,
        n / 2,
        "each one, in memtables or tables"
    );
    for i in [0, 1, n / 2, n / 2 + 1, n - 2, n - 1] {
        let got = db.get(format!("k{i:06}")).expect("get");
        assert_eq!(got.is_none(), i % 2 == 0, "k{i:06}");
    }
    let keys = db
        .range(.., &crate::ReadOptions::default())
        .expect("range")
        .count();
    assert_eq!(keys as u64, n / 2);
}

/// A batch of more range deletes than one memtable holds is refused, naming the limit, and
/// writes nothing; a batch that would carry a memtable past the limit switches it first, so no
/// memtable ever holds more.
#[test]
fn range_tombstones_per_memtable_stay_bounded_whatever_the_batches() {
    use crate::memtable::MAX_RANGE_TOMBSTONES;
    let opts = Options::default()
        .with_file_system(Arc::new(FaultFs::new(19)))
        .with_inline_background_work(true)
        .with_memtable_size(1 << 30);
    let db = Db::open(Path::new("/rdb"), opts).expect("open");
    let batch_of = |n: u64, from: u64| {
        let mut b = WriteBatch::new();
        for i in from..from + n {
            b.delete_range(format!("k{i:06}"), format!("k{i:06}\0"));
        }
        b
    };
    let err = db
        .write(
            batch_of(MAX_RANGE_TOMBSTONES + 1, 0),
            &crate::WriteOptions::default(),
        )
        .expect_err("too many");
    assert!(
        matches!(&err, crate::Error::InvalidArgument(m) if m.contains("MAX_RANGE_TOMBSTONES")),
        "{err}"
    );
    assert_eq!(db.stats().last_sequence, 0, "nothing written");
    let most = || {
        let st = db.inner.state.lock();
        std::iter::once(&st.mem)
            .chain(&st.imm)
            .map(|m| m.range_tombstone_count())
            .max()
            .unwrap_or(0)
    };
    db.write(
        batch_of(MAX_RANGE_TOMBSTONES - 10, 0),
        &crate::WriteOptions::default(),
    )
    .expect("write");
    let flushes = db.stats().compaction.flushes;
    db.write(batch_of(20, 5000), &crate::WriteOptions::default())
        .expect("write");
    assert!(most() <= MAX_RANGE_TOMBSTONES, "{}", most());
    assert_eq!(db.stats().compaction.flushes, flushes + 1, "switched first");
    assert_eq!(db.stats().range_tombstones, MAX_RANGE_TOMBSTONES + 10);
}

/// Range tombstones count toward a compaction output's size: many of them are cut into tables
/// of about the target size, between entries and after the last one, and the tables stay
/// disjoint and exact (`gleaner check`).
#[test]
fn compaction_outputs_are_cut_by_their_tombstones_too() {
    let opts = Options::default()
        .with_file_system(Arc::new(FaultFs::new(23)))
        .with_inline_background_work(true)
        .with_key_table_size(4 << 10);
    let path = Path::new("/rdcut");
    let db = Db::open(path, opts.clone()).expect("open");
    for i in 0..200 {
        db.put(format!("k{i:04}"), "v").expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let snap = db.snapshot();
    // Tombstones among the keys (each deleting one) and far past them (deleting nothing),
    // with 100-byte keys: several tables' worth.
    let long = |p: &str, i: u32| format!("{p}{i:04}{}", "x".repeat(100));
    for i in (0..200).step_by(2) {
        db.delete_range(format!("k{i:04}"), format!("k{i:04}\0"))
            .expect("delete_range");
    }
    for i in 0..200 {
        db.delete_range(long("z", i), long("z", i) + "\0")
            .expect("delete_range");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let stats = db.stats();
    let files: usize = stats.levels.iter().map(|l| l.files).sum();
    assert!(files >= 6, "cut by tombstones: {:?}", stats.levels);
    assert_eq!(
        stats.range_tombstones, 300,
        "kept for the snapshot, each once"
    );
    let keys = db
        .range(.., &crate::ReadOptions::default())
        .expect("range")
        .count();
    assert_eq!(keys, 100);
    let at = crate::ReadOptions::default().at(&snap);
    assert_eq!(db.range(.., &at).expect("range").count(), 200);
    drop(snap);
    db.close().expect("close");
    drop(db);
    let report = crate::tools::check::check_db(path, &opts).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

//! The conditional write (`Db::write_if_unchanged`): what counts as a change since a snapshot
//! (point writes, range deletes over a key present or not, expiry), wherever the versions are
//! (memtables, key tables, compacted, a partitioned tree, rewritten by GC), that a failed
//! condition writes nothing and bad arguments nothing either, and that concurrent optimistic
//! increments lose none.

use std::path::Path;
use std::sync::Arc;

use crate::expiry::ManualClock;
use crate::io::FaultFs;
use crate::options::{MAX_KEY_SIZE, Partitioning};
use crate::version::routing::Routing;
use crate::{Db, Error, GcPolicyKind, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

/// The start of every test's clock.
const T0: u64 = 1_000_000;

fn options(clock: &Arc<ManualClock>) -> Options {
    Options::default()
        .with_file_system(Arc::new(FaultFs::new(31)))
        .with_clock(clock.clone())
        .with_inline_background_work(true)
        .with_min_separated_value_size(64)
}

fn open_with(clock: &Arc<ManualClock>, opts: Options) -> Db {
    Db::open(Path::new("/cond"), opts.with_clock(clock.clone())).expect("open")
}

fn open() -> (Db, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    (open_with(&clock, options(&clock)), clock)
}

/// A value this long is separated (`min_separated_value_size` 64).
fn big(tag: &str) -> Vec<u8> {
    tag.as_bytes().iter().copied().cycle().take(200).collect()
}

/// A batch putting `key` → `value`.
fn put(key: &str, value: &str) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(key, value);
    b
}

/// Whether `keys` are unchanged since `since`: an empty conditional write.
fn unchanged(db: &Db, since: &Snapshot, keys: &[&str]) -> bool {
    db.write_if_unchanged(WriteBatch::new(), &WriteOptions::default(), since, keys)
        .expect("check")
}

/// Writes `marker` → "1" if `keys` are unchanged since `since`; returns whether it did, after
/// checking that the marker is there exactly then.
fn try_write(db: &Db, since: &Snapshot, keys: &[&str], marker: &str) -> bool {
    let done = db
        .write_if_unchanged(put(marker, "1"), &WriteOptions::default(), since, keys)
        .expect("conditional write");
    assert_eq!(
        db.get(marker).expect("get").is_some(),
        done,
        "{marker}: written exactly when the condition held"
    );
    done
}

fn get(db: &Db, key: &str) -> Option<Vec<u8>> {
    db.get(key).expect("get")
}

#[test]
fn with_nothing_changed_the_batch_is_applied() {
    let (db, _) = open();
    db.put("a", "1").expect("put");
    db.put("b", big("b")).expect("put");
    let snap = db.snapshot();
    // Writes to other keys are no change of these.
    db.put("c", "3").expect("put");
    db.delete("d").expect("delete");
    db.delete_range("e", "z").expect("delete range");
    assert!(try_write(&db, &snap, &["a", "b", "absent"], "m1"));
    assert!(
        try_write(&db, &snap, &[], "m2"),
        "no key: nothing to change"
    );
    let s = db.stats().operations;
    assert_eq!(
        (s.conditional_writes, s.conditional_write_conflicts),
        (2, 0)
    );
}

#[test]
fn a_put_after_the_snapshot_changes_the_key_even_with_the_same_bytes() {
    let (db, _) = open();
    db.put("a", "1").expect("put");
    db.put("b", big("b")).expect("put");
    let snap = db.snapshot();
    db.put("a", "1").expect("put the same bytes");
    db.put("b", big("b")).expect("put the same bytes");
    db.put("new", "x")
        .expect("put a key absent at the snapshot");
    assert!(!try_write(&db, &snap, &["a"], "m1"));
    assert!(!try_write(&db, &snap, &["b"], "m2"));
    assert!(!try_write(&db, &snap, &["new"], "m3"));
    assert!(!try_write(&db, &snap, &["absent", "a"], "m4"));
    assert!(try_write(&db, &snap, &["absent"], "m5"));
    let s = db.stats().operations;
    assert_eq!(
        (s.conditional_writes, s.conditional_write_conflicts),
        (5, 4)
    );
}

#[test]
fn a_failed_condition_writes_nothing() {
    let (db, _) = open();
    db.put("a", "1").expect("put");
    db.put("b", "2").expect("put");
    let snap = db.snapshot();
    db.put("a", "changed").expect("put");
    let before = db.stats().last_sequence;
    let mut batch = WriteBatch::new();
    batch.put("a", "mine");
    batch.delete("b");
    batch.put("c", "mine");
    batch.delete_range("d", "e");
    let done = db
        .write_if_unchanged(batch, &WriteOptions { sync: true }, &snap, ["a", "b"])
        .expect("conditional write");
    assert!(!done);
    assert_eq!(db.stats().last_sequence, before, "no sequence number used");
    assert_eq!(get(&db, "a"), Some(b"changed".to_vec()));
    assert_eq!(get(&db, "b"), Some(b"2".to_vec()));
    assert_eq!(get(&db, "c"), None);
    // Applied whole once the condition holds.
    let snap = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.put("a", "mine");
    batch.delete("b");
    assert!(
        db.write_if_unchanged(batch, &WriteOptions::default(), &snap, ["a", "b"])
            .expect("conditional write")
    );
    assert_eq!(get(&db, "a"), Some(b"mine".to_vec()));
    assert_eq!(get(&db, "b"), None);
}

#[test]
fn a_delete_after_the_snapshot_changes_the_key_present_or_not() {
    let (db, _) = open();
    db.put("a", "1").expect("put");
    let snap = db.snapshot();
    db.delete("a").expect("delete");
    db.delete("absent").expect("delete");
    assert!(!unchanged(&db, &snap, &["a"]));
    assert!(!unchanged(&db, &snap, &["absent"]));
    assert!(unchanged(&db, &snap, &["other"]));
}

/// `a` present, `b` absent and `c` expired at the snapshot, then `[a, z)` range-deleted.
fn range_delete_over_present_absent_and_expired(db: &Db, clock: &ManualClock) -> Snapshot {
    db.put("a", "1").expect("put");
    db.put_with_expiry("c", "3", T0 + 10).expect("put");
    db.put_with_expiry("d", big("d"), T0 + 10).expect("put");
    clock.set(T0 + 20);
    let snap = db.snapshot();
    db.delete_range("a", "z").expect("delete range");
    snap
}

fn assert_range_delete_cases(db: &Db, snap: &Snapshot, ctx: &str) {
    assert!(!unchanged(db, snap, &["a"]), "{ctx}: present, then deleted");
    assert!(unchanged(db, snap, &["b"]), "{ctx}: absent, still absent");
    assert!(unchanged(db, snap, &["c", "d"]), "{ctx}: expired already");
    assert!(!unchanged(db, snap, &["b", "c", "a"]), "{ctx}: one changed");
}

#[test]
fn a_range_delete_changes_only_a_key_present_at_the_snapshot() {
    let (db, clock) = open();
    let snap = range_delete_over_present_absent_and_expired(&db, &clock);
    assert_range_delete_cases(&db, &snap, "memtable");
    db.flush().expect("flush");
    assert_range_delete_cases(&db, &snap, "flushed");
    db.compact_range(None, None).expect("compact");
    assert_range_delete_cases(&db, &snap, "compacted");
}

#[test]
fn a_write_under_a_range_delete_after_the_snapshot_is_a_change() {
    let (db, _) = open();
    let snap = db.snapshot();
    db.put("b", "1").expect("put");
    db.delete("x").expect("delete");
    // Held, so that no flush or compaction drops those writes under the range deletes.
    let middle = db.snapshot();
    db.delete_range("a", "c").expect("delete range");
    db.delete_range("b", "d").expect("delete range");
    db.delete_range("w", "y").expect("delete range");
    let check = |ctx: &str| {
        assert!(
            !unchanged(&db, &snap, &["b"]),
            "{ctx}: put, range-deleted twice"
        );
        assert!(
            !unchanged(&db, &snap, &["x"]),
            "{ctx}: deleted, range-deleted"
        );
        assert!(
            unchanged(&db, &snap, &["c", "w"]),
            "{ctx}: range-deleted only"
        );
    };
    check("memtable");
    db.flush().expect("flush");
    check("flushed");
    db.compact_range(None, None).expect("compact");
    check("compacted");
    drop(middle);
}

#[test]
fn the_blind_spot_a_put_dropped_under_a_range_delete_reads_as_no_change() {
    let (db, _) = open();
    let snap = db.snapshot();
    db.put("b", "1").expect("put");
    db.delete_range("a", "c").expect("delete range");
    assert!(!unchanged(&db, &snap, &["b"]), "the put is still there");
    // The flush drops the put: nothing reads it (the snapshot is older, the range delete
    // hides it from everything newer). The key is absent, as the snapshot saw it.
    db.flush().expect("flush");
    assert!(unchanged(&db, &snap, &["b"]), "documented blind spot");
    assert_eq!(
        db.get_with("b", &ReadOptions::default().at(&snap))
            .expect("get"),
        None
    );
}

#[test]
fn range_deletes_are_looked_below_up_to_the_bound() {
    let steps = super::conditional::RANGE_DELETE_STEPS;
    let (db, _) = open();
    let snap = db.snapshot();
    db.put("p", "1").expect("put");
    for _ in 0..steps - 1 {
        db.delete_range("p", "q").expect("delete range");
    }
    assert!(!unchanged(&db, &snap, &["p"]), "a put under them");
    // Up to the bound, tombstones over nothing are looked through.
    for _ in 0..steps {
        db.delete_range("a", "b").expect("delete range");
    }
    assert!(unchanged(&db, &snap, &["a"]), "absent under the bound");
    // Past it the key counts as changed, whatever is below.
    db.delete_range("a", "b").expect("delete range");
    assert!(!unchanged(&db, &snap, &["a"]), "past the bound");
}

#[test]
fn expiry_between_the_snapshot_and_the_check_is_a_change() {
    let (db, clock) = open();
    db.put_with_expiry("a", "1", T0 + 100).expect("put");
    db.put_with_expiry("b", big("b"), T0 + 100).expect("put");
    db.put_with_expiry("gone", "1", T0 + 10).expect("put");
    db.put("forever", "1").expect("put");
    clock.set(T0 + 50);
    let snap = db.snapshot();
    clock.set(T0 + 99);
    assert!(unchanged(&db, &snap, &["a", "b", "gone", "forever"]));
    clock.set(T0 + 100);
    assert!(!unchanged(&db, &snap, &["a"]), "expired by now");
    assert!(!unchanged(&db, &snap, &["b"]), "expired by now");
    assert!(
        unchanged(&db, &snap, &["gone", "forever"]),
        "expired before the snapshot and absent since, or never expiring"
    );
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert!(!unchanged(&db, &snap, &["a"]), "compacted");
    assert!(!unchanged(&db, &snap, &["b"]), "compacted");
    assert!(unchanged(&db, &snap, &["gone", "forever"]), "compacted");
}

#[test]
fn versions_in_key_tables_and_compacted_are_judged_alike() {
    let (db, _) = open();
    for k in ["a", "b", "c"] {
        db.put(k, "1").expect("put");
    }
    db.put("s", big("s")).expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let snap = db.snapshot();
    assert!(
        unchanged(&db, &snap, &["a", "b", "c", "s"]),
        "in key tables"
    );
    db.put("a", "2").expect("put");
    db.flush().expect("flush");
    db.put("s", big("t")).expect("put");
    assert!(!unchanged(&db, &snap, &["a"]), "newer version flushed");
    assert!(
        !unchanged(&db, &snap, &["s"]),
        "newer version in the memtable"
    );
    assert!(unchanged(&db, &snap, &["b", "c"]));
    db.compact_range(None, None).expect("compact");
    assert!(!unchanged(&db, &snap, &["a"]), "compacted");
    assert!(!unchanged(&db, &snap, &["s"]), "compacted");
    assert!(unchanged(&db, &snap, &["b", "c"]), "compacted");
    // Once the snapshot is gone, a new one sees the compacted state unchanged.
    drop(snap);
    db.compact_range(None, None).expect("compact");
    let snap = db.snapshot();
    assert!(unchanged(&db, &snap, &["a", "b", "c", "s"]));
    assert!(try_write(&db, &snap, &["a", "s"], "m"));
}

#[test]
fn a_partitioned_tree_is_judged_alike() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open_with(
        &clock,
        options(&clock)
            .with_partitioning(Partitioning::Dpkv)
            .with_memtable_size(32 << 10)
            .with_key_table_size(16 << 10),
    );
    for i in 0..200 {
        db.put(format!("hot{i:03}"), "1").expect("put");
        db.put(format!("cold{i:03}"), big("c")).expect("put");
    }
    db.flush().expect("flush");
    db.inner
        .move_to_routing(Routing::of_prefixes([&b"hot"[..]]))
        .expect("move");
    let snap = db.snapshot();
    db.put("hot007", "2").expect("put");
    db.put("cold007", "2").expect("put");
    db.delete_range("hot100", "hot110").expect("delete range");
    db.delete_range("cold100", "cold110").expect("delete range");
    db.delete_range("hot300", "hot310")
        .expect("delete range over nothing");
    let check = |ctx: &str| {
        for k in ["hot007", "cold007", "hot105", "cold105"] {
            assert!(!unchanged(&db, &snap, &[k]), "{ctx}: {k}");
        }
        for k in ["hot008", "cold008", "hot305", "cold305"] {
            assert!(unchanged(&db, &snap, &[k]), "{ctx}: {k}");
        }
    };
    check("memtable");
    db.flush().expect("flush");
    check("flushed");
    db.inner
        .move_to_routing(Routing::of_prefixes([&b"cold"[..]]))
        .expect("move back");
    check("moved");
    db.compact_range(None, None).expect("compact");
    check("compacted");
}

#[test]
fn handles_gc_wrote_back_are_no_change() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open_with(
        &clock,
        options(&clock)
            .with_gc_threads(0)
            .with_memtable_size(1 << 20)
            .with_l0_compaction_trigger(8)
            .with_value_table_size(64 << 10)
            .with_gc_policy(GcPolicyKind::Titan)
            .with_titan_discardable_ratio(0.2),
    );
    let key = |i: u32| format!("key{i:04}");
    for i in 0..120 {
        db.put(key(i), big(&format!("{i} 0 "))).expect("put");
    }
    db.flush().expect("flush");
    for i in (0..120).step_by(3) {
        db.put(key(i), big(&format!("{i} 1 "))).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let snap = db.snapshot();
    let run = db.run_gc().expect("gc");
    assert!(db.stats().gc.written_back > 0, "{run:?}");
    // Some untouched keys' newest versions are now write-backs, newer than the snapshot.
    let sv = db.inner.super_version.load_full();
    let ctx = crate::table::ReadCtx::default();
    let rewritten: Vec<String> = (0..120)
        .map(key)
        .filter(|k| {
            sv.get_key(
                &db.inner.tables,
                k.as_bytes(),
                crate::key::MAX_SEQUENCE,
                ctx,
            )
            .expect("lookup")
            .is_some_and(|f| f.seq() > snap.sequence())
        })
        .collect();
    assert!(!rewritten.is_empty());
    let refs: Vec<&str> = rewritten.iter().map(String::as_str).collect();
    assert!(try_write(&db, &snap, &refs, "m1"), "{refs:?}");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert!(try_write(&db, &snap, &refs, "m2"), "flushed and compacted");
    db.put(&rewritten[0], "user").expect("put");
    assert!(!try_write(&db, &snap, &refs, "m3"), "a user's write is one");
}

#[test]
fn an_empty_batch_only_checks() {
    let (db, _) = open();
    db.put("a", "1").expect("put");
    let snap = db.snapshot();
    let before = db.stats().last_sequence;
    assert!(unchanged(&db, &snap, &["a"]));
    db.put("a", "2").expect("put");
    let before_changed = db.stats().last_sequence;
    assert!(!unchanged(&db, &snap, &["a"]));
    assert_eq!(db.stats().last_sequence, before_changed, "nothing written");
    assert_eq!(before + 1, before_changed);
    let s = db.stats().operations;
    assert_eq!(
        (s.conditional_writes, s.conditional_write_conflicts),
        (2, 1)
    );
}

#[test]
fn bad_arguments_are_refused_before_anything() {
    let (db, _) = open();
    let (other, _) = {
        let clock = Arc::new(ManualClock::new(T0));
        let opts = options(&clock).with_file_system(Arc::new(FaultFs::new(32)));
        (open_with(&clock, opts), clock)
    };
    let foreign = other.snapshot();
    let snap = db.snapshot();
    let before = db.stats().last_sequence;
    let refused = |r: crate::Result<bool>| matches!(r, Err(Error::InvalidArgument(_)));
    let w = WriteOptions::default();
    assert!(refused(db.write_if_unchanged(
        put("a", "1"),
        &w,
        &foreign,
        ["a"]
    )));
    assert!(refused(db.write_if_unchanged(
        WriteBatch::new(),
        &w,
        &foreign,
        ["a"]
    )));
    let long = vec![b'k'; MAX_KEY_SIZE + 1];
    assert!(refused(db.write_if_unchanged(
        put("a", "1"),
        &w,
        &snap,
        [&long]
    )));
    let mut bad = WriteBatch::new();
    bad.put("a", "1");
    bad.delete_range("z", "a");
    assert!(refused(db.write_if_unchanged(bad, &w, &snap, ["a"])));
    assert_eq!(db.stats().last_sequence, before, "nothing written");
    assert_eq!(
        db.stats().operations.conditional_writes,
        0,
        "nothing checked"
    );
    db.close().expect("close");
    assert!(matches!(
        db.write_if_unchanged(put("a", "1"), &w, &snap, ["a"]),
        Err(Error::Closed)
    ));
}

#[test]
fn concurrent_optimistic_increments_lose_none() {
    const THREADS: u64 = 4;
    const INCREMENTS: u64 = 60;
    /// Generous: a thread retries only when another's increment landed since its read.
    const MAX_ATTEMPTS: u64 = 100_000;
    let clock = Arc::new(ManualClock::new(T0));
    let db = Arc::new(open_with(
        &clock,
        options(&clock)
            .with_inline_background_work(false)
            .with_memtable_size(8 << 10),
    ));
    db.put("counter", "0").expect("put");
    let attempts: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let db = Arc::clone(&db);
                s.spawn(move || {
                    let mut attempts = 0;
                    for i in 0..INCREMENTS {
                        loop {
                            attempts += 1;
                            assert!(attempts <= MAX_ATTEMPTS, "thread {t} starves");
                            let snap = db.snapshot();
                            let at = ReadOptions::default().at(&snap);
                            let n: u64 = String::from_utf8(
                                db.get_with("counter", &at).expect("get").expect("set"),
                            )
                            .expect("utf-8")
                            .parse()
                            .expect("a number");
                            let mut batch = WriteBatch::new();
                            batch.put("counter", (n + 1).to_string());
                            // Other keys ride along, and flushes go on meanwhile.
                            batch.put(format!("t{t}-{i}"), big("x"));
                            let w = WriteOptions::default();
                            if db
                                .write_if_unchanged(batch, &w, &snap, ["counter"])
                                .expect("conditional write")
                            {
                                break;
                            }
                        }
                    }
                    attempts
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    let total = THREADS * INCREMENTS;
    assert_eq!(get(&db, "counter"), Some(total.to_string().into_bytes()));
    let s = db.stats().operations;
    assert_eq!(s.conditional_writes, attempts);
    assert_eq!(s.conditional_write_conflicts, attempts - total);
}

#[test]
fn write_pressure_is_off_when_nothing_can_make_a_write_wait() {
    let (db, _clock) = open();
    assert!(!db.write_pressure(), "an empty database delays nothing");
    db.put("k", "v").expect("put");
    db.flush().expect("flush");
    assert!(!db.write_pressure());
    // With a space budget, space-aware throttling may delay any write.
    let clock = Arc::new(ManualClock::new(T0));
    let budgeted = Db::open(
        Path::new("/cond-budget"),
        options(&clock).with_max_disk_bytes(1 << 30),
    )
    .expect("open");
    assert!(budgeted.write_pressure());
}

//! Expiring keys through `Db` (issue 26): reads, iterators and snapshots judge expiry at their
//! own time, an expired version hides the older ones, flushes and compactions keep expiries
//! (inline and separated) and drop what expired for every reader, and bad input writes nothing;
//! a key's expiry is read with its value (`Db::get_entry`) or alone, without a separated value
//! (`Db::get_expiry`).

use std::path::Path;
use std::sync::Arc;

use crate::expiry::{MAX_EXPIRY_MS, ManualClock};
use crate::io::FaultFs;
use crate::{Bytes, Db, Entry, Error, Options, ReadOptions, WriteBatch, WriteOptions};

/// The start of every test's clock.
const T0: u64 = 1_000_000;

fn options(clock: &Arc<ManualClock>) -> Options {
    Options::default()
        .with_file_system(Arc::new(FaultFs::new(26)))
        .with_clock(clock.clone())
        .with_inline_background_work(true)
        .with_min_separated_value_size(64)
}

fn open(clock: &Arc<ManualClock>) -> Db {
    Db::open(Path::new("/exp"), options(clock)).expect("open")
}

/// A value this long is separated (`min_separated_value_size` 64).
fn big(tag: &str) -> Vec<u8> {
    tag.as_bytes().iter().copied().cycle().take(200).collect()
}

fn keys(db: &Db, opts: &ReadOptions<'_>) -> Vec<String> {
    db.range(.., opts)
        .expect("range")
        .map(|kv| String::from_utf8(kv.expect("item").0).expect("utf8"))
        .collect()
}

fn keys_rev(db: &Db, opts: &ReadOptions<'_>) -> Vec<String> {
    let mut v: Vec<String> = db
        .range(.., opts)
        .expect("range")
        .rev()
        .map(|kv| String::from_utf8(kv.expect("item").0).expect("utf8"))
        .collect();
    v.reverse();
    v
}

/// Writes `a` (inline) and `b` (separated) expiring at T0 + 100, `c` at T0 + 200, `d` never,
/// each over an older version that does not expire.
fn write_mix(db: &Db) {
    for k in ["a", "b", "c", "d"] {
        db.put(k, "old").expect("put");
    }
    db.put_with_expiry("a", "small", T0 + 100).expect("put");
    db.put_with_expiry("b", big("b"), T0 + 100).expect("put");
    db.put_with_ttl("c", "later", 200).expect("put");
    db.put("d", "forever").expect("put");
}

fn assert_mix(db: &Db, at: u64, ctx: &str) {
    let live = |k: &str| match (k, at) {
        ("a" | "b", t) => t < T0 + 100,
        ("c", t) => t < T0 + 200,
        _ => true,
    };
    let want: Vec<String> = ["a", "b", "c", "d"]
        .into_iter()
        .filter(|k| live(k))
        .map(String::from)
        .collect();
    assert_eq!(keys(db, &ReadOptions::default()), want, "{ctx}: forward");
    assert_eq!(
        keys_rev(db, &ReadOptions::default()),
        want,
        "{ctx}: reverse"
    );
    for (k, v) in [
        ("a", b"small".to_vec()),
        ("b", big("b")),
        ("c", b"later".to_vec()),
        ("d", b"forever".to_vec()),
    ] {
        let got = db.get(k).expect("get");
        assert_eq!(
            got,
            live(k).then_some(v),
            "{ctx}: {k}, never the old version"
        );
    }
}

#[test]
fn expired_versions_read_absent_and_hide_the_older_ones() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    write_mix(&db);
    assert_mix(&db, T0, "memtable, before");
    clock.set(T0 + 100);
    assert_mix(&db, T0 + 100, "memtable, at the expiry");
    let skipped = db.stats().operations.expired_skipped;
    assert!(
        skipped >= 4,
        "reads and scans counted what they skipped: {skipped}"
    );
    db.flush().expect("flush");
    assert_mix(&db, T0 + 100, "flushed");
    clock.set(T0 + 250);
    assert_mix(&db, T0 + 250, "flushed, later");
}

#[test]
fn a_snapshot_judges_expiry_at_its_own_time_and_its_reads_repeat() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    write_mix(&db);
    let snap = db.snapshot();
    assert_eq!(snap.time_ms(), T0);
    clock.set(T0 + 500);
    let at = ReadOptions::default().at(&snap);
    let all = vec!["a", "b", "c", "d"];
    assert_eq!(keys(&db, &at), all, "the snapshot still reads them");
    assert_eq!(keys_rev(&db, &at), all);
    assert_eq!(db.get_with("b", &at).expect("get"), Some(big("b")));
    assert_eq!(db.get("b").expect("get"), None, "the present does not");
    // Compaction keeps what the snapshot reads, then drops it once the snapshot goes.
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(
        db.stats().compaction.dropped_expired,
        0,
        "the snapshot reads them"
    );
    assert_eq!(keys(&db, &at), all, "compacted under the snapshot");
    assert_eq!(db.get_with("a", &at).expect("get"), Some(b"small".to_vec()));
    drop(snap);
    db.compact_range(None, None).expect("compact");
    let stats = db.stats();
    assert_eq!(stats.compaction.dropped_expired, 3, "a, b and c: {stats:?}");
    assert_mix(&db, T0 + 500, "compacted");
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    assert_eq!(
        stats.values.records - stats.values.garbage_records,
        0,
        "b's record is garbage (or its table gone): {:?}",
        stats.values
    );
}

#[test]
fn an_iterator_judges_expiry_when_it_is_made() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    write_mix(&db);
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    clock.set(T0 + 150);
    it.seek_to_first().expect("seek");
    let mut seen = Vec::new();
    while it.valid() {
        seen.push(String::from_utf8(it.key().to_vec()).expect("utf8"));
        it.next().expect("next");
    }
    assert_eq!(seen, ["a", "b", "c", "d"], "made before the expiry");
    assert_eq!(keys(&db, &ReadOptions::default()), ["c", "d"]);
}

#[test]
fn expiries_survive_the_wal_a_flush_and_a_reopen() {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = options(&clock);
    let db = Db::open(Path::new("/exp"), opts.clone()).expect("open");
    write_mix(&db);
    db.close().expect("close");
    drop(db);
    let db = Db::open(Path::new("/exp"), opts.clone()).expect("reopen");
    assert_mix(&db, T0, "replayed");
    clock.set(T0 + 100);
    assert_mix(&db, T0 + 100, "replayed, at the expiry");
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let db = Db::open(Path::new("/exp"), opts).expect("reopen");
    assert_mix(&db, T0 + 100, "reopened from tables");
}

#[test]
fn a_past_expiry_writes_a_version_that_reads_as_a_deletion() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    db.put("k", "v").expect("put");
    db.put_with_expiry("k", "gone", T0 - 1).expect("put");
    db.put_with_ttl("j", "gone", 0).expect("put");
    assert_eq!(db.get("k").expect("get"), None);
    assert_eq!(db.get("j").expect("get"), None);
    db.flush().expect("flush");
    assert_eq!(db.get("k").expect("get"), None);
    assert_eq!(
        db.stats().compaction.dropped_expired,
        2,
        "the flush drops them already"
    );
    assert!(keys(&db, &ReadOptions::default()).is_empty());
}

#[test]
fn expiries_past_the_limit_are_refused_and_write_nothing() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    let before = db.stats().last_sequence;
    let mut batch = WriteBatch::new();
    batch.put("x", "y");
    batch.put_with_expiry("k", "v", MAX_EXPIRY_MS + 1);
    let err = db
        .write(batch, &WriteOptions::default())
        .expect_err("refused");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("MAX_EXPIRY_MS")),
        "{err}"
    );
    let err = db.put_with_ttl("k", "v", u64::MAX).expect_err("refused");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("overflows")),
        "{err}"
    );
    assert_eq!(db.stats().last_sequence, before, "nothing was written");
    assert_eq!(db.get("x").expect("get"), None);
    db.put_with_expiry("k", "v", MAX_EXPIRY_MS)
        .expect("the limit itself");
    assert_eq!(db.get("k").expect("get"), Some(b"v".to_vec()));
}

#[test]
fn the_database_time_never_goes_back_with_the_clock() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    db.put_with_expiry("k", "v", T0 + 10).expect("put");
    clock.set(T0 + 10);
    assert_eq!(db.get("k").expect("get"), None);
    clock.set(T0);
    assert_eq!(
        db.get("k").expect("get"),
        None,
        "what expired stays expired"
    );
    assert_eq!(db.snapshot().time_ms(), T0 + 10);
}

/// Options grouping expiring values by windows of 1 s.
fn grouped(clock: &Arc<ManualClock>) -> Options {
    options(clock).with_expiry_group_ms(1_000)
}

/// Writes 20 separated values expiring in the window of `T0 + 1 s`, 20 in that of `T0 + 3 s`
/// and 20 that never expire, interleaved in key order, and flushes them.
fn write_groups(db: &Db) {
    for i in 0..60u32 {
        let k = format!("k{i:03}");
        match i % 3 {
            0 => db.put_with_expiry(&k, big(&k), T0 + 1_000 + u64::from(i)),
            1 => db.put_with_expiry(&k, big(&k), T0 + 3_000 + u64::from(i)),
            _ => db.put(&k, big(&k)),
        }
        .expect("put");
    }
    db.flush().expect("flush");
}

fn assert_groups(db: &Db, now: u64, ctx: &str) {
    for i in 0..60u32 {
        let k = format!("k{i:03}");
        let live = match i % 3 {
            0 => now < T0 + 1_000 + u64::from(i),
            1 => now < T0 + 3_000 + u64::from(i),
            _ => true,
        };
        assert_eq!(
            db.get(&k).expect("get"),
            live.then(|| big(&k)),
            "{ctx}: {k}"
        );
    }
    let recount = db.recount_garbage().expect("recount");
    assert!(
        recount.mismatches.is_empty(),
        "{ctx}: {:#?}",
        recount.mismatches
    );
    assert_eq!(db.stats().values.unresolved_drops, 0, "{ctx}");
}

#[test]
fn grouped_tables_expire_whole_without_a_gc_read() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open(Path::new("/exp"), grouped(&clock)).expect("open");
    write_groups(&db);
    let stats = db.stats();
    assert_eq!(
        stats.values.tables, 3,
        "one table per group: {:?}",
        stats.values
    );
    // Before the first group's last expiry nothing goes.
    clock.set(T0 + 1_050);
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.tables_expired, 0);
    assert_groups(&db, T0 + 1_050, "first group partly expired");
    clock.set(T0 + 1_100);
    let before = db.stats();
    db.run_gc().expect("gc");
    let after = db.stats();
    assert_eq!(after.values.tables_expired, 1, "{:?}", after.values);
    assert_eq!(after.values.tables, 2);
    assert_eq!(after.gc.records_read, before.gc.records_read, "no GC read");
    let gc_read = |s: &crate::stats::DbStats| s.io.get("gc_read").map_or(0, |c| c.read_bytes);
    assert_eq!(gc_read(&after), gc_read(&before), "no GC read");
    assert_groups(&db, T0 + 1_100, "first group deleted");
    // Compaction drops the expired versions, whose records are gone: nothing to count.
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.stats().compaction.dropped_expired, 20);
    assert_groups(&db, T0 + 1_100, "compacted");
    // The second group goes too; the never-expiring one stays.
    clock.set(T0 + 10_000);
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.tables_expired, 2);
    assert_groups(&db, T0 + 10_000, "second group deleted");
}

#[test]
fn a_snapshot_keeps_an_expired_table_until_it_goes() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open(Path::new("/exp"), grouped(&clock)).expect("open");
    write_groups(&db);
    let snap = db.snapshot();
    clock.set(T0 + 5_000);
    db.run_gc().expect("gc");
    assert_eq!(
        db.stats().values.tables_expired,
        0,
        "the snapshot reads them"
    );
    let at = ReadOptions::default().at(&snap);
    assert_eq!(db.get_with("k000", &at).expect("get"), Some(big("k000")));
    drop(snap);
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.tables_expired, 2);
    assert_groups(&db, T0 + 5_000, "both groups deleted");
}

#[test]
fn what_expired_stays_expired_after_a_reopen_with_the_clock_set_back() {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = grouped(&clock);
    let db = Db::open(Path::new("/exp"), opts.clone()).expect("open");
    write_groups(&db);
    clock.set(T0 + 1_100);
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.tables_expired, 1);
    db.close().expect("close");
    drop(db);
    clock.set(T0);
    let db = Db::open(Path::new("/exp"), opts).expect("reopen");
    assert_eq!(
        db.snapshot().time_ms(),
        T0 + 1_100,
        "the manifest's time floor"
    );
    assert_groups(&db, T0 + 1_100, "reopened");
}

#[test]
fn gc_leaves_a_table_that_expires_whole_soon_to_expire() {
    for (wait, collected) in [
        (crate::options::DEFAULT_GC_EXPIRY_WAIT_MS, false),
        (0, true),
    ] {
        let clock = Arc::new(ManualClock::new(T0));
        let opts = grouped(&clock)
            .with_gc_garbage_ratio(0.1)
            .with_gc_threads(0)
            .with_gc_expiry_wait_ms(wait);
        let db = Db::open(Path::new("/exp"), opts).expect("open");
        for i in 0..40u32 {
            let k = format!("k{i:03}");
            db.put_with_expiry(&k, big(&k), T0 + 60_000).expect("put");
        }
        db.flush().expect("flush");
        // Half of them overwritten: the expiring table is half garbage.
        for i in (0..40u32).step_by(2) {
            let k = format!("k{i:03}");
            db.put(&k, big("new")).expect("put");
        }
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
        let garbage = db.stats().values.garbage_records;
        assert!(garbage >= 20, "wait {wait}: {:?}", db.stats().values);
        db.run_gc().expect("gc");
        let s = db.stats();
        assert_eq!(s.gc.jobs > 0, collected, "wait {wait}: {:?}", s.gc);
        for i in 0..40u32 {
            let k = format!("k{i:03}");
            let want = if i % 2 == 0 { big("new") } else { big(&k) };
            assert_eq!(db.get(&k).expect("get"), Some(want), "wait {wait}: {k}");
        }
        // Past the expiry it goes whole, collected or not.
        clock.set(T0 + 60_000);
        db.run_gc().expect("gc");
        let recount = db.recount_garbage().expect("recount");
        assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
        assert!(db.stats().values.tables_expired >= 1, "wait {wait}");
    }
}

#[test]
fn only_the_newest_version_is_judged_in_either_direction() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    // An expired older version under a live newer one, and the other way round.
    db.put_with_expiry("a", "old", T0 + 10).expect("put");
    db.put("a", "fresh").expect("put");
    db.put("b", "old").expect("put");
    db.put_with_expiry("b", "new", T0 + 10).expect("put");
    db.put("c", "plain").expect("put");
    clock.set(T0 + 10);
    // In the memtable b's expired version is met by each walk and the get; the flush then
    // replaces it by a deletion, which nothing counts.
    for (flushed, skipped) in [(false, 3), (true, 0)] {
        let before = db.stats().operations.expired_skipped;
        assert_eq!(
            keys(&db, &ReadOptions::default()),
            ["a", "c"],
            "flushed {flushed}"
        );
        assert_eq!(
            keys_rev(&db, &ReadOptions::default()),
            ["a", "c"],
            "flushed {flushed}"
        );
        assert_eq!(db.get("a").expect("get"), Some(b"fresh".to_vec()));
        assert_eq!(db.get("b").expect("get"), None);
        assert_eq!(
            db.stats().operations.expired_skipped - before,
            skipped,
            "flushed {flushed}: b's newest version, once per walk and once per get; a's older \
             one never"
        );
        db.flush().expect("flush");
    }
    assert_eq!(
        db.stats().compaction.dropped_expired,
        1,
        "b's, by the flush"
    );
}

#[test]
fn a_flush_that_drops_expired_versions_records_the_time_for_the_next_open() {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = options(&clock);
    let db = Db::open(Path::new("/exp"), opts.clone()).expect("open");
    // x in a table, y in the memtable, both expiring at T0 + 10.
    db.put_with_expiry("x", "v", T0 + 10).expect("put");
    db.flush().expect("flush");
    db.put_with_expiry("y", "v", T0 + 10).expect("put");
    clock.set(T0 + 20);
    // The flush drops y, expired: its edit records the time it judged that at.
    db.flush().expect("flush");
    assert_eq!(db.stats().compaction.dropped_expired, 1);
    db.close().expect("close");
    drop(db);
    // Reopened with the clock set back: x, expired as early as y, stays expired.
    clock.set(T0);
    let db = Db::open(Path::new("/exp"), opts).expect("reopen");
    assert_eq!(db.time_ms(), T0 + 20);
    assert_eq!(db.get("x").expect("get"), None);
    assert_eq!(db.get("y").expect("get"), None);
}

/// Reads `key` both ways with `opts`, requiring `want` (value and expiry) of both.
fn assert_entry(
    db: &Db,
    ctx: &str,
    key: &str,
    opts: &ReadOptions<'_>,
    want: Option<(&[u8], Option<u64>)>,
) {
    let entry = db.get_entry(key, opts).expect("get_entry");
    assert_eq!(
        entry,
        want.map(|(v, e)| Entry {
            value: Bytes::copy_from_slice(v),
            expiry_ms: e,
        }),
        "{ctx}: {key}: get_entry"
    );
    assert_eq!(
        db.get_expiry(key, opts).expect("get_expiry"),
        want.map(|(_, e)| e),
        "{ctx}: {key}: get_expiry"
    );
    assert_eq!(
        db.get_with(key, opts).expect("get"),
        want.map(|(v, _)| v.to_vec()),
        "{ctx}: {key}: get"
    );
}

#[test]
fn entries_carry_their_expiry_inline_or_separated() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    let now = ReadOptions::default();
    let b = big("b");
    let d = big("d");
    db.put("a", "1").expect("put");
    db.put_with_expiry("c", "3", T0 + 100).expect("put");
    db.put("b", &b).expect("put");
    db.put_with_expiry("d", &d, T0 + 100).expect("put");
    db.put("deleted", "x").expect("put");
    db.delete("deleted").expect("delete");
    db.put("ranged", big("r")).expect("put");
    db.delete_range("ranged", "ranged\0").expect("delete range");
    let snap = db.snapshot();
    let at = ReadOptions::default().at(&snap);
    let check = |ctx: &str, later: bool| {
        for (opts, expired, ctx) in [(&now, later, ctx), (&at, false, &format!("{ctx}, at"))] {
            assert_entry(&db, ctx, "a", opts, Some((&b"1"[..], None)));
            assert_entry(&db, ctx, "b", opts, Some((&b[..], None)));
            let c = (!expired).then_some((&b"3"[..], Some(T0 + 100)));
            assert_entry(&db, ctx, "c", opts, c);
            let dd = (!expired).then_some((&d[..], Some(T0 + 100)));
            assert_entry(&db, ctx, "d", opts, dd);
            for k in ["deleted", "ranged", "absent"] {
                assert_entry(&db, ctx, k, opts, None);
            }
        }
    };
    check("memtable", false);
    db.flush().expect("flush");
    check("flushed", false);
    clock.set(T0 + 100);
    check("flushed, expired", true);
    db.compact_range(None, None).expect("compact");
    check("compacted", true);
    // Overwritten since the snapshot: the snapshot still reads the old entry.
    db.put_with_expiry("a", "2", T0 + 500).expect("put");
    assert_entry(&db, "now", "a", &now, Some((&b"2"[..], Some(T0 + 500))));
    assert_entry(&db, "at", "a", &at, Some((&b"1"[..], None)));
}

#[test]
fn an_expiry_is_read_without_the_separated_value() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    let huge = vec![b'h'; 1 << 20];
    db.put_with_expiry("huge", &huge, T0 + 1000).expect("put");
    db.put("huge-forever", &huge).expect("put");
    db.flush().expect("flush");
    let read = |db: &Db| {
        let s = db.stats();
        (s.io["user_read"].read_bytes, s.operations.gets_separated)
    };
    let before = read(&db);
    let opts = ReadOptions::default();
    assert_eq!(
        db.get_expiry("huge", &opts).expect("ttl"),
        Some(Some(T0 + 1000))
    );
    assert_eq!(
        db.get_expiry("huge-forever", &opts).expect("ttl"),
        Some(None)
    );
    let after = read(&db);
    assert!(
        after.0 - before.0 < 64 << 10,
        "index entries only: {} bytes read",
        after.0 - before.0
    );
    assert_eq!(after.1, before.1, "no separated value read");
    let entry = db.get_entry("huge", &opts).expect("get").expect("present");
    assert_eq!(entry.value.len(), huge.len());
    let later = read(&db);
    assert!(later.0 - after.0 >= 1 << 20, "the value is read");
    assert_eq!(later.1, after.1 + 1);
}

#[test]
fn an_iterator_reports_each_entrys_expiry() {
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&clock);
    write_mix(&db);
    let expiries = |db: &Db| {
        let opts = ReadOptions {
            lazy_values: true,
            ..ReadOptions::default()
        };
        let mut it = db.iter(&opts).expect("iter");
        it.seek_to_first().expect("seek");
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((it.key().to_vec(), it.expiry().expect("expiry")));
            it.next().expect("next");
        }
        seen
    };
    let want = vec![
        (b"a".to_vec(), Some(T0 + 100)),
        (b"b".to_vec(), Some(T0 + 100)),
        (b"c".to_vec(), Some(T0 + 200)),
        (b"d".to_vec(), None),
    ];
    assert_eq!(expiries(&db), want, "in the memtable");
    db.flush().expect("flush");
    // `b` is separated now: a lazy iterator reports its expiry from the handle.
    assert_eq!(expiries(&db), want, "in key tables, inline and separated");
}

/// A GC job that does not wait for the compactions running at its claim (the oracle reads the
/// index tree alone) must judge dead every record such a compaction drops: the compaction's
/// drops into the job's victims count as reclaimed early. So the compaction judges expiry at
/// the time it was registered, before the claim, not when it starts running: a version that
/// expires in between was otherwise dropped by the compaction but copied by the job, and its
/// copy stayed live in the accounting with no handle naming it.
#[test]
fn a_compaction_judges_expiry_when_registered_so_a_gc_job_overtaking_it_agrees() {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = options(&clock)
        .with_gc_policy(crate::GcPolicyKind::Terarkdb)
        .with_gc_garbage_ratio(0.2)
        .with_gc_threads(0)
        .with_stale_handle_share(0.0);
    let db = Db::open(Path::new("/exp"), opts).expect("open");
    // One value table: `x`, expiring at T0 + 100, beside ten keys that never expire, six of
    // them overwritten and compacted, so the table is over half garbage.
    db.put_with_expiry("x", big("x"), T0 + 100).expect("put");
    let k = |i: u32| format!("k{i}");
    for i in 0..10 {
        db.put(k(i), big(&k(i))).expect("put");
    }
    db.flush().expect("flush");
    for i in 0..6 {
        db.put(k(i), big("new")).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let tables: Vec<u64> = {
        let st = db.inner.state.lock();
        st.version.all_files().map(|(_, f)| f.number).collect()
    };
    assert_eq!(tables.len(), 1, "one key table after the compaction");
    let before = db.stats();
    assert_eq!(before.values.garbage_records, 6, "{:?}", before.values);
    // A compaction of the key table is registered (as a background worker claims one) ...
    let job = db
        .inner
        .register_forced_compaction(tables[0])
        .expect("a forced compaction");
    // ... then a GC job claims the value table and, judging at T0, copies `x` ...
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    assert_eq!(
        run.totals.records_written, 5,
        "x and k6..k9 copied: {run:?}"
    );
    // ... then `x` expires, and the compaction runs: it keeps `x`, as the job judged.
    clock.set(T0 + 200);
    db.inner
        .run_registered_compaction(&job)
        .expect("compaction");
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    assert_eq!(db.stats().values.drops_reclaimed_early, 0);
    // The next compaction judges at T0 + 200 and drops `x`, counted against the copy.
    db.compact_range(None, None).expect("compact");
    let recount = db.recount_garbage().expect("recount");
    assert!(recount.mismatches.is_empty(), "{:#?}", recount.mismatches);
    assert!(db.stats().compaction.dropped_expired >= 1);
    assert_eq!(db.get("x").expect("get"), None);
    for i in 0..10 {
        let want = if i < 6 { big("new") } else { big(&k(i)) };
        assert_eq!(db.get(k(i)).expect("get"), Some(want), "{}", k(i));
    }
}

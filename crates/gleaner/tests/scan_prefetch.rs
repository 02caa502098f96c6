//! Scans with separated values read ahead on the reader pool (`scan_prefetch_depth`) must see
//! exactly what scans without it see: forward, after seeks, across changes of direction, at a
//! snapshot, and through tables GC has collected (inheritance).

use std::collections::BTreeMap;
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{Db, Options, ReadOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(fs: &FaultFs, depth: u32) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(16 << 10)
        .with_key_table_size(16 << 10)
        .with_level_base_size(64 << 10)
        .with_value_table_size(32 << 10)
        .with_gc_garbage_ratio(0.3)
        .with_scan_prefetch_depth(depth)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Large (separated) and small (inline) values, different per round.
fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(3) {
        100
    } else {
        1500 + (i % 7) as usize * 300
    };
    let mut v = format!("{i}-{round}-").into_bytes();
    v.resize(len, b'a' + (round % 26) as u8);
    v
}

/// Writes 600 keys in a scattered order, then overwrites a third of them twice, flushing and
/// collecting garbage in between, so values of neighbouring keys sit in different tables and
/// some handles lead through inheritance. Returns the model and the model at a snapshot taken
/// before the last round.
fn build(db: &Db) -> (Model, Model, gleaner::Snapshot) {
    let mut model = Model::new();
    for j in 0..600u32 {
        let i = (j * 367) % 600;
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.flush().expect("flush");
    for round in 1..=2u32 {
        if round == 2 {
            let at_snapshot = model.clone();
            let snap = db.snapshot();
            for i in (0..600u32).filter(|i| i % 3 == 1) {
                db.put(key(i), value(i, round)).expect("put");
                model.insert(key(i), value(i, round));
            }
            db.delete(key(5)).expect("delete");
            model.remove(&key(5));
            db.flush().expect("flush");
            return (model, at_snapshot, snap);
        }
        for i in (0..600u32).filter(|i| i % 3 == 1) {
            db.put(key(i), value(i, round)).expect("put");
            model.insert(key(i), value(i, round));
        }
        db.compact_range(None, None).expect("compact");
        db.run_gc().expect("gc");
    }
    unreachable!("the loop returns in round 2")
}

/// Full forward scan, a seek with a short forward run, a change of direction and back, and a
/// range: everything must match the model.
fn check_scans(db: &Db, opts: &ReadOptions<'_>, model: &Model, what: &str) {
    let mut it = db.iter(opts).expect("iter");
    it.seek_to_first().expect("seek");
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "{what}: full scan length");
    assert!(got == want, "{what}: full scan differs");

    let keys: Vec<&Vec<u8>> = model.keys().collect();
    // One iterator for every start: a seek while values are read ahead for the old position
    // must not hand those values to the new one.
    let mut it = db.iter(opts).expect("iter");
    for start in [0usize, 17, 250, 240, 590, 300] {
        it.seek(keys[start]).expect("seek");
        let mut pos = start;
        // Forward 40, back 15, forward 30: the look-ahead restarts after each turn.
        for (steps, forward) in [(40, true), (15, false), (30, true)] {
            for _ in 0..steps {
                assert!(it.valid(), "{what}: valid at {pos}");
                assert_eq!(it.key(), &keys[pos][..], "{what}: key at {pos}");
                assert!(
                    it.value() == &model[keys[pos]][..],
                    "{what}: value at {pos} differs"
                );
                if forward {
                    if pos + 1 == keys.len() {
                        break;
                    }
                    it.next().expect("next");
                    pos += 1;
                } else {
                    if pos == 0 {
                        break;
                    }
                    it.prev().expect("prev");
                    pos -= 1;
                }
            }
        }
    }

    let lo = keys[100].clone();
    let hi = keys[400].clone();
    let ranged: Vec<_> = db
        .range(lo.as_slice()..hi.as_slice(), opts)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("range items");
    let want: Vec<_> = model
        .range(lo..hi)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(ranged == want, "{what}: range differs");
}

#[test]
fn prefetching_scans_see_exactly_what_plain_scans_see() {
    for depth in [0u32, 1, 8, 64] {
        let fs = FaultFs::new(11);
        let db = Db::open("/prefetch", options(&fs, depth)).expect("open");
        let (model, at_snapshot, snap) = build(&db);
        let what = format!("depth {depth}");
        check_scans(&db, &ReadOptions::default(), &model, &what);
        check_scans(
            &db,
            &ReadOptions::default().at(&snap),
            &at_snapshot,
            &format!("{what} at the snapshot"),
        );
        let s = db.stats();
        assert!(
            s.operations.gets_via_inheritance > 0 || s.gc.jobs > 0,
            "{what}: GC collected tables the scans read through: {:?}",
            s.gc
        );
        let prefetched = s.operations.scan_values_prefetched;
        if depth == 0 {
            assert_eq!(prefetched, 0, "{what}: no look-ahead");
        } else {
            assert!(prefetched > 100, "{what}: {prefetched} values prefetched");
        }
        drop(snap);
        db.close().expect("close");
    }
}

/// A prefetching scan walks the merged sources once: the user's iterator lands on the entries
/// its look-ahead walked instead of walking them a second time behind it. Seen in what the
/// walk counts: each expired version it skips once (a second walk would count it twice).
#[test]
fn a_prefetching_scan_walks_the_entries_once() {
    let fs = FaultFs::new(13);
    let clock = Arc::new(gleaner::expiry::ManualClock::new(1_000_000));
    // No compaction: one finishing after the clock moves drops expired versions the scan then
    // never meets, and whether one did depended on the scheduling (every flush stays in L0).
    let opts = options(&fs, 8)
        .with_clock(clock.clone())
        .with_l0_compaction_trigger(1000)
        .with_l0_slowdown_trigger(1000)
        .with_l0_stop_trigger(1000);
    let db = Db::open("/prefetch-walk", opts).expect("open");
    let mut live = 0;
    for i in 0..600u32 {
        if i % 4 == 0 {
            db.put_with_ttl(key(i), value(i, 0), 1_000).expect("put");
        } else {
            db.put(key(i), value(i, 0)).expect("put");
            live += 1;
        }
    }
    db.flush().expect("flush");
    clock.advance(2_000);
    let before = db.stats().operations.expired_skipped;
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first().expect("seek");
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.value(), value_of_key(it.key()).as_slice());
        n += 1;
        it.next().expect("next");
    }
    drop(it);
    assert_eq!(n, live);
    let s = db.stats();
    assert!(
        s.operations.scan_values_prefetched > 100,
        "{:?}",
        s.operations
    );
    assert_eq!(
        s.operations.expired_skipped - before,
        150,
        "each of the 150 expired keys skipped once"
    );
    db.close().expect("close");
}

/// The round-0 value of a key `key(i)`.
fn value_of_key(k: &[u8]) -> Vec<u8> {
    let i: u32 = std::str::from_utf8(&k[3..])
        .expect("utf-8")
        .parse()
        .expect("number");
    value(i, 0)
}

#[test]
fn bad_depth_is_refused_naming_the_option() {
    let fs = FaultFs::new(12);
    let e = Db::open("/prefetch-bad", options(&fs, 65)).expect_err("depth 65");
    assert!(e.to_string().contains("scan_prefetch_depth"), "{e}");
}

//! A partitioned index tree through `Db` (issue 29): flushes split by the routing, moves of key
//! ranges between the partitions keep every read, snapshot and iterator exact, each
//! partition's tables hold only its keys, and a crash at any point of a move recovers the
//! old routing or the new one with every acknowledged write.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::io::{FaultFs, TornMode};
use crate::key::user_key;
use crate::options::Partitioning;
use crate::table::ReadCtx;
use crate::version::routing::{COLD, HOT, KeyRange, Routing, partition_of_level};
use crate::{Db, Options, ReadOptions};

const DIR: &str = "/part";

fn options(fs: &FaultFs, partitioning: Partitioning) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_partitioning(partitioning)
        .with_memtable_size(32 << 10)
        .with_key_table_size(16 << 10)
        .with_min_separated_value_size(100)
        .with_inline_background_work(true)
}

fn open(fs: &FaultFs) -> Db {
    Db::open(Path::new(DIR), options(fs, Partitioning::Dpkv)).expect("open")
}

fn key(i: u32) -> String {
    format!("user{i:04}")
}

/// Values of several sizes, some separated (≥ 100 bytes), each naming its key and round.
fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(20 + (i as usize * 37 + round as usize * 11) % 300, b'v');
    v
}

fn hot(prefix: &str) -> Routing {
    Routing::new(vec![KeyRange::of_prefix(prefix.as_bytes())])
}

/// Writes `round` over keys `0..n` (every third deleted, a range of ten deleted), keeping
/// `model` in step.
fn write_round(db: &Db, model: &mut BTreeMap<String, Vec<u8>>, n: u32, round: u32) {
    for i in 0..n {
        if (i + round).is_multiple_of(3) {
            db.delete(key(i)).expect("delete");
            model.remove(&key(i));
        } else {
            db.put(key(i), value(i, round)).expect("put");
            model.insert(key(i), value(i, round));
        }
    }
    let (lo, hi) = (key(round * 50 % n), key(round * 50 % n + 10));
    db.delete_range(&lo, &hi).expect("delete range");
    model.retain(|k, _| !(lo.as_str() <= k.as_str() && k.as_str() < hi.as_str()));
}

/// Every key of `0..n` reads as the model says, and a full scan both ways yields the model.
fn check(db: &Db, model: &BTreeMap<String, Vec<u8>>, n: u32) {
    for i in 0..n {
        assert_eq!(
            db.get(key(i)).expect("get"),
            model.get(&key(i)).cloned(),
            "{}",
            key(i)
        );
    }
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first().expect("seek");
    let mut forward = Vec::new();
    while it.valid() {
        forward.push((
            String::from_utf8(it.key().to_vec()).expect("utf-8"),
            it.value().to_vec(),
        ));
        it.next().expect("next");
    }
    let expected: Vec<(String, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(forward, expected, "forward scan");
    it.seek_to_last().expect("seek");
    let mut backward = Vec::new();
    while it.valid() {
        backward.push(String::from_utf8(it.key().to_vec()).expect("utf-8"));
        it.prev().expect("prev");
    }
    backward.reverse();
    let keys: Vec<&String> = model.keys().collect();
    assert_eq!(backward.iter().collect::<Vec<_>>(), keys, "backward scan");
}

/// Every entry of every table is of the partition whose levels hold the table; returns the
/// tables of each partition.
fn check_placement(db: &Db) -> [usize; 2] {
    let version = Arc::clone(&db.inner.state.lock().version);
    let ctx = ReadCtx {
        class: crate::io::IoClass::Other,
        fill_cache: false,
        readahead: 0,
        readahead_ramp: false,
    };
    let mut tables = [0; 2];
    for (level, f) in version.all_files() {
        let p = partition_of_level(level);
        tables[p] += 1;
        let table = db
            .inner
            .tables
            .get(f.number, f.file_size, ctx.class)
            .expect("table");
        let mut it = table.iter(ctx);
        crate::iter::InternalIterator::seek_to_first(&mut it).expect("seek");
        while crate::iter::InternalIterator::valid(&it) {
            let k = crate::iter::InternalIterator::key(&it);
            assert_eq!(
                version.partition_of(user_key(k)),
                p,
                "table {} of level {level} holds {:?}",
                f.number,
                String::from_utf8_lossy(user_key(k))
            );
            crate::iter::InternalIterator::next(&mut it).expect("next");
        }
    }
    tables
}

#[test]
fn flushes_split_by_the_routing_and_moves_keep_every_read_exact() {
    let fs = FaultFs::new(1);
    let db = open(&fs);
    let n = 800;
    let mut model = BTreeMap::new();
    write_round(&db, &mut model, n, 1);
    db.flush().expect("flush");
    assert_eq!(check_placement(&db)[HOT], 0, "nothing is hot yet");
    // user01xx and user02xx move to the hot partition.
    let before = db.snapshot();
    let at_snapshot = model.clone();
    let moved = db
        .inner
        .move_to_routing(Routing::of_prefixes([&b"user01"[..], b"user02"]))
        .expect("move");
    assert!(moved.entries_to_hot > 100, "{moved:?}");
    assert_eq!(moved.entries_to_cold, 0);
    let placed = check_placement(&db);
    assert!(placed[HOT] > 0 && placed[COLD] > 0, "{placed:?}");
    check(&db, &model, n);
    // The snapshot taken before reads what it read: the versions moved with their sequence
    // numbers.
    for i in 0..n {
        let got = db
            .get_with(
                key(i),
                &ReadOptions {
                    snapshot: Some(&before),
                    ..ReadOptions::default()
                },
            )
            .expect("get");
        assert_eq!(got, at_snapshot.get(&key(i)).cloned(), "{}", key(i));
    }
    drop(before);
    // New writes are flushed into the partition of their keys, and compactions of both
    // partitions keep them there.
    for round in 2..5 {
        write_round(&db, &mut model, n, round);
        db.flush().expect("flush");
        check_placement(&db);
        check(&db, &model, n);
    }
    db.compact_range(None, None).expect("compact");
    check_placement(&db);
    check(&db, &model, n);
    // The hot range moves: user02 back to cold, user05 to hot.
    let moved = db
        .inner
        .move_to_routing(Routing::of_prefixes([&b"user01"[..], b"user05"]))
        .expect("move");
    assert!(
        moved.entries_to_hot > 0 && moved.entries_to_cold > 0,
        "{moved:?}"
    );
    check_placement(&db);
    check(&db, &model, n);
    let stats = db.stats();
    assert_eq!(stats.partitions.moves, 2);
    assert!(stats.partitions.partitioned && stats.partitions.hot_tables > 0);
    assert_eq!(stats.partitions.hot_ranges, 2);
    db.close().expect("close");
    // Reopened: the same routing and data.
    let db = open(&fs);
    assert_eq!(
        db.inner.state.lock().version.routing(),
        &Routing::of_prefixes([&b"user01"[..], b"user05"])
    );
    check_placement(&db);
    check(&db, &model, n);
    db.close().expect("close");
    // Unpartitioned while the hot partition holds tables: refused, naming the option.
    let e = Db::open(Path::new(DIR), options(&fs, Partitioning::None))
        .expect_err("hot tables")
        .to_string();
    assert!(e.contains("`partitioning`"), "{e}");
    // Everything moved back to the cold partition, the unpartitioned open is exact.
    let db = open(&fs);
    db.inner
        .move_to_routing(Routing::default())
        .expect("move back");
    assert_eq!(check_placement(&db)[HOT], 0);
    db.close().expect("close");
    let db = Db::open(Path::new(DIR), options(&fs, Partitioning::None)).expect("unpartitioned");
    check(&db, &model, n);
    db.close().expect("close");
}

#[test]
fn a_move_is_refused_in_an_unpartitioned_tree() {
    let fs = FaultFs::new(2);
    let db = Db::open(Path::new(DIR), options(&fs, Partitioning::None)).expect("open");
    let e = db.inner.move_to_routing(hot("user1")).expect_err("refused");
    assert!(e.to_string().contains("`partitioning`"), "{e}");
}

#[test]
fn a_crash_anywhere_in_a_move_recovers_one_routing_or_the_other_with_every_write() {
    let n = 300;
    // How many mutating operations a whole move takes, measured once.
    let ops = {
        let fs = FaultFs::new(3);
        let db = open(&fs);
        let mut model = BTreeMap::new();
        write_round(&db, &mut model, n, 1);
        db.flush().expect("flush");
        let before = fs.mutating_ops();
        db.inner.move_to_routing(hot("user01")).expect("move");
        fs.mutating_ops() - before
    };
    assert!(ops > 3, "{ops}");
    for crash_after in 0..ops {
        let fs = FaultFs::new(100 + crash_after);
        let db = open(&fs);
        let mut model = BTreeMap::new();
        write_round(&db, &mut model, n, 1);
        db.flush().expect("flush");
        fs.set_crash_after(crash_after);
        let moved = db.inner.move_to_routing(hot("user01"));
        drop(db);
        fs.crash(TornMode::KeepPrefixWithGarbage);
        let db = open(&fs);
        let routing = db.inner.state.lock().version.routing().clone();
        assert!(
            routing == Routing::default() || routing == hot("user01"),
            "after {crash_after} ops: {routing:?}"
        );
        if moved.is_ok() {
            assert_eq!(routing, hot("user01"), "an acknowledged move is durable");
        }
        check_placement(&db);
        check(&db, &model, n);
        db.close().expect("close");
    }
}

#[test]
fn a_range_delete_flushed_into_the_hot_l0_covers_the_older_hot_tables() {
    // The hot L0 holds several tables, each a run of its own: a read asks every one that may
    // hold the key, the tombstone's table first.
    let fs = FaultFs::new(1);
    let db = Db::open(
        Path::new(DIR),
        options(&fs, Partitioning::Dpkv).with_l0_compaction_trigger(8),
    )
    .expect("open");
    db.put(key(1), "x").expect("put");
    db.flush().expect("flush");
    db.inner.move_to_routing(hot("user01")).expect("move");
    for round in 0..3 {
        db.put(key(151), value(151, round)).expect("put");
        db.put(key(155), value(155, round)).expect("put");
        db.flush().expect("flush");
    }
    db.delete_range(key(150), key(160)).expect("delete range");
    db.flush().expect("flush");
    let version = Arc::clone(&db.inner.state.lock().version);
    let hot_l0 = crate::version::routing::level_in(HOT, 0);
    assert!(version.table_count(hot_l0) >= 2);
    assert_eq!(version.runs(hot_l0).len(), version.table_count(hot_l0));
    assert_eq!(db.get(key(151)).expect("get"), None);
    assert_eq!(db.get(key(155)).expect("get"), None);
    assert_eq!(db.get(key(1)).expect("get"), Some(b"x".to_vec()));
}

/// A deterministic generator (xorshift), so the test replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One detector interval: `count` reads, 80 % of them of 100 keys of region `hot` (keys
/// `hot·1000 ..`), the rest uniform over all 10,000; then a tick. Returns the hot partition's
/// reads during the interval.
fn interval(db: &Db, rng: &mut Rng, count: usize, hot: u64) -> u64 {
    let before = db.stats().partitions.hot_gets;
    for _ in 0..count {
        let i = if rng.below(100) < 80 {
            hot * 1000 + rng.below(100) * 10
        } else {
            rng.below(10_000)
        };
        db.get(key(i as u32)).expect("get");
    }
    let hot_reads = db.stats().partitions.hot_gets - before;
    db.hotness_tick().expect("tick");
    hot_reads
}

#[test]
fn the_detector_finds_the_hot_region_and_follows_it_when_it_moves() {
    let fs = FaultFs::new(5);
    let trie_bytes = 64 << 10;
    let opts = || {
        options(&fs, Partitioning::Dpkv)
            .with_dpkv_trie_bytes(trie_bytes)
            .with_dpkv_decay_interval(3600.0)
    };
    let db = Db::open(Path::new(DIR), opts()).expect("open");
    let n = 10_000;
    let mut model = BTreeMap::new();
    for i in 0..n {
        db.put(key(i), value(i, 1)).expect("put");
        model.insert(key(i), value(i, 1));
    }
    db.flush().expect("flush");
    let mut rng = Rng(7);
    // Region user3 is hot: within a few ticks its keys move to the hot partition, and its reads
    // are served there.
    let mut found = None;
    for tick in 0..12 {
        interval(&db, &mut rng, 20_000, 3);
        if db.inner.state.lock().version.partition_of(b"user3050") == HOT {
            found = Some(tick);
            break;
        }
    }
    assert!(
        found.is_some(),
        "user3 never became hot: {:?}",
        db.stats().partitions
    );
    let hot_reads = interval(&db, &mut rng, 20_000, 3);
    assert!(
        hot_reads >= 20_000 * 3 / 4,
        "{hot_reads} of the reads served hot"
    );
    let v = Arc::clone(&db.inner.state.lock().version);
    assert_eq!(v.partition_of(b"user7050"), COLD);
    assert_eq!(v.partition_of(b"user1000"), COLD);
    assert!(check_placement(&db)[HOT] > 0);
    check(&db, &model, n);
    // The hot spot moves to user7: user7 moves in, user3 out.
    let mut moved = false;
    for _ in 0..16 {
        interval(&db, &mut rng, 20_000, 7);
        let v = Arc::clone(&db.inner.state.lock().version);
        if v.partition_of(b"user7050") == HOT && v.partition_of(b"user3050") == COLD {
            moved = true;
            break;
        }
    }
    assert!(
        moved,
        "did not follow the move: {:?}",
        db.stats().partitions
    );
    let p = db.stats().partitions;
    assert!(
        p.entries_moved_to_hot > 0 && p.entries_moved_to_cold > 0,
        "{p:?}"
    );
    assert!(p.trie_bytes <= trie_bytes && p.trie_nodes > 1, "{p:?}");
    assert!(p.ticks >= 2 && p.hot_prefixes >= 1, "{p:?}");
    let hot_reads = interval(&db, &mut rng, 20_000, 7);
    assert!(
        hot_reads >= 20_000 * 3 / 4,
        "{hot_reads} of the reads served hot"
    );
    check_placement(&db);
    check(&db, &model, n);
    let routing = db.inner.state.lock().version.routing().clone();
    db.close().expect("close");
    // Reopened: the statistics come back from their files, so an idle tick (too few
    // accesses to judge) keeps the routing rather than draining the hot partition.
    let db = Db::open(Path::new(DIR), opts()).expect("reopen");
    let p = db.stats().partitions;
    assert!(p.restored_snapshot && p.damaged_files == 0, "{p:?}");
    assert_eq!(p.hot_prefixes, routing.ranges().len() as u64, "{p:?}");
    db.hotness_tick().expect("tick");
    assert_eq!(db.inner.state.lock().version.routing(), &routing);
    check(&db, &model, n);
}

#[test]
fn a_table_of_tombstones_alone_leaves_a_drained_partition() {
    // A range delete flushed into the hot partition is a table of tombstones alone: no entry
    // of it leaves when the keys move back, but nothing of it covers a hot key any more.
    let fs = FaultFs::new(6);
    let db = open(&fs);
    db.put(key(150), "x").expect("put");
    db.put(key(900), "y").expect("put");
    db.flush().expect("flush");
    db.inner.move_to_routing(hot("user01")).expect("move");
    db.delete_range(key(140), key(160)).expect("delete range");
    db.flush().expect("flush");
    assert!(db.stats().partitions.hot_tables > 0);
    db.inner.move_to_routing(Routing::default()).expect("drain");
    assert_eq!(db.stats().partitions.hot_tables, 0, "drained");
    assert_eq!(db.get(key(150)).expect("get"), None);
    assert_eq!(db.get(key(900)).expect("get"), Some(b"y".to_vec()));
    db.close().expect("close");
    let db = Db::open(Path::new(DIR), options(&fs, Partitioning::None)).expect("unpartitioned");
    assert_eq!(db.get(key(150)).expect("get"), None);
}

#[test]
fn a_routing_the_manifest_could_not_record_is_refused_before_anything_moves() {
    let fs = FaultFs::new(8);
    let db = open(&fs);
    db.put(key(1), "x").expect("put");
    let too_many = crate::version::routing::MAX_ROUTED_RANGES + 1;
    // Every other number: ranges that do not touch, so none joins its neighbour.
    let prefixes: Vec<Vec<u8>> = (0..too_many)
        .map(|i| format!("k{:08}", 2 * i).into_bytes())
        .collect();
    let e = db
        .inner
        .move_to_routing(Routing::of_prefixes(prefixes.iter().map(Vec::as_slice)))
        .expect_err("too many ranges");
    assert!(matches!(e, crate::Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("dpkv_trie_bytes"), "{e}");
    assert!(db.inner.state.lock().version.routing().is_empty());
    db.close().expect("close");
    open(&fs).close().expect("reopens");
}

/// A move whose range meets a table's extent but none of its keys leaves the table unread and
/// unwritten.
#[test]
fn a_move_leaves_tables_without_a_moving_key_unread() {
    let fs = FaultFs::new(12);
    let db = open(&fs);
    let n = 800;
    let mut model = BTreeMap::new();
    write_round(&db, &mut model, n, 1);
    db.flush().expect("flush");
    // "user00a…" sorts between user0099 and user0100: inside every table's extent, no key.
    let moved = db.move_hot_prefixes(&[b"user00a"]).expect("move");
    assert_eq!(moved, super::migrate::MoveStats::default());
    assert_eq!(db.inner.state.lock().version.routing(), &hot("user00a"));
    assert_eq!(check_placement(&db)[HOT], 0);
    check(&db, &model, n);
    db.close().expect("close");
}

/// Polls `done` (under the state lock) until it holds, for at most `secs`; whether it did.
fn wait_until(db: &Db, secs: f64, done: impl Fn(&super::DbState) -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    let mut st = db.inner.state.lock();
    while !done(&st) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        db.inner
            .progress_cv
            .wait_for(&mut st, std::time::Duration::from_millis(5));
    }
    true
}

/// Background workers, a cold tree that merges at four runs, no detector ticks, no GC.
fn background_options(fs: &FaultFs) -> Options {
    options(fs, Partitioning::Dpkv)
        .with_inline_background_work(false)
        .with_gc_threads(0)
        .with_memtable_size(1 << 20)
        .with_tiered_run_trigger(4)
        .with_dpkv_decay_interval(86_400.0)
}

/// A move waits for the compactions running on its ranges, and flushes go on meanwhile; no
/// compaction on its ranges starts while it waits, so it cannot be starved by them.
#[test]
fn a_move_drains_the_compactions_on_its_ranges_while_flushes_go_on() {
    let fs = FaultFs::new(13);
    let db = Db::open(Path::new(DIR), background_options(&fs)).expect("open");
    let n = 400;
    let mut model = BTreeMap::new();
    for round in 0..3 {
        write_round(&db, &mut model, n, round);
        db.flush().expect("flush");
    }
    // The fourth run starts a merge of all four, held at its first read.
    let gate = fs.add_gate(crate::io::FaultOp::Read, Some(".sst"), 0);
    write_round(&db, &mut model, n, 3);
    db.flush().expect("flush");
    assert!(
        gate.wait_until_reached(std::time::Duration::from_secs(60)),
        "a merge of the four runs"
    );
    std::thread::scope(|s| {
        let mover = s.spawn(|| db.move_hot_prefixes(&[b"user01"]));
        if !wait_until(&db, 60.0, |st| st.move_gate.is_some()) {
            gate.open();
            panic!("the move raised no gate in a minute");
        }
        // Flushes go on while the move waits for the merge; the new run would start no
        // compaction on the moving range.
        write_round(&db, &mut model, n, 4);
        db.flush().expect("flush while the move waits");
        let (waiting, pausing, running) = {
            let st = db.inner.state.lock();
            let g = st.move_gate.as_ref();
            (
                g.is_some() && !mover.is_finished(),
                g.is_some_and(super::migrate::MoveGate::pauses_flushes),
                format!("{:?}", st.running),
            )
        };
        // Released before asserting: a failure must not leave the jobs held.
        gate.open();
        let moved = mover.join().expect("join").expect("move");
        assert!(waiting, "the move waits for the merge");
        assert!(!pausing, "flushes go on while it does");
        // The held merge and the move's claims, one per partition.
        assert_eq!(running.matches("RunningCompaction").count(), 3, "{running}");
        assert!(moved.entries_to_hot > 0, "{moved:?}");
    });
    check_placement(&db);
    check(&db, &model, n);
    assert!(db.stats().partitions.move_wait_micros > 0);
    db.close().expect("close");
}

/// A move waits for a manual compaction to end: one between its passes over the partitions
/// could carry keys into a tree the compaction had done.
#[test]
fn a_move_waits_for_a_manual_compaction_to_end() {
    let fs = FaultFs::new(14);
    let db = Db::open(Path::new(DIR), background_options(&fs)).expect("open");
    let n = 400;
    let mut model = BTreeMap::new();
    db.move_hot_prefixes(&[b"user01"]).expect("move");
    for round in 0..2 {
        write_round(&db, &mut model, n, round);
        db.flush().expect("flush");
    }
    let gate = fs.add_gate(crate::io::FaultOp::Read, Some(".sst"), 0);
    std::thread::scope(|s| {
        let compactor = s.spawn(|| db.compact_range(None, None));
        assert!(
            gate.wait_until_reached(std::time::Duration::from_secs(60)),
            "the manual compaction's first pass"
        );
        assert_eq!(db.inner.state.lock().move_holds, 1);
        let mover = s.spawn(|| db.move_hot_prefixes(&[]));
        // However long it is given, the move raises no gate while the compaction runs (half a
        // second here: enough for a move that did not wait to raise it).
        let raised = wait_until(&db, 0.5, |st| st.move_gate.is_some());
        // Released before asserting: a failure must not leave the jobs held.
        gate.open();
        compactor.join().expect("join").expect("compact");
        let moved = mover.join().expect("join").expect("move");
        assert!(!raised, "a move began inside a manual compaction");
        assert!(moved.entries_to_cold > 0, "{moved:?}");
    });
    assert_eq!(check_placement(&db)[HOT], 0);
    check(&db, &model, n);
    db.close().expect("close");
}

/// In a partitioned tree every key of a table is routed to its partition: a routing changed
/// without moving the keys (what a bug in a move would leave) is a problem naming the tables.
#[test]
fn keys_in_the_wrong_partition_are_problems() {
    use crate::version::VersionEdit;
    use crate::version::routing::Routing;
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options::default()
        .with_partitioning(crate::Partitioning::Dpkv)
        .with_dpkv_decay_interval(86_400.0)
        .with_memtable_size(4096)
        .with_key_table_size(4096);
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    db.move_hot_prefixes(&[b"key001"]).expect("move");
    for i in 0..600 {
        db.put(format!("key{i:05}"), format!("value-{i}"))
            .expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    let report = crate::tools::check_db(dir.path(), &Options::default()).expect("check runs");
    assert!(report.is_clean(), "{report:#?}");
    // The routing alone changes: key001xx stays in the hot partition's tables, routed cold.
    let db = Db::open(dir.path(), opts).expect("reopen");
    db.inner
        .versions
        .lock()
        .log_and_apply(VersionEdit {
            routing: Some(Routing::of_prefixes([&b"key002"[..]])),
            ..Default::default()
        })
        .expect("edit");
    db.close().expect("close");
    let report = crate::tools::check_db(dir.path(), &Options::default()).expect("check runs");
    let misrouted: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.detail.contains("the routing sends to the cold partition"))
        .collect();
    assert!(!misrouted.is_empty(), "{report:#?}");
    assert!(
        misrouted[0].detail.contains("key key001"),
        "{}",
        misrouted[0]
    );
}

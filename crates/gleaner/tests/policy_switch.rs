//! Switching a database from one GC policy to another on reopen (docs/gc.md, "Switching
//! policies"): every key stays readable and every byte of garbage stays counted.
//!
//! The regression tests first: each builds the artifact of one policy that another policy once
//! mishandled, reopens under that policy, and checks the data and the accounting exactly.

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;
mod rounds;
mod sim;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rounds::{KEYS, assert_reads, build, key, value};

use gleaner::io::{FaultFs, FaultKind, FaultOp, FaultRule, TornMode};
use gleaner::{
    CompactionStyle, Db, GcPolicyKind, Options, Partitioning, ReadOptions, SeparateAt, Snapshot,
};

/// Options every test here starts from: background work inline and GC only when asked, so the
/// test decides what runs when.
fn base(fs: &FaultFs) -> Options {
    rounds::inline_options(fs)
}

fn assert_recount(db: &Db, ctx: &str) {
    rounds::assert_exact_garbage(db, ctx);
}

fn level_files(db: &Db) -> Vec<usize> {
    db.stats().levels.iter().map(|l| l.files).collect()
}

/// `novkv` → `blobdb`. Under `novkv` a read that found its record through inheritance writes an
/// alias naming the record's live table; the alias is flushed to L0 while the record's owner sits
/// deeper. Reopened as `blobdb`, a compaction of the owner's level that does not include the
/// alias's relocates the owner's value and counts the old record as garbage; once every record
/// of the table the alias names was relocated, the table went, and the alias resolved to
/// nothing: reads of the key failed with `Corruption`.
#[test]
fn novkv_aliases_survive_relocation_under_blobdb() {
    let fs = FaultFs::new(23);
    let path = Path::new("/switch-novkv-blobdb");
    let latest = novkv_aliases_in_l0(&fs, path);
    relocate_past_the_aliases(&fs, path, &latest);
}

/// A `novkv` database of [`rounds`] keys, collected, whose first half's keys have aliases in an
/// L0 table while their owners sit in L1; returns each key's round.
fn novkv_aliases_in_l0(fs: &FaultFs, path: &Path) -> Vec<u32> {
    let novkv = base(fs)
        .with_gc_policy(GcPolicyKind::Novkv)
        .with_novkv_valid_threshold(0.9);
    // Every flush compacted into level 1 at once: the owners leave L0.
    let db = Db::open(path, novkv.clone().with_l0_compaction_trigger(1)).expect("open");
    let latest = build(&db);
    assert!(
        db.run_gc().expect("gc").jobs > 0,
        "the old tables collected"
    );
    db.close().expect("close");
    drop(db);
    let db = Db::open(path, novkv).expect("reopen");
    // Reads of the first half's keys that build left alone go through inheritance and queue
    // aliases; the first flush is the fixed point that writes them, the second puts them into an
    // L0 table, which covers only the first half of the key space.
    for i in 0..KEYS / 2 {
        assert_eq!(
            db.get(key(i)).expect("get"),
            Some(value(i, latest[i as usize]))
        );
    }
    db.flush().expect("write the aliases");
    assert!(db.stats().operations.handle_updates_written > 0);
    db.flush().expect("flush the aliases");
    assert_eq!(level_files(&db)[..2], [1, 1], "aliases in L0, owners in L1");
    assert_recount(&db, "under novkv");
    db.close().expect("close");
    latest
}

/// Reopens as `blobdb`, every value table old enough to relocate from, and compacts the second
/// half's range: a compaction that does not include the aliases' L0 table, of the L1 table
/// holding every owner. Every key must read its value, then and after a full compaction, and
/// back under `novkv` after GC.
fn relocate_past_the_aliases(fs: &FaultFs, path: &Path, latest: &[u32]) {
    let blobdb = base(fs)
        .with_gc_policy(GcPolicyKind::Blobdb)
        .with_blobdb_age_cutoff(1.0);
    let db = Db::open(path, blobdb.clone()).expect("reopen as blobdb");
    db.compact_range(Some(key(KEYS / 2).as_bytes()), None)
        .expect("relocating compaction");
    assert!(db.stats().compaction.bytes_written > 0);
    assert_reads(&db, latest, "after relocation under blobdb");
    assert_recount(&db, "after relocation under blobdb");
    db.compact_range(None, None).expect("compact");
    assert_reads(&db, latest, "after a full compaction under blobdb");
    sim::check_recovered_state(db, path, &blobdb, "blobdb");
    let novkv = base(fs).with_gc_policy(GcPolicyKind::Novkv);
    let db = Db::open(path, novkv.clone()).expect("reopen as novkv");
    assert_reads(&db, latest, "back under novkv");
    db.run_gc().expect("gc");
    assert_reads(&db, latest, "after GC back under novkv");
    sim::check_recovered_state(db, path, &novkv, "novkv again");
}

/// The same after an upgrade: a database whose manifest was written before key tables recorded
/// their alias counts (manifest format 1) holds aliases nothing counted. Its tables that hold
/// handles are taken as holding aliases until compaction rewrites them, so relocation looks into
/// them too.
#[test]
fn aliases_written_before_their_count_was_recorded_survive_relocation() {
    let fs = FaultFs::new(27);
    let path = Path::new("/switch-novkv-blobdb-upgrade");
    let latest = novkv_aliases_in_l0(&fs, path);
    rewrite_as_format_1(&fs, path);
    relocate_past_the_aliases(&fs, path, &latest);
}

/// Rewrites the database's manifest as a build before alias counts wrote it: format version 1,
/// no key table's alias count.
fn rewrite_as_format_1(fs: &FaultFs, path: &Path) {
    use gleaner::io::{CountedReader, FileSystem, IoClass, IoStats, ReadFileOptions};
    use gleaner::version::VersionEdit;
    use gleaner::wal::{LogReader, LogWriter};
    let stats = IoStats::default();
    let number = gleaner::version::read_current(fs, path, &stats).expect("CURRENT");
    let name = gleaner::filename::manifest_file_name(number);
    let file = fs
        .open_readable(&path.join(&name), ReadFileOptions::default())
        .expect("open manifest");
    let mut reader = LogReader::new(
        CountedReader::new(file, Arc::new(IoStats::default())),
        name.clone(),
        IoClass::Manifest,
        gleaner::WalRecoveryMode::TolerateCorruptedTail,
        gleaner::version::set::MAX_MANIFEST_RECORD,
    )
    .expect("reader");
    let mut edits = Vec::new();
    while let Some((offset, record)) = reader.read_record().expect("record") {
        let mut e = VersionEdit::decode(&record, &name, offset).expect("edit");
        if e.format_version.is_some() {
            e.format_version = Some(1);
        }
        for t in &mut e.new_tables {
            t.meta.aliases = 0;
        }
        edits.push(e);
    }
    assert!(
        edits[0]
            .new_tables
            .iter()
            .any(|t| !t.meta.dependence.is_empty())
    );
    let tmp = path.join("manifest.rewrite");
    let file = fs
        .new_writable(&tmp, gleaner::io::WriteFileOptions::default())
        .expect("create");
    let mut w = LogWriter::new(file);
    for e in &edits {
        w.add_record(&e.encode()).expect("add");
    }
    w.sync().expect("sync");
    drop(w);
    fs.rename(&tmp, &path.join(&name)).expect("rename");
    fs.sync_dir(path).expect("sync dir");
}

/// `blobdb` → `terarkdb`. Relocation leaves the old copy of a record, same key and sequence
/// number, in its old table, counted as garbage there. TerarkDB's oracle compared sequence
/// numbers only, so a GC job took every such stale copy for live: it copied it (space never
/// reclaimed, the recount disagreeing), and when the relocated copy's table was a victim of the
/// same job the merged records met one internal key twice and the job failed, every time.
#[test]
fn relocated_stale_copies_are_garbage_to_terarkdb() {
    // The old table alone a victim: its stale copies were copied as live.
    relocated_stale_copies(false);
    // With the relocated copies' table: one internal key twice in one job.
    relocated_stale_copies(true);
}

fn relocated_stale_copies(both_victims: bool) {
    let fs = FaultFs::new(24);
    let path = Path::new("/switch-blobdb-terarkdb");
    // Small key tables over one large value table: a ranged compaction relocates part of it.
    let terarkdb = base(&fs)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_gc_garbage_ratio(0.0)
        .with_key_table_size(1 << 10)
        .with_compression(gleaner::Compression::None)
        .with_value_table_size(1 << 20);
    // The flush compacted into level 1 at once, cut into small key tables.
    let db = Db::open(path, terarkdb.clone().with_l0_compaction_trigger(1)).expect("open");
    let mut latest = vec![0u32; KEYS as usize];
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    // Rewritten in place in level 1, cut into small tables.
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.stats().values.per_table.len(), 1, "one value table");
    assert!(level_files(&db)[1] > 1, "several key tables");
    db.close().expect("close");
    drop(db);

    let blobdb = base(&fs)
        .with_gc_policy(GcPolicyKind::Blobdb)
        .with_blobdb_age_cutoff(1.0)
        .with_key_table_size(1 << 10)
        .with_compression(gleaner::Compression::None)
        .with_value_table_size(1 << 20);
    let db = Db::open(path, blobdb.clone()).expect("reopen as blobdb");
    // Relocate the first half of the keys: the old table keeps their stale copies as garbage.
    let mid = key(KEYS / 2);
    db.compact_range(None, Some(mid.as_bytes()))
        .expect("relocating compaction");
    let s = db.stats();
    assert_eq!(
        s.values.per_table.len(),
        2,
        "old and new table: {:?}",
        s.values.per_table
    );
    assert!(s.values.garbage_records > 0, "stale copies counted");
    assert_recount(&db, "under blobdb");
    db.close().expect("close");
    drop(db);

    let db = Db::open(path, terarkdb.clone()).expect("reopen as terarkdb");
    if both_victims {
        // One key of the relocated half overwritten, so the new table holds garbage too and
        // both tables are victims of one job.
        db.put(key(0), value(0, 1)).expect("put");
        latest[0] = 1;
        db.compact_range(None, Some(key(1).as_bytes()))
            .expect("compact");
    }
    let ctx = format!("both victims: {both_victims}");
    let run = db
        .run_gc()
        .unwrap_or_else(|e| panic!("{ctx}: GC must not fail: {e}"));
    assert!(run.jobs > 0, "{ctx}: {run:?}");
    assert_recount(&db, &format!("{ctx}: after GC under terarkdb"));
    assert_eq!(
        db.stats().gc.twin_restarts > 0,
        both_victims,
        "{ctx}: the two copies met in one job"
    );
    assert_eq!(
        db.stats().values.garbage_records,
        0,
        "{ctx}: every stale copy reclaimed"
    );
    assert_reads(&db, &latest, &ctx);
    sim::check_recovered_state(db, path, &terarkdb, &ctx);
}

// ---------------------------------------------------------------------------------------------
// The switch matrix: every ordered pair of registered policies.
// ---------------------------------------------------------------------------------------------

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys of the matrix's key space (`GLEANER_SWITCH_KEYS`, default 240).
fn matrix_keys() -> u32 {
    sim::env_u64("GLEANER_SWITCH_KEYS").map_or(240, |n| n.clamp(10, 1 << 20) as u32)
}

/// Rounds of writes and collection in each phase (`GLEANER_SWITCH_ROUNDS`, default 2).
fn matrix_rounds() -> u32 {
    sim::env_u64("GLEANER_SWITCH_ROUNDS").map_or(2, |n| n.clamp(1, 1000) as u32)
}

/// The options of `policy` in the matrix: small tables so that every phase flushes, compacts
/// and collects, and each policy tuned to collect often (its own options are the ones a switch
/// drops).
///
/// Every open registers the custom scheme of `common/custom.rs` (its tables carry metadata an
/// open must know), and the built-in policies then choose themselves. The compaction style
/// rotates with the seed: each policy's opens run leveled or tiered by the seed's bit for it, so
/// a switch also changes the style for about half the pairs of a seed; `separate_at`,
/// `prepopulate_value_cache`, `stale_handle_share`, `row_cache_size` and
/// `prepopulate_row_cache` rotate the same way.
fn matrix_options(fs: &FaultFs, policy: GcPolicyKind, seed: u64) -> Options {
    let index = MATRIX_POLICIES
        .iter()
        .position(|p| *p == policy)
        .expect("a matrix policy") as u64;
    // Leveled, tiered, or DP-KV's partitioned tree (tiered cold, leveled hot), its detector
    // ticking every 200 accesses and finding the near-uniform keys hot: they move to the hot
    // partition early.
    let (style, partitioning) = match (seed.rotate_left(index as u32 * 7) >> index) % 3 {
        0 => (CompactionStyle::Leveled, Partitioning::None),
        1 => (CompactionStyle::Tiered, Partitioning::None),
        _ => (CompactionStyle::Leveled, Partitioning::Dpkv),
    };
    // Values written once or separated at flush, by another bit of the seed: about half the
    // pairs of a seed switch `separate_at` too.
    let separate_at = if (seed.rotate_left(index as u32 * 11 + 3) >> index) & 1 == 1 {
        SeparateAt::Write
    } else {
        SeparateAt::Flush
    };
    // Values put into the value cache as they are separated, by a third bit: about half the
    // pairs turn it on or off across the switch.
    let warm = (seed.rotate_left(index as u32 * 13 + 5) >> index) & 1 == 1;
    // Key tables rewritten for their stale handles (at a low share, so it happens) or not, by
    // a fourth bit: a switch turns it on or off for about half the pairs. Never under `novkv`:
    // its state must hold aliases, which only reads of stale handles write.
    let stale_share = if policy != GcPolicyKind::Novkv
        && (seed.rotate_left(index as u32 * 17 + 7) >> index) & 1 == 1
    {
        0.2
    } else {
        0.0
    };
    // A row cache (reads fill it; or, by a sixth bit, writes too) by a fifth bit: the switch
    // reopens with it empty, on or off, and the reads after it must be exact either way.
    let rows = (seed.rotate_left(index as u32 * 19 + 9) >> index) & 1 == 1;
    let warm_rows = rows && (seed.rotate_left(index as u32 * 23 + 11) >> index) & 1 == 1;
    let registered = base(fs).with_custom_policy(Arc::new(common::custom::inheritance()));
    let o = match policy {
        GcPolicyKind::Custom => registered,
        p => registered.with_gc_policy(p),
    }
    .with_compaction_style(style)
    .with_partitioning(partitioning)
    .with_separate_at(separate_at)
    .with_prepopulate_value_cache(warm)
    .with_stale_handle_share(stale_share)
    .with_row_cache_size(if rows { common::ROW_CACHE_BYTES } else { 0 })
    .with_prepopulate_row_cache(warm_rows)
    .with_dpkv_tick_accesses(200)
    .with_dpkv_hot_density(1.0)
    .with_memtable_size(16 << 10)
    .with_key_table_size(4 << 10)
    .with_level_base_size(16 << 10)
    .with_value_table_size(8 << 10)
    .with_gc_garbage_ratio(0.05)
    .with_gc_max_input_size(32 << 10)
    // Expiring keys ([`write_expiring`]) in tables of their own, under the simulations' clock.
    .with_expiry_group_ms(1_000)
    .with_clock(sim::clock());
    match policy {
        GcPolicyKind::Titan => o.with_titan_discardable_ratio(0.05),
        GcPolicyKind::Blobdb => o
            .with_blobdb_age_cutoff(0.5)
            .with_blobdb_force_threshold(0.2),
        GcPolicyKind::Novkv => o.with_novkv_valid_threshold(0.95),
        // Lifetimes of tens of writes, and a model trained every 64 samples.
        GcPolicyKind::Dumpkv => o.with_dumpkv_time_unit(16).with_dumpkv_train_samples(64),
        // The matrix's 100-byte threshold for small values, its longest values (1,000 to
        // 1,500 bytes) in vLogs, GC as frequent as the others', and few sorted runs so the
        // scan-optimised merge runs.
        GcPolicyKind::Diffkv => o
            .with_diffkv_small_max(100)
            .with_diffkv_large_min(1_000)
            .with_diffkv_gc_ratio(0.05)
            .with_diffkv_vtree_gc_ratio(0.05)
            .with_diffkv_max_sorted_runs(2)
            .with_diffkv_merge_levels(3),
        GcPolicyKind::Terarkdb | GcPolicyKind::Scavenger | GcPolicyKind::Custom => o,
    }
}

/// The policies the matrix switches between: every built-in one and the custom scheme.
const MATRIX_POLICIES: [GcPolicyKind; 8] = [
    GcPolicyKind::Terarkdb,
    GcPolicyKind::Scavenger,
    GcPolicyKind::Titan,
    GcPolicyKind::Blobdb,
    GcPolicyKind::Novkv,
    GcPolicyKind::Dumpkv,
    GcPolicyKind::Diffkv,
    GcPolicyKind::Custom,
];

fn matrix_key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A value for key `i`: mostly separated (150 to 1,500 bytes), a fifth inline (under the
/// 100-byte threshold), naming its key and a tag so a value read under the wrong key shows.
fn matrix_value(rng: &mut StdRng, i: u32, tag: &str) -> Vec<u8> {
    let len = if rng.random_bool(0.2) {
        rng.random_range(20..90)
    } else {
        rng.random_range(150..1500)
    };
    let mut v = format!("{i} {tag} ").into_bytes();
    v.resize(len.max(v.len()), b'a' + (i % 26) as u8);
    v
}

/// Writes every seventh key with a value expiring 1 s from now and every eleventh (but those)
/// with one expiring in an hour, flushed; then the clock moves 2 s on: the first expire (and
/// leave the model), their records in value tables of their own that expire whole, the second
/// stay, in format-2 tables with their expiries.
fn write_expiring(db: &Db, model: &mut Map, rng: &mut StdRng) {
    let clock = sim::clock();
    let now = gleaner::expiry::Clock::now_ms(&*clock);
    let mut expired = Vec::new();
    for i in 0..matrix_keys() {
        let k = matrix_key(i);
        let soon = i % 7 == 0;
        if !soon && i % 11 != 0 {
            continue;
        }
        let v = matrix_value(rng, i, "ttl");
        let expiry = now + if soon { 1_000 } else { 3_600_000 };
        db.put_with_expiry(&k, &v, expiry).expect("put with expiry");
        if soon {
            expired.push(k.clone());
        }
        model.insert(k, v);
    }
    db.flush().expect("flush");
    clock.set(now + 2_000);
    for k in expired {
        model.remove(&k);
    }
}

/// Range-deletes a random run of up to an eighth of the keys.
fn delete_some_range(db: &Db, model: &mut Map, rng: &mut StdRng) {
    let keys = matrix_keys();
    let start = rng.random_range(0..keys);
    let end = start + rng.random_range(1..=keys / 8 + 1);
    let (start, end) = (matrix_key(start), matrix_key(end));
    db.delete_range(&start, &end).expect("delete_range");
    model.retain(|k, _| !(*k >= start && *k < end));
}

/// One round: a third of the keys overwritten, a few deleted, a few put back, most rounds a
/// range of keys deleted, then flushed.
fn write_round(db: &Db, model: &mut Map, rng: &mut StdRng, tag: &str) {
    let keys = matrix_keys();
    if rng.random_bool(0.7) {
        delete_some_range(db, model, rng);
    }
    for i in 0..keys {
        let k = matrix_key(i);
        let r: f64 = rng.random();
        if r < 0.33 || !model.contains_key(&k) && r < 0.5 {
            let v = matrix_value(rng, i, tag);
            db.put(&k, &v).expect("put");
            model.insert(k, v);
        } else if r < 0.38 {
            db.delete(&k).expect("delete");
            model.remove(&k);
        }
    }
    db.flush().expect("flush");
}

/// Flushes, compacts everything and runs GC until no job finds a victim (bounded).
fn collect(db: &Db, ctx: &str) {
    db.compact_range(None, None)
        .unwrap_or_else(|e| panic!("{ctx}: compact: {e}"));
    for _ in 0..1000 {
        let run = db.run_gc().unwrap_or_else(|e| panic!("{ctx}: gc: {e}"));
        if run.jobs == 0 {
            return;
        }
    }
    panic!("{ctx}: GC never reached quiescence");
}

/// Every key read by `get`, the whole database walked forward and in reverse: all exactly
/// `model`.
fn check_model(db: &Db, model: &Map, ctx: &str) {
    for i in 0..matrix_keys() {
        let k = matrix_key(i);
        assert_eq!(
            db.get(&k).unwrap_or_else(|e| panic!("{ctx}: get {i}: {e}")),
            model.get(&k).cloned(),
            "{ctx}: get {i}"
        );
    }
    check_walks(db, None, model, ctx);
}

fn check_walks(db: &Db, snapshot: Option<&Snapshot>, model: &Map, ctx: &str) {
    let ro = match snapshot {
        Some(s) => ReadOptions::default().at(s),
        None => ReadOptions::default(),
    };
    let forward: Map = db
        .range(.., &ro)
        .unwrap_or_else(|e| panic!("{ctx}: range: {e}"))
        .map(|r| r.unwrap_or_else(|e| panic!("{ctx}: scan: {e}")))
        .collect();
    assert!(forward == *model, "{ctx}: forward walk differs");
    let reverse: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(.., &ro)
        .unwrap_or_else(|e| panic!("{ctx}: range: {e}"))
        .rev()
        .map(|r| r.unwrap_or_else(|e| panic!("{ctx}: reverse scan: {e}")))
        .collect();
    assert!(
        reverse.iter().eq(model
            .iter()
            .rev()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
            .iter()),
        "{ctx}: reverse walk differs"
    );
}

/// Builds, under `policy`, a database holding that policy's own artifacts, and returns the file
/// system and the model of its contents. Every policy: handles naming collected tables and
/// garbage in every state. Then, by policy: `novkv` aliases in L0 and in the WAL and drop files;
/// `titan` written-back handles and a job cut by power loss between its two edits (victims and
/// outputs both live, two copies of each moved record); `blobdb` relocated copies next to their
/// old ones; `scavenger` hot and cold runs over index-decoupled key tables.
fn build_state(policy: GcPolicyKind, seed: u64) -> (FaultFs, Map) {
    let fs = FaultFs::new(seed);
    let path = Path::new("/matrix");
    sim::clock().set(sim::T0);
    let opts = matrix_options(&fs, policy, seed);
    let ctx = format!("building under {}", policy.name());
    let db = Db::open(path, opts).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Map::new();
    for i in 0..matrix_keys() {
        let v = matrix_value(&mut rng, i, "r0");
        db.put(matrix_key(i), &v).expect("put");
        model.insert(matrix_key(i), v);
    }
    db.flush().expect("flush");
    for round in 1..=matrix_rounds() {
        write_round(
            &db,
            &mut model,
            &mut rng,
            &format!("{}{round}", policy.name()),
        );
        collect(&db, &ctx);
    }
    // Expired keys whose versions and records the next policy meets (and tables that expired
    // whole, for the GC of this one or the next), keys that expire later, garbage left for the
    // next policy to count and collect, and a range tombstone for it to read and compact, in an
    // L0 table above the keys it deletes.
    write_expiring(&db, &mut model, &mut rng);
    check_model(&db, &model, &format!("{ctx}: expired"));
    db.run_gc().expect("gc");
    assert!(
        db.stats().values.tables_expired > 0,
        "{ctx}: a table expired whole: {:?}",
        db.stats().values
    );
    write_round(&db, &mut model, &mut rng, "left");
    db.compact_range(None, None).expect("compact");
    delete_some_range(&db, &mut model, &mut rng);
    db.flush().expect("flush");
    match policy {
        GcPolicyKind::Novkv => {
            collect(&db, &ctx);
            // Reads through inheritance queue aliases; a fixed point writes them, a flush puts
            // them into L0; the next reads' aliases stay in the memtable and its WAL.
            check_model(&db, &model, &ctx);
            db.flush().expect("write aliases");
            db.flush().expect("flush aliases");
            write_round(&db, &mut model, &mut rng, "alias");
            collect(&db, &ctx);
            check_model(&db, &model, &ctx);
            db.flush().expect("write aliases");
            let r = db.recount_garbage().expect("recount");
            assert!(r.aliases > 0, "{ctx}: aliases: {r:?}");
        }
        GcPolicyKind::Titan => {
            // The job's first edit (outputs installed, marked) lands, its write-backs are synced
            // in the WAL, and power is lost at the manifest sync of its second edit.
            fs.add_fault(FaultRule::counter(FaultOp::Sync, Some("MANIFEST".into())));
            let synced = *fs.fault_rule_matches().last().expect("counter");
            fs.clear_faults();
            fs.add_fault(FaultRule {
                op: FaultOp::Sync,
                path_contains: Some("MANIFEST".into()),
                skip: synced + 1,
                times: Some(1),
                kind: FaultKind::PowerLoss,
            });
            let _ = synced;
            assert!(
                db.run_gc().is_err(),
                "{ctx}: the job is cut between its edits"
            );
            drop(db);
            fs.clear_faults();
            fs.crash(TornMode::None);
            return (fs, model);
        }
        GcPolicyKind::Blobdb => {
            // A ranged compaction relocates part of the old values, leaving their old copies.
            db.compact_range(None, Some(&matrix_key(matrix_keys() / 3)))
                .expect("relocating compaction");
            let s = db.stats();
            assert!(s.gc.relocated_values > 0, "{ctx}: values relocated");
        }
        GcPolicyKind::Scavenger => {
            collect(&db, &ctx);
            let s = db.stats();
            assert!(
                s.gc.bytes_written_by_class.len() > 1,
                "{ctx}: hot and cold runs: {:?}",
                s.gc.bytes_written_by_class
            );
        }
        GcPolicyKind::Dumpkv => {
            collect(&db, &ctx);
            // Compactions out of L0 folded histories; GC chose victims by lifetime or garbage.
            let own = db.stats().gc.policy_stats;
            let get = |n: &str| own.get(n).copied().unwrap_or(0);
            assert!(
                get("dumpkv_features_folded") > 0
                    && get("dumpkv_picks_ttl") + get("dumpkv_picks_forced") > 0,
                "{ctx}: {own:?}"
            );
        }
        GcPolicyKind::Diffkv => {
            collect(&db, &ctx);
            // Compactions merged vTree values; values of all three sizes were placed.
            let own = db.stats().gc.policy_stats;
            let get = |n: &str| own.get(n).copied().unwrap_or(0);
            assert!(
                get("diffkv_merges") > 0
                    && get("diffkv_placed_small") > 0
                    && get("diffkv_placed_medium") > 0
                    && get("diffkv_placed_large") > 0,
                "{ctx}: {own:?}"
            );
        }
        GcPolicyKind::Terarkdb | GcPolicyKind::Custom => collect(&db, &ctx),
    }
    assert_recount(&db, &ctx);
    db.close().expect("close");
    (fs, model)
}

/// A deep copy of a file system's files (after a close or a crash, all durable).
fn copy_fs(from: &FaultFs, seed: u64) -> FaultFs {
    let to = FaultFs::new(seed);
    for path in from.list_files() {
        let bytes = from.file_bytes(&path).expect("listed file");
        to.set_file_bytes(&path, bytes).expect("copy");
    }
    to
}

/// Reopens `from`'s state under `to`: a read-only open reads it all; then writes, flushes,
/// compactions and GC to quiescence, under a snapshot taken at the switch; every key, both walks
/// and the snapshot agree with the model, the recount and `gleaner check` are clean; then the
/// same under `from` again.
fn switch(state: &FaultFs, model: &Map, from: GcPolicyKind, to: GcPolicyKind, seed: u64) {
    let ctx = format!("{} -> {} (seed {seed})", from.name(), to.name());
    let fs = copy_fs(state, seed);
    let path = Path::new("/matrix");
    let mut model = model.clone();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5a5a);
    let partitioned =
        |p: GcPolicyKind| matrix_options(&fs, p, seed).partitioning().is_partitioned();
    if partitioned(from) && !partitioned(to) {
        // Partitioning off: refused while the hot partition holds tables, naming the option;
        // exact once every key is moved back to the cold partition.
        let db = Db::open(path, matrix_options(&fs, from, seed))
            .unwrap_or_else(|e| panic!("{ctx}: open to drain: {e}"));
        let hot = db.stats().partitions.hot_tables;
        db.close().expect("close");
        drop(db);
        if hot > 0 {
            let e = Db::open(path, matrix_options(&fs, to, seed))
                .expect_err("hot tables refuse an unpartitioned open")
                .to_string();
            assert!(e.contains("`partitioning`"), "{ctx}: {e}");
        }
        // A detector that finds nothing hot, so it keeps the drained routing.
        let db = Db::open(
            path,
            matrix_options(&fs, from, seed).with_dpkv_hot_density(1e6),
        )
        .unwrap_or_else(|e| panic!("{ctx}: open to drain: {e}"));
        db.move_hot_prefixes(&[])
            .unwrap_or_else(|e| panic!("{ctx}: drain: {e}"));
        assert_eq!(db.stats().partitions.hot_tables, 0, "{ctx}: drained");
        check_model(&db, &model, &format!("{ctx}: drained"));
        db.close().expect("close");
    }
    {
        let ro = Db::open_read_only(path, matrix_options(&fs, to, seed))
            .unwrap_or_else(|e| panic!("{ctx}: read-only open: {e}"));
        check_model(&ro, &model, &format!("{ctx}: read-only"));
    }
    let opts_to = matrix_options(&fs, to, seed);
    let db = Db::open(path, opts_to.clone()).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    check_model(&db, &model, &format!("{ctx}: at the switch"));
    let snapshot = db.snapshot();
    let at_switch = model.clone();
    for round in 0..matrix_rounds() {
        write_round(&db, &mut model, &mut rng, &format!("{}{round}", to.name()));
        collect(&db, &ctx);
    }
    check_model(&db, &model, &format!("{ctx}: after collecting"));
    check_walks(
        &db,
        Some(&snapshot),
        &at_switch,
        &format!("{ctx}: snapshot"),
    );
    assert_recount(&db, &format!("{ctx}: with the snapshot"));
    drop(snapshot);
    collect(&db, &ctx);
    check_model(&db, &model, &format!("{ctx}: snapshot released"));
    sim::check_recovered_state(db, path, &opts_to, &ctx);

    let back = format!("{ctx} -> {}", from.name());
    if partitioned(to) && !partitioned(from) {
        let db = Db::open(
            path,
            matrix_options(&fs, to, seed).with_dpkv_hot_density(1e6),
        )
        .unwrap_or_else(|e| panic!("{back}: open to drain: {e}"));
        db.move_hot_prefixes(&[])
            .unwrap_or_else(|e| panic!("{back}: drain: {e}"));
        db.close().expect("close");
    }
    let opts_from = matrix_options(&fs, from, seed);
    let db = Db::open(path, opts_from.clone()).unwrap_or_else(|e| panic!("{back}: open: {e}"));
    check_model(&db, &model, &format!("{back}: reopened"));
    write_round(&db, &mut model, &mut rng, "back");
    collect(&db, &back);
    check_model(&db, &model, &format!("{back}: after collecting"));
    sim::check_recovered_state(db, path, &opts_from, &back);
}

/// Every ordered pair of registered policies (`GcPolicyKind::ALL` and the custom scheme of
/// `common/custom.rs`): a database built under the first, with its own artifacts, reopened
/// under the second stays exact, under the compaction styles the seed deals
/// ([`matrix_options`]). `GLEANER_SWITCH_KEYS`
/// and `GLEANER_SWITCH_ROUNDS` make it larger, `GLEANER_SEED` picks the seed,
/// `GLEANER_SWITCH_SEEDS` runs that many seeds, `GLEANER_SWITCH_PAIR=from,to` one pair.
#[test]
fn every_policy_switch_keeps_every_key_and_every_byte_of_garbage() {
    let first = sim::seed();
    let seeds = sim::env_u64("GLEANER_SWITCH_SEEDS")
        .unwrap_or(1)
        .clamp(1, 10_000);
    // `GLEANER_SWITCH_PAIR=from,to` runs one pair.
    let only: Option<(String, String)> = std::env::var("GLEANER_SWITCH_PAIR").ok().map(|p| {
        let (f, t) = p.split_once(',').expect("GLEANER_SWITCH_PAIR=from,to");
        (f.to_string(), t.to_string())
    });
    for n in 0..seeds {
        let seed = first.wrapping_add(n);
        eprintln!("policy switch matrix, seed {seed} (replay with GLEANER_SEED={seed})");
        for from in MATRIX_POLICIES {
            if only.as_ref().is_some_and(|(f, _)| f != from.name()) {
                continue;
            }
            let (state, model) = build_state(from, seed);
            for to in MATRIX_POLICIES {
                if to != from && only.as_ref().is_none_or(|(_, t)| t == to.name()) {
                    switch(&state, &model, from, to, seed);
                }
            }
        }
    }
}

/// A switch drops the old policy's own options saved in OPTIONS: they are not applied to the
/// new policy's open, and a later switch back starts from their defaults; an open under the
/// same policy keeps them, and options the caller sets always win.
#[test]
fn a_switch_drops_the_old_policys_own_options() {
    let fs = FaultFs::new(25);
    let path = Path::new("/switch-options");
    let reopen = |opts: Options| {
        let db = Db::open(path, opts).expect("open");
        let o = db.options().clone();
        db.close().expect("close");
        o
    };
    let defaults = Options::default();
    let o = reopen(
        base(&fs)
            .with_gc_policy(GcPolicyKind::Blobdb)
            .with_blobdb_age_cutoff(1.0)
            .with_blobdb_force_threshold(0.3),
    );
    assert_eq!(o.blobdb_age_cutoff(), 1.0);
    // The same policy again: its saved options apply.
    let o = reopen(base(&fs));
    assert_eq!(o.gc_policy(), GcPolicyKind::Blobdb, "the saved policy");
    assert_eq!(
        (o.blobdb_age_cutoff(), o.blobdb_force_threshold()),
        (1.0, 0.3)
    );
    // Switched to titan: blobdb's options are dropped, titan's set ones apply.
    let o = reopen(
        base(&fs)
            .with_gc_policy(GcPolicyKind::Titan)
            .with_titan_discardable_ratio(0.3),
    );
    assert_eq!(o.blobdb_age_cutoff(), defaults.blobdb_age_cutoff());
    assert_eq!(
        o.blobdb_force_threshold(),
        defaults.blobdb_force_threshold()
    );
    assert_eq!(o.titan_discardable_ratio(), 0.3);
    // Back to blobdb without options: its defaults, not the values saved before the switch;
    // titan's ratio is dropped in turn.
    let o = reopen(base(&fs).with_gc_policy(GcPolicyKind::Blobdb));
    assert_eq!(o.blobdb_age_cutoff(), defaults.blobdb_age_cutoff());
    assert_eq!(
        o.titan_discardable_ratio(),
        defaults.titan_discardable_ratio()
    );
    // An option only another policy reads, set explicitly, is refused by name.
    let err = Db::open(
        path,
        base(&fs)
            .with_gc_policy(GcPolicyKind::Novkv)
            .with_blobdb_age_cutoff(0.75),
    )
    .expect_err("blobdb's option under novkv");
    assert!(err.to_string().contains("`blobdb_age_cutoff`"), "{err}");
    // Shared options survive every switch.
    let o = reopen(
        base(&fs)
            .with_gc_policy(GcPolicyKind::Scavenger)
            .with_gc_lazy_read(gleaner::Switch::Off),
    );
    assert_eq!(o.value_table_size(), 64 << 10);
    assert_eq!(o.min_separated_value_size(), 100);
    // The TerarkDB family's switches go with a switch away from it, and stay within it.
    let o = reopen(base(&fs).with_gc_policy(GcPolicyKind::Terarkdb));
    assert_eq!(o.gc_lazy_read(), gleaner::Switch::Off, "same family");
    let o = reopen(base(&fs).with_gc_policy(GcPolicyKind::Titan));
    assert_eq!(o.gc_lazy_read(), gleaner::Switch::Auto);
    let o = reopen(base(&fs).with_gc_policy(GcPolicyKind::Scavenger));
    assert_eq!(o.gc_lazy_read(), gleaner::Switch::Auto, "not brought back");
}

/// `titan`, cut by power loss while it writes back, → `terarkdb`: the job's victims and outputs
/// are both live, with two copies of every moved record. Where the write-back survived, the
/// output's copy is live and the victim's is named only by the shadowed original version; where
/// it was lost, the other way round. A job of both would keep one copy of each in its outputs,
/// and the victim's inheritance record would lead the shadowed original version to it too: two
/// references to one record, its garbage counted twice once both go. Twins split the job: each
/// victim alone, so the garbage copy's version resolves to nothing, as any reclaimed shadowed
/// version does.
#[test]
fn an_interrupted_titan_job_is_collected_exactly_by_another_policy() {
    let fs = FaultFs::new(26);
    let path = Path::new("/switch-titan-crash");
    let titan = base(&fs)
        .with_gc_policy(GcPolicyKind::Titan)
        .with_titan_discardable_ratio(0.2);
    let db = Db::open(path, titan).expect("open");
    let latest = build(&db);
    db.flush().expect("flush");
    // Power is lost at the WAL sync that ends the write-backs: the job's outputs are installed
    // (marked), and a prefix of its write-backs survives.
    fs.add_fault(FaultRule::counter(FaultOp::Sync, Some(".log".into())));
    let synced = *fs.fault_rule_matches().last().expect("counter");
    fs.clear_faults();
    fs.add_fault(FaultRule {
        op: FaultOp::Sync,
        path_contains: Some(".log".into()),
        skip: synced,
        times: Some(1),
        kind: FaultKind::PowerLoss,
    });
    assert!(db.run_gc().is_err(), "the job is cut while it writes back");
    drop(db);
    fs.clear_faults();
    fs.crash(TornMode::KeepRandomPrefix);

    // Every table with garbage in one job, were it not split.
    let terarkdb = base(&fs)
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_gc_garbage_ratio(0.0);
    let db = Db::open(path, terarkdb.clone()).expect("reopen as terarkdb");
    assert_reads(&db, &latest, "after the crash");
    assert_recount(&db, "after the crash");
    let tables = db.stats().values.per_table;
    assert!(
        tables.iter().filter(|t| t.garbage_records > 0).count() >= 2,
        "victim and output both hold garbage: {tables:?}"
    );
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    assert_reads(&db, &latest, "after GC");
    assert_recount(&db, "after GC");
    assert!(db.stats().gc.twin_restarts > 0, "victims and outputs met");
    // Every key overwritten: each record's garbage is counted once.
    for i in 0..KEYS {
        db.put(key(i), value(i, 9)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    assert_recount(&db, "after the overwrites");
    db.run_gc().expect("gc");
    assert_eq!(db.stats().values.garbage_records, 0);
    sim::check_recovered_state(db, path, &terarkdb, "terarkdb");
}

/// Options only other policies read, set explicitly, are refused by name (with the policies that
/// read them and the open's own policy's options), and nothing is written; set to their default,
/// or only remembered in OPTIONS, they are no reason to refuse.
#[test]
fn options_the_policy_does_not_read_are_refused() {
    use gleaner::io::FileSystem;
    let fs = FaultFs::new(28);
    let path = Path::new("/policy-options");
    let err = Db::open(
        path,
        base(&fs)
            .with_gc_policy(GcPolicyKind::Titan)
            .with_gc_lazy_read(gleaner::Switch::On),
    )
    .expect_err("lazy read under titan");
    let msg = err.to_string();
    assert!(matches!(err, gleaner::Error::InvalidArgument(_)), "{msg}");
    for part in [
        "`gc_lazy_read`",
        "`terarkdb` or `scavenger`",
        "`titan`",
        "`titan_discardable_ratio`",
    ] {
        assert!(msg.contains(part), "{part} in: {msg}");
    }
    assert!(
        fs.list_files().is_empty(),
        "nothing written: {:?}",
        fs.list_files()
    );
    assert!(fs.list_dir(path).is_err(), "not even the directory");
    // Its default asks for nothing titan lacks.
    let db = Db::open(
        path,
        base(&fs)
            .with_gc_policy(GcPolicyKind::Titan)
            .with_gc_lazy_read(gleaner::Switch::Auto),
    )
    .expect("open");
    db.close().expect("close");
    drop(db);
    // Saved under scavenger, remembered in OPTIONS: a later open under titan is not refused.
    let scavenger = base(&fs)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_hotness_aware_writes(gleaner::Switch::Off);
    Db::open(path, scavenger)
        .expect("scavenger")
        .close()
        .expect("close");
    Db::open(path, base(&fs).with_gc_policy(GcPolicyKind::Titan))
        .expect("titan after scavenger")
        .close()
        .expect("close");
    // The family's own options under the family: accepted.
    Db::open(
        path,
        base(&fs)
            .with_gc_policy(GcPolicyKind::Terarkdb)
            .with_gc_lazy_read(gleaner::Switch::On),
    )
    .expect("terarkdb with lazy read")
    .close()
    .expect("close");
}

/// `terarkdb` → `titan`: titan collects a table an inheritance record names as its child, and
/// retires it; while a snapshot reads below its obsolete sequence number it stays retired, so a
/// database closed then holds an inheritance record leading to a retired table. Reads resolve
/// through it, and `gleaner check` must accept it (it once reported the child as "neither live
/// nor collected"; found by the crash simulation reopening under `titan`).
#[test]
fn an_inheritance_child_retired_by_titan_is_no_damage() {
    let fs = FaultFs::new(29);
    let path = Path::new("/switch-terarkdb-titan-retired");
    // Small key tables in level 1 over one value table, so that a ranged compaction rewrites
    // only some of the handles.
    let shape = |o: Options| {
        o.with_key_table_size(1 << 10)
            .with_compression(gleaner::Compression::None)
            .with_value_table_size(1 << 20)
    };
    let terarkdb = shape(base(&fs))
        .with_gc_policy(GcPolicyKind::Terarkdb)
        .with_gc_garbage_ratio(0.1)
        .with_l0_compaction_trigger(1);
    let db = Db::open(path, terarkdb).expect("open");
    let mut latest = vec![0u32; KEYS as usize];
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in (0..KEYS).step_by(3) {
        db.put(key(i), value(i, 1)).expect("put");
        latest[i as usize] = 1;
    }
    db.flush().expect("flush");
    // The one value table is collected: every handle now names it, through inheritance.
    assert!(db.run_gc().expect("gc").jobs > 0);
    assert!(db.stats().values.inheritance_records > 0);
    db.close().expect("close");
    drop(db);

    let titan = shape(base(&fs))
        .with_gc_policy(GcPolicyKind::Titan)
        .with_titan_discardable_ratio(0.1);
    let db = Db::open(path, titan.clone()).expect("reopen as titan");
    // Keys of the first half overwritten and compacted: their old records are garbage of the
    // inheritance child, while the second half's handles still name the collected table.
    for i in (1..KEYS / 2).step_by(3) {
        db.put(key(i), value(i, 2)).expect("put");
        latest[i as usize] = 2;
    }
    db.compact_range(None, Some(key(KEYS / 2).as_bytes()))
        .expect("compact");
    // A snapshot from before the job: the victims stay retired, readable by it.
    let snapshot = db.snapshot();
    let run = db.run_gc().expect("gc");
    assert!(run.jobs > 0, "{run:?}");
    let s = db.stats();
    assert!(
        s.values.retired_tables > 0,
        "the child retired: {:?}",
        s.values
    );
    assert!(
        s.values.inheritance_records > 0,
        "the record leading to it kept: {:?}",
        s.values
    );
    assert_reads(&db, &latest, "with the child retired");
    assert_recount(&db, "with the child retired");
    // Closed while the snapshot keeps the child retired.
    db.close().expect("close");
    drop(snapshot);
    drop(db);
    let report = gleaner::tools::check::check_db(path, &titan).expect("check");
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    // The next open releases the child; everything still reads.
    let db = Db::open(path, titan.clone()).expect("reopen");
    assert_eq!(db.stats().values.retired_tables, 0);
    assert_reads(&db, &latest, "after the release");
    sim::check_recovered_state(db, path, &titan, "titan after the release");
}

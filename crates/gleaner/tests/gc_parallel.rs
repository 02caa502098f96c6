//! GC jobs with several lookups and reads in flight (`gc_io_depth`) produce exactly what one at
//! a time produces: the same verdicts, the same output tables byte for byte, the same database.
//! Run with the engine's threads (the depth is 1 under inline work), GC on the test's thread.

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gleaner::io::FaultFs;
use gleaner::{Db, GcRunStats, Options};

const KEYS: u32 = 600;

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i} {round} ").into_bytes();
    v.resize(300 + (i as usize * 37) % 900, b'a' + (round % 26) as u8);
    v
}

/// The value tables' bytes by name.
type Tables = Vec<(PathBuf, Vec<u8>)>;

/// Writes three rounds (the later ones overwrite a part of the keys), compacts so the garbage is
/// counted, and runs GC on this thread. Returns the GC figures (the run's, and the policy's own
/// in `stats()`), the value tables' bytes by name, and every key's value.
fn run(tune: &common::Tune, depth: u32) -> (GcRunStats, Own, Tables, Vec<Vec<u8>>) {
    let fs = FaultFs::new(3);
    let opts = tune(
        Options::default()
            .with_file_system(Arc::new(fs.clone()))
            .with_memtable_size(1 << 20)
            .with_min_separated_value_size(100)
            .with_value_table_size(64 << 10)
            // No background GC, and no compaction but the test's own: only flushes run on the
            // engine's threads, each of a memtable the test filled.
            .with_gc_threads(0)
            .with_l0_compaction_trigger(100)
            .with_stale_handle_share(0.0)
            .with_l0_slowdown_trigger(200)
            .with_l0_stop_trigger(300)
            .with_gc_garbage_ratio(0.05)
            .with_gc_io_depth(depth),
    );
    let db = Db::open(Path::new("/db"), opts).expect("open");
    for round in 0..3 {
        for i in (0..KEYS).filter(|i| round == 0 || i % (round + 1) == 0) {
            db.put(format!("k{i:05}"), value(i, round)).expect("put");
        }
        db.flush().expect("flush");
    }
    db.compact_range(None, None).expect("compact");
    let gc = db.run_gc().expect("gc");
    // Timings (DumpKV's training and inference) differ from run to run; counts may not.
    let mut own = db.stats().gc.policy_stats;
    own.retain(|name, _| !name.ends_with("_micros") && !name.ends_with("_nanos"));
    let values = (0..KEYS)
        .map(|i| db.get(format!("k{i:05}")).expect("get").expect("present"))
        .collect();
    // Started by the job because it read more than one at a time, sized for one job (no GC
    // workers here) beside the job's own thread; stopped at close.
    let io_threads = db.stats().gc.io_threads;
    assert_eq!(io_threads, depth as usize - 1, "depth {depth}");
    db.close().expect("close");
    assert_eq!(db.stats().gc.io_threads, 0, "depth {depth}: after close");
    let mut tables: Tables = fs
        .list_files()
        .into_iter()
        // Value tables, and the drop files policy `novkv` attaches to them.
        .filter(|p| p.extension().is_some_and(|e| e == "vst" || e == "vdk"))
        .map(|p| {
            let bytes = fs.file_bytes(&p).expect("listed file");
            (p, bytes)
        })
        .collect();
    tables.sort();
    (gc, own, tables, values)
}

/// A policy's own figures (`stats().gc.policy_stats`).
type Own = std::collections::BTreeMap<String, u64>;

/// What a job did, without its timings.
fn figures(gc: &GcRunStats) -> [u64; 7] {
    let t = &gc.totals;
    [
        gc.jobs,
        t.victims,
        t.records_read,
        t.records_dropped,
        t.records_written,
        t.bytes_read,
        t.bytes_written,
    ]
}

#[test]
fn gc_with_reads_in_flight_writes_what_one_at_a_time_writes() {
    for (variant, tune) in common::gc_variants()
        .into_iter()
        .filter(|(v, _)| common::runs_gc_jobs(v))
    {
        let (serial, serial_own, serial_tables, serial_values) = run(&tune, 1);
        assert!(
            serial.jobs > 0 && serial.totals.records_dropped > 0,
            "{variant}: GC collected garbage: {serial:?}"
        );
        if variant == "novkv" {
            // Its verdicts come from drop keys alone, at every depth.
            assert_eq!(
                serial_own.get("drop_key_answers").copied(),
                Some(serial.totals.records_dropped),
                "novkv: every dropped record was known by its drop key: {serial:?}"
            );
        }
        for depth in [2, 8] {
            let (parallel, own, tables, values) = run(&tune, depth);
            assert_eq!(
                figures(&parallel),
                figures(&serial),
                "{variant} at depth {depth}: GC figures"
            );
            assert_eq!(
                own, serial_own,
                "{variant} at depth {depth}: the policy's figures"
            );
            assert_eq!(values, serial_values, "{variant} at depth {depth}: values");
            assert_eq!(
                tables.iter().map(|(p, _)| p).collect::<Vec<_>>(),
                serial_tables.iter().map(|(p, _)| p).collect::<Vec<_>>(),
                "{variant} at depth {depth}: value tables"
            );
            assert!(
                tables == serial_tables,
                "{variant} at depth {depth}: value tables' bytes differ"
            );
        }
    }
}

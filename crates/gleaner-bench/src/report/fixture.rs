//! A fixed `Results` for the report's tests: Gleaner (with GC figures), RocksDB (the reference
//! peer) and the null engine (which fails in `read`), through load, update and read.

use std::collections::BTreeMap;

use crate::results::{
    DeleteRangeFigures, EngineResult, GcFigures, Latency, LevelShape, Machine, PhaseResult,
    Results, Sample, Space, TreeShape, WorkloadInfo,
};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// The fixture. Numbers are chosen so the expected strings in the tests are easy to derive:
/// Gleaner's update phase runs at 15,000 ops/s against RocksDB's 8,196.7, i.e. `1.83×`.
pub fn results() -> Results {
    Results {
        schema_version: 1,
        command:
            "gleaner-bench run --engines gleaner:terarkdb,rocksdb,null --phases load,update,read"
                .to_string(),
        machine: Machine {
            hostname: "bench-host".to_string(),
            cpus: 2,
            memory_bytes: 8 * GIB,
            kernel: "6.1.0-test".to_string(),
            started_unix: 1_700_000_000,
        },
        workload: WorkloadInfo {
            key_size: 24,
            value_size: "mixed8k".to_string(),
            dist: "zipf:0.99".to_string(),
            keys: 1_000_000,
            load_bytes: 8 * GIB,
            update_bytes: 24 * GIB,
            phases: vec!["load".into(), "update".into(), "read".into()],
            threads: 2,
            cache_bytes: 64 * MIB,
            memtable_bytes: 64 * MIB,
            table_bytes: 64 * MIB,
            value_file_bytes: 256 * MIB,
            shape: "absolute".to_string(),
            engine_sizes: [
                (
                    "gleaner",
                    vec![("memtable_size", 64 * MIB), ("level_base_size", 256 * MIB)],
                ),
                ("rocksdb", vec![("max_bytes_for_level_base", 256 * MIB)]),
            ]
            .into_iter()
            .map(|(family, sizes)| {
                let sizes = sizes.into_iter().map(|(n, b)| (n.to_string(), b));
                (family.to_string(), sizes.collect())
            })
            .collect(),
            direct_io: true,
            compression: "lz4".to_string(),
            space_budget: Some(1.5),
            compressible: 0.0,
            seed: 42,
            ttl_ms: None,
            mixgraph: None,
        },
        engines: vec![gleaner(), rocksdb(), null()],
    }
}

fn gleaner() -> EngineResult {
    let mut load = phase("load", 1_000_000, 80.0, 12_500.0, 1.5, 1.125);
    load.engine_stall_seconds = Some(1.5);
    load.engine_io = Some(serde_json::json!({ "wal": { "write_bytes": 123 } }));
    let mut update = phase("update", 3_000_000, 200.0, 15_000.0, 2.2, 1.4);
    update.stall_seconds = 3.5;
    update.budget_violations = 1;
    update.cpu_seconds = BTreeMap::from([
        ("clients".to_string(), 120.0),
        ("gc".to_string(), 80.5),
        ("flush".to_string(), 20.0),
        ("compaction".to_string(), 80.5),
    ]);
    update.gc = Some(GcFigures {
        jobs: 42,
        value_bytes_read: 5 * GIB,
        index_bytes_read: 20 * MIB,
        lookup_bytes_read: 100 * MIB,
        drop_cache_answers: 1_000,
        bytes_written: 3 * GIB,
        bytes_written_by_class: [("hot".to_string(), GIB), ("cold".to_string(), 2 * GIB)]
            .into_iter()
            .collect(),
        relocated_bytes: 0,
        written_back: 0,
        read_seconds: 12.5,
        lookup_seconds: 3.25,
        write_seconds: 8.0,
        paced_seconds: 0.0,
        job_seconds: 30.0,
        compaction_wait_seconds: 1.5,
        policy: Default::default(),
    });
    let read = phase("read", 2_000_000, 50.0, 40_000.0, 0.0, 1.4);
    // Gleaner's tree: L0 and L1 after the load; L1 and L2 after the updates (L0 empty).
    load.tree = Some(tree(&[(2, 128 * MIB), (4, 200 * MIB)], Some(30)));
    update.tree = Some(tree(&[(0, 0), (3, 190 * MIB), (12, 2 * GIB)], Some(1_234)));
    EngineResult {
        name: "gleaner:terarkdb".to_string(),
        kind: "gleaner".to_string(),
        phases: vec![load, update, read],
        timeseries: samples(&[("load", 12_000.0), ("update", 15_500.0), ("read", 40_100.0)]),
        error: None,
    }
}

fn rocksdb() -> EngineResult {
    let mut update = phase("update", 3_000_000, 366.0, 8_196.7, 11.0, 1.1);
    // RocksDB fills its levels from the last (L6) up, and has no value files.
    let mut levels = vec![(0, 0); 7];
    levels[0] = (1, 64 * MIB);
    levels[5] = (9, 800 * MIB);
    levels[6] = (130, 8 * GIB);
    update.tree = Some(tree(&levels, None));
    EngineResult {
        name: "rocksdb".to_string(),
        kind: "rocksdb".to_string(),
        phases: vec![
            phase("load", 1_000_000, 200.0, 5_000.0, 3.0, 1.05),
            update,
            phase("read", 2_000_000, 40.0, 50_000.0, 0.0, 1.1),
        ],
        timeseries: samples(&[("load", 5_000.0), ("update", 8_000.0), ("read", 50_000.0)]),
        error: None,
    }
}

fn null() -> EngineResult {
    EngineResult {
        name: "null".to_string(),
        kind: "null".to_string(),
        phases: vec![
            phase("load", 1_000_000, 0.81, 1_234_567.8, 0.0, 0.0),
            phase("update", 3_000_000, 2.4, 1_250_000.0, 0.0, 0.0),
        ],
        timeseries: samples(&[("load", 1_234_567.8), ("update", 1_250_000.0)]),
        error: Some("read: injected failure\nwhile opening the null engine".to_string()),
    }
}

fn phase(
    name: &str,
    ops: u64,
    seconds: f64,
    ops_per_sec: f64,
    write_amp: f64,
    amp: f64,
) -> PhaseResult {
    let user = if name == "read" { 0 } else { 8 * GIB };
    PhaseResult {
        name: name.to_string(),
        started_at: None,
        ops,
        seconds,
        ops_per_sec,
        mb_per_sec: ops_per_sec * 8_216.0 / 1e6,
        latency_us: Latency {
            p50: 45.25,
            p99: 310.0,
            p999: 1_250.5,
            max: 20_000.0,
            mean: 60.0,
        },
        device_bytes_read: MIB,
        device_bytes_written: (user as f64 * write_amp) as u64,
        user_bytes_written: user,
        write_amp,
        space: Space {
            live_bytes: 8 * GIB,
            disk_bytes_end: (8.0 * GIB as f64 * amp) as u64,
            disk_bytes_peak: (8.0 * GIB as f64 * amp * 1.1) as u64,
            space_amp_end: amp,
            space_amp_peak: amp * 1.1,
        },
        stall_seconds: 0.0,
        budget_violations: 0,
        engine_stall_seconds: None,
        gc: None,
        engine_io: None,
        tree: None,
        cpu_seconds: BTreeMap::new(),
        delete_range: None,
        by_op: Default::default(),
        skipped: None,
    }
}

/// The fixture with a `delete-range` phase after `read`: Gleaner at twice RocksDB's ops/s (the
/// same range-delete figures on both), and a fourth engine, `fjall`, that loaded and then
/// skipped the phase (no range delete).
pub fn with_delete_range() -> Results {
    let mut r = results();
    r.workload.phases.push("delete-range".into());
    let ranges = |ops_per_sec: f64| {
        let mut p = phase(
            "delete-range",
            21_000,
            21_000.0 / ops_per_sec,
            ops_per_sec,
            1.0,
            1.2,
        );
        p.delete_range = Some(DeleteRangeFigures {
            ops: 1_000,
            keys_per_range: 100,
            keys_removed: 61_234,
            latency_us: Latency {
                p50: 120.0,
                p99: 900.0,
                p999: 2_000.0,
                max: 5_000.0,
                mean: 150.0,
            },
        });
        p
    };
    r.engines[0].phases.push(ranges(7_000.0));
    r.engines[1].phases.push(ranges(3_500.0));
    r.engines.push(EngineResult {
        name: "fjall".to_string(),
        kind: "fjall".to_string(),
        phases: vec![
            phase("load", 1_000_000, 100.0, 10_000.0, 2.0, 1.1),
            PhaseResult {
                name: "delete-range".to_string(),
                skipped: Some(crate::runner::SKIPPED_UNSUPPORTED.to_string()),
                ..PhaseResult::default()
            },
        ],
        timeseries: samples(&[("load", 10_000.0)]),
        error: None,
    });
    r
}

/// A tree of `(files, bytes)` per level, L0 first.
fn tree(levels: &[(u64, u64)], value_files: Option<u64>) -> TreeShape {
    TreeShape::new(
        levels
            .iter()
            .map(|&(files, bytes)| LevelShape { files, bytes })
            .collect(),
        value_files,
    )
}

/// Two samples per phase, one second apart, continuing the clock across phases.
fn samples(phases: &[(&str, f64)]) -> Vec<Sample> {
    let mut out = Vec::new();
    for (i, (phase, ops)) in phases.iter().enumerate() {
        for j in 0..2 {
            let t = (2 * i + j) as f64 + 1.0;
            out.push(Sample {
                t,
                phase: phase.to_string(),
                ops_per_sec: *ops,
                disk_bytes: GIB * (i as u64 + 8) + j as u64 * 100 * MIB,
                device_read_mb_s: 10.0 * i as f64,
                device_write_mb_s: 100.0 + 10.0 * j as f64,
            });
        }
    }
    out
}

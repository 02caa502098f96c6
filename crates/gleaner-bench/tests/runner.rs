//! The runner end to end: every phase on the `null` engine and on Gleaner, range deletes that
//! really remove keys (or are skipped where an engine has none), and the space budget against
//! fake engines that overrun it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gleaner_bench::engine::{CommonConfig, Engine, EngineResult, EngineSpec, Found};
use gleaner_bench::runner::{self, RunConfig};
use gleaner_bench::workload::{PhaseSpec, YcsbWorkload};
use parking_lot::Mutex;

fn config(dir: &Path, engines: &[&str], phases: Vec<PhaseSpec>, keys: u64) -> RunConfig {
    RunConfig {
        engines: engines
            .iter()
            .map(|e| e.parse().expect("engine spec"))
            .collect(),
        key_size: 24,
        value_size: "mixed8k".parse().expect("value size"),
        dist: "zipf:0.99".parse().expect("dist"),
        keys,
        phases,
        update_ops: keys * 2,
        read_ops: keys,
        scan_ops: 20,
        ycsb_ops: keys,
        mixgraph: Default::default(),
        mixgraph_ops: keys,
        delete_range_ops: 10,
        delete_range_keys: 5,
        ttl_ms: None,
        threads: 2,
        common: CommonConfig {
            cache_bytes: 1 << 20,
            direct_io: false,
            memtable_bytes: 256 << 10,
            table_bytes: 1 << 20,
            value_file_bytes: 2 << 20,
            level_base_bytes: None,
            gc_max_input_bytes: None,
            background_threads: 2,
            compression: Default::default(),
        },
        shape: gleaner_bench::shape::Shape::Absolute,
        space_budget: None,
        compressible: 0.0,
        seed: 7,
        phase_time_limit: Some(Duration::from_secs(120)),
        hang_timeout: None,
        data_dir: dir.to_path_buf(),
        keep_data: false,
        progress: false,
        budget_patience: runner::budget::VIOLATION_AFTER,
        command: "test".into(),
    }
}

fn all_phases() -> Vec<PhaseSpec> {
    let mut p = vec![
        PhaseSpec::Load,
        PhaseSpec::Update,
        PhaseSpec::Read,
        PhaseSpec::Scan,
        PhaseSpec::ReadWhileWriting,
        PhaseSpec::DeleteRange,
    ];
    p.extend(YcsbWorkload::ALL.iter().map(|w| PhaseSpec::Ycsb(*w)));
    p.push(PhaseSpec::Mixgraph);
    p
}

#[test]
fn every_phase_runs_on_null_and_gleaner_and_reads_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(
        dir.path(),
        &["null", "gleaner:terarkdb,gc_garbage_ratio=0.2"],
        all_phases(),
        400,
    );
    let results = runner::run(&cfg).expect("run");
    assert_eq!(results.engines.len(), 2);
    assert_eq!(results.workload.keys, 400);
    for e in &results.engines {
        assert_eq!(e.error, None, "{}", e.name);
        let names: Vec<&str> = e.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "load",
                "update",
                "read",
                "scan",
                "readwhilewriting",
                "delete-range",
                "ycsb-a",
                "ycsb-b",
                "ycsb-c",
                "ycsb-d",
                "ycsb-e",
                "ycsb-f",
                "mixgraph"
            ]
        );
        for p in &e.phases {
            assert_eq!(
                p.ops,
                cfg.phase_ops(p.name.parse().expect("phase")),
                "{} {}",
                e.name,
                p.name
            );
            assert!(
                p.seconds > 0.0 && p.ops_per_sec > 0.0,
                "{} {}",
                e.name,
                p.name
            );
            assert!(
                p.latency_us.max >= p.latency_us.p50,
                "{} {}",
                e.name,
                p.name
            );
        }
        let load = &e.phases[0];
        // Mixed-8K averages about 8.3 KiB: 400 keys write some 3.3 MB.
        assert!(
            load.user_bytes_written > 2_000_000,
            "{}",
            load.user_bytes_written
        );
        assert_eq!(
            load.space.live_bytes, load.user_bytes_written,
            "every key written once"
        );
        assert_eq!(e.phases[2].user_bytes_written, 0, "reads write nothing");
        // Ten range deletes of five keys, each with ten updates and ten reads; the live set
        // lost keys (null's too: the harness tracks what it wrote whatever the engine keeps).
        // The read-only YCSB C after it checks every read against that live set, so Gleaner
        // returning a deleted key would fail the run with "wrong data".
        let ranges = &e.phases[5];
        assert_eq!(ranges.skipped, None);
        assert_eq!(ranges.ops, 10 * 21, "{}", e.name);
        let figures = ranges.delete_range.expect("range-delete figures");
        assert_eq!((figures.ops, figures.keys_per_range), (10, 5), "{}", e.name);
        assert!(
            figures.keys_removed > 0 && figures.keys_removed <= 50,
            "{}: {figures:?}",
            e.name
        );
        assert!(figures.latency_us.max >= figures.latency_us.p50 && figures.latency_us.max > 0.0);
        assert!(
            e.phases
                .iter()
                .all(|p| (p.name == "delete-range") == p.delete_range.is_some())
        );
    }
    let gleaner = &results.engines[1];
    let update = &gleaner.phases[1];
    assert!(update.space.disk_bytes_end > 0 && update.space.space_amp_end > 0.0);
    assert!(update.space.disk_bytes_peak >= update.space.disk_bytes_end);
    assert!(update.gc.is_some(), "Gleaner reports GC figures");
    assert!(update.engine_stall_seconds.is_some());
    assert!(update.engine_io.is_some());
    assert!(gleaner.phases[2].mb_per_sec > 0.0, "reads return data");
    assert_eq!(results.engines[0].phases[1].gc, None, "null has no GC");
    // Every phase records Gleaner's tree after the phase; null has none.
    for p in &gleaner.phases {
        let tree = p.tree.as_ref().expect("Gleaner reports its tree");
        assert!(tree.levels_in_use >= 1, "{}: {tree:?}", p.name);
        assert!(tree.value_files.is_some_and(|n| n > 0), "{}", p.name);
    }
    assert!(results.engines[0].phases.iter().all(|p| p.tree.is_none()));
    // The workload records the shape and the sizes of the engine families that ran.
    assert_eq!(results.workload.shape, "absolute");
    let families: Vec<&String> = results.workload.engine_sizes.keys().collect();
    assert_eq!(families, ["gleaner"]);
    assert_eq!(
        results.workload.engine_sizes["gleaner"]["memtable_size"],
        256 << 10
    );
    // Engines' directories are removed after they ran.
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    // The mixgraph phase's parameters are recorded, by db_bench's names.
    let mixgraph = results.workload.mixgraph.as_deref().expect("recorded");
    assert!(mixgraph.contains(",keyrange_num=100,"), "{mixgraph}");
    assert!(gleaner.phases.last().expect("mixgraph").user_bytes_written > 0);
}

#[test]
fn a_mixgraph_without_puts_has_its_reads_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(
        dir.path(),
        &["gleaner:scavenger"],
        vec![PhaseSpec::Load, PhaseSpec::Mixgraph],
        300,
    );
    cfg.mixgraph = "dpkv-1.2,mix_put_ratio=0,mix_seek_ratio=0.2"
        .parse()
        .expect("spec");
    let results = runner::run(&cfg).expect("run");
    let e = &results.engines[0];
    assert_eq!(e.error, None);
    let m = &e.phases[1];
    assert_eq!((m.name.as_str(), m.ops), ("mixgraph", 300));
    assert_eq!(m.user_bytes_written, 0);
    assert!(m.mb_per_sec > 0.0, "reads and seeks return data");
    // Gets and seeks each have their latencies; together, every operation.
    let kinds: Vec<&str> = m.by_op.keys().map(String::as_str).collect();
    assert_eq!(kinds, ["get", "seek"]);
    assert_eq!(m.by_op.values().map(|o| o.ops).sum::<u64>(), m.ops);
    assert!(m.by_op.values().all(|o| o.latency_us.p50 > 0.0));
    // A phase of one kind has none.
    assert!(e.phases[0].by_op.is_empty());
    // The report shows them.
    let report = gleaner_bench::report::markdown(&results);
    assert!(report.contains("| seek latency p99 (µs) |"), "{report}");
}

#[test]
fn runs_are_reproducible() {
    let phases = vec![PhaseSpec::Load, PhaseSpec::Update, PhaseSpec::DeleteRange];
    let figures = |threads: usize| -> Vec<(u64, u64)> {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = config(dir.path(), &["null"], phases.clone(), 300);
        cfg.threads = threads;
        let r = runner::run(&cfg).expect("run");
        r.engines[0]
            .phases
            .iter()
            .map(|p| (p.user_bytes_written, p.space.live_bytes))
            .collect()
    };
    // Operations draw from streams tied to their positions, so the bytes written do not depend
    // on the threads; which of two concurrent writes to one key lands last does.
    let two = figures(2);
    let written = |f: &[(u64, u64)]| f.iter().map(|p| p.0).collect::<Vec<_>>();
    assert_eq!(written(&two), written(&figures(2)));
    assert_eq!(written(&two), written(&figures(1)));
    assert_eq!(
        figures(1),
        figures(1),
        "one thread: the same final values too"
    );
}

/// Writes every value twice into one file, slowly enough for the monitor to watch; reclaim
/// empties the file when `can_reclaim`.
struct Hog {
    file: Mutex<File>,
    can_reclaim: bool,
    reclaims: Arc<AtomicU64>,
}

impl Engine for Hog {
    fn kind(&self) -> &'static str {
        "hog"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        std::thread::sleep(Duration::from_millis(1));
        let mut f = self.file.lock();
        f.write_all(key)?;
        f.write_all(value)?;
        f.write_all(value)?;
        Ok(())
    }
    fn get(&self, _key: &[u8]) -> EngineResult<Option<Found>> {
        Ok(None)
    }
    fn keeps_data(&self) -> bool {
        false
    }
    fn scan(&self, _start: &[u8], _count: usize) -> EngineResult<(usize, u64)> {
        Ok((0, 0))
    }
    fn delete_range(&self, _start: &[u8], _end: &[u8]) -> EngineResult<()> {
        Ok(())
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(self.file.lock().flush()?)
    }
    fn reclaim(&self) -> EngineResult<()> {
        self.reclaims.fetch_add(1, Ordering::Relaxed);
        if self.can_reclaim {
            let f = self.file.lock();
            f.set_len(0)?;
        }
        Ok(())
    }
    fn close(&self) -> EngineResult<()> {
        Ok(())
    }
}

/// Runs a load against a hog; returns the load's figures, the budget in bytes and the reclaims.
fn run_hog(can_reclaim: bool) -> (gleaner_bench::results::PhaseResult, u64, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path(), &["null"], vec![PhaseSpec::Load], 2000);
    cfg.space_budget = Some(1.2);
    cfg.budget_patience = Duration::from_millis(300);
    let reclaims = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&reclaims);
    let open = move |_: &EngineSpec, d: &Path, _: &CommonConfig| -> EngineResult<Box<dyn Engine>> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("hog"))?;
        Ok(Box::new(Hog {
            file: Mutex::new(file),
            can_reclaim,
            reclaims: Arc::clone(&counter),
        }))
    };
    let results = runner::run_with(&cfg, open).expect("run");
    let e = &results.engines[0];
    assert_eq!(e.error, None);
    let budget = results.workload.budget_bytes().expect("a budget");
    (
        e.phases[0].clone(),
        budget,
        reclaims.load(Ordering::Relaxed),
    )
}

#[test]
fn an_engine_over_budget_is_paused_and_asked_to_reclaim() {
    let (load, budget, reclaims) = run_hog(true);
    assert_eq!(
        load.ops, 2000,
        "the phase completes once the engine made room"
    );
    assert!(load.stall_seconds > 0.0, "{load:?}");
    assert!(
        load.budget_violations >= 1 && reclaims >= 1,
        "{load:?} {reclaims}"
    );
    assert!(load.space.disk_bytes_peak > budget, "{load:?}");
}

#[test]
fn an_engine_that_cannot_reclaim_does_not_hang_the_run() {
    let (load, budget, reclaims) = run_hog(false);
    assert_eq!(load.ops, 2000);
    assert!(
        load.budget_violations >= runner::budget::MAX_PAUSED_VIOLATIONS,
        "{load:?}"
    );
    assert!(reclaims >= 1);
    assert!(load.space.disk_bytes_end > budget, "{load:?}");
}

/// An engine that loses every write: reads find nothing, or (when `panics`) panic.
struct Forgetful {
    panics: bool,
}

impl Engine for Forgetful {
    fn kind(&self) -> &'static str {
        "forgetful"
    }
    fn put(&self, _key: &[u8], _value: &[u8]) -> EngineResult<()> {
        Ok(())
    }
    fn get(&self, _key: &[u8]) -> EngineResult<Option<Found>> {
        assert!(!self.panics, "forgetful engine gives up");
        Ok(Some(Found { len: 7, digest: 7 }))
    }
    fn scan(&self, _start: &[u8], _count: usize) -> EngineResult<(usize, u64)> {
        Ok((0, 0))
    }
    fn delete_range(&self, _start: &[u8], _end: &[u8]) -> EngineResult<()> {
        Ok(())
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(())
    }
    fn reclaim(&self) -> EngineResult<()> {
        Ok(())
    }
    fn close(&self) -> EngineResult<()> {
        Ok(())
    }
}

#[test]
fn wrong_values_and_panics_fail_that_engine_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let phases = vec![PhaseSpec::Load, PhaseSpec::Read];
    // Engine specs only name the result; the opener decides what runs.
    let cfg = config(dir.path(), &["null", "null", "null"], phases, 200);
    let opened = AtomicU64::new(0);
    let open = |_: &EngineSpec, _: &Path, _: &CommonConfig| -> EngineResult<Box<dyn Engine>> {
        Ok(match opened.fetch_add(1, Ordering::Relaxed) {
            0 => Box::new(Forgetful { panics: false }),
            1 => Box::new(Forgetful { panics: true }),
            _ => Box::new(gleaner_bench::engine::NullEngine),
        })
    };
    let results = runner::run_with(&cfg, open).expect("run");
    let [wrong, panicked, fine] = &results.engines[..] else {
        panic!("three engines");
    };
    let wrong_error = wrong.error.as_deref().expect("wrong data is an error");
    assert!(
        wrong_error.contains("phase read: wrong data"),
        "{wrong_error}"
    );
    assert_eq!(
        wrong.phases.len(),
        2,
        "the phases before the failure are kept"
    );
    assert_eq!(wrong.phases[0].ops, 200);
    let panic_error = panicked.error.as_deref().expect("a panic is an error");
    assert!(
        panic_error.contains("panicked: forgetful engine gives up"),
        "{panic_error}"
    );
    assert_eq!(
        panicked.phases.len(),
        1,
        "load kept, read lost with the panic"
    );
    assert_eq!(fine.error, None, "the next engine still runs");
    assert_eq!(fine.phases.len(), 2);
}

#[test]
fn repeated_phases_get_their_own_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(
        dir.path(),
        &["null"],
        vec![PhaseSpec::Load, PhaseSpec::Update, PhaseSpec::Update],
        200,
    );
    cfg.update_ops = 2_000;
    let open = |_: &EngineSpec, d: &Path, _: &CommonConfig| -> EngineResult<Box<dyn Engine>> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("hog"))?;
        Ok(Box::new(Hog {
            file: Mutex::new(file),
            can_reclaim: false,
            reclaims: Arc::new(AtomicU64::new(0)),
        }))
    };
    let results = runner::run_with(&cfg, open).expect("run");
    let e = &results.engines[0];
    assert_eq!(e.error, None);
    // 2,000 updates at 1 ms each over 2 threads: about a second per update phase, so each
    // has at least one sample; none may count the other's operations.
    let mut seen = 0;
    for s in e.timeseries.iter().filter(|s| s.phase == "update") {
        assert!(s.ops_per_sec <= 2_000.0 * 1.5, "{s:?}");
        seen += 1;
    }
    assert!(seen >= 2, "{:?}", e.timeseries);
    let total: f64 = e.phases[1..].iter().map(|p| p.ops as f64).sum();
    assert_eq!(total, 4_000.0);
}

#[test]
fn range_deletes_leave_gleaner_holding_exactly_the_live_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(
        dir.path(),
        &["gleaner:terarkdb"],
        vec![PhaseSpec::Load, PhaseSpec::DeleteRange],
        600,
    );
    cfg.dist = "uniform".parse().expect("dist");
    cfg.delete_range_ops = 12;
    cfg.delete_range_keys = 20;
    cfg.keep_data = true;
    let results = runner::run(&cfg).expect("run");
    let e = &results.engines[0];
    assert_eq!(e.error, None);
    let (load, ranges) = (&e.phases[0], &e.phases[1]);
    let figures = ranges.delete_range.expect("range-delete figures");
    assert_eq!(figures.ops, 12);
    assert!(figures.keys_removed > 20, "{figures:?}");
    assert!(ranges.space.live_bytes < load.space.live_bytes);
    // Reopen what the run left: the database holds exactly the keys and bytes the harness
    // counts as live, so every key a range delete removed (and not written back) is gone.
    let spec: EngineSpec = cfg.engines[0].clone();
    let engine = gleaner_bench::engine::GleanerEngine::open(
        &spec,
        &dir.path().join("00-gleaner"),
        &cfg.common,
    )
    .expect("reopen");
    let (keys, bytes) = engine.scan(b"", usize::MAX).expect("scan");
    engine.close().expect("close");
    assert_eq!(bytes, ranges.space.live_bytes);
    assert!(keys < 600, "{keys} keys left of 600");
}

/// The null engine without a range delete, like fjall 2.
struct NoRangeDelete;

impl Engine for NoRangeDelete {
    fn kind(&self) -> &'static str {
        "no-range-delete"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        gleaner_bench::engine::NullEngine.put(key, value)
    }
    fn get(&self, _key: &[u8]) -> EngineResult<Option<Found>> {
        Ok(None)
    }
    fn keeps_data(&self) -> bool {
        false
    }
    fn scan(&self, _start: &[u8], _count: usize) -> EngineResult<(usize, u64)> {
        Ok((0, 0))
    }
    fn delete_range(&self, _start: &[u8], _end: &[u8]) -> EngineResult<()> {
        panic!("the runner must not call delete_range on an engine without one");
    }
    fn supports_delete_range(&self) -> bool {
        false
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(())
    }
    fn reclaim(&self) -> EngineResult<()> {
        Ok(())
    }
    fn close(&self) -> EngineResult<()> {
        Ok(())
    }
}

#[test]
fn an_engine_without_range_deletes_skips_the_phase_and_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let phases = vec![PhaseSpec::Load, PhaseSpec::DeleteRange, PhaseSpec::Read];
    let cfg = config(dir.path(), &["null"], phases, 200);
    let open = |_: &EngineSpec, _: &Path, _: &CommonConfig| -> EngineResult<Box<dyn Engine>> {
        Ok(Box::new(NoRangeDelete))
    };
    let results = runner::run_with(&cfg, open).expect("run");
    let e = &results.engines[0];
    assert_eq!(e.error, None, "skipping is not a failure");
    let names: Vec<&str> = e.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["load", "delete-range", "read"]);
    let skipped = &e.phases[1];
    assert_eq!(skipped.skipped.as_deref(), Some("not supported"));
    assert_eq!((skipped.ops, skipped.delete_range), (0, None));
    assert_eq!(e.phases[2].ops, 200, "the phases after it still run");
    assert!(
        e.phases
            .iter()
            .all(|p| p.name == "delete-range" || p.skipped.is_none())
    );
    let md = gleaner_bench::report::markdown(&results);
    assert!(md.contains("| status | skipped: not supported |"), "{md}");
}

#[test]
fn with_ttls_gleaner_runs_checked_and_an_engine_without_them_is_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let phases = vec![PhaseSpec::Load, PhaseSpec::Update, PhaseSpec::Read];
    let mut cfg = config(
        dir.path(),
        &["gleaner:scavenger", "null"],
        phases.clone(),
        300,
    );
    // Some keys expire during the run, some do not: reads see both, and a value other than
    // the last written would still fail the run.
    cfg.ttl_ms = Some((1, 60_000));
    let results = runner::run(&cfg).expect("run");
    assert_eq!(results.workload.ttl_ms, Some((1, 60_000)));
    for e in &results.engines {
        assert_eq!(e.error, None, "{}", e.name);
        assert!(e.phases.iter().all(|p| p.skipped.is_none()), "{}", e.name);
    }
    // An engine without a per-write TTL runs none of the phases.
    let open = |_: &EngineSpec, _: &Path, _: &CommonConfig| -> EngineResult<Box<dyn Engine>> {
        Ok(Box::new(NoRangeDelete))
    };
    let cfg = RunConfig {
        engines: vec!["null".parse().expect("spec")],
        ..cfg
    };
    let results = runner::run_with(&cfg, open).expect("run");
    let e = &results.engines[0];
    assert_eq!(e.error, None, "skipping is not a failure");
    assert_eq!(e.phases.len(), phases.len());
    assert!(
        e.phases.iter().all(|p| p.skipped.is_some()),
        "{:?}",
        e.phases
    );
}

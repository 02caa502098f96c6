//! The runner: drives every engine of a run through the same phases, one engine at a time,
//! and collects the figures of [`crate::results`].

pub mod budget;
pub mod cpu;
pub mod latency;
pub mod live;
pub mod monitor;
pub mod phase;
pub mod series;
pub mod watchdog;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use self::budget::Budget;
use self::live::LiveSet;
use self::monitor::Monitor;
use self::phase::{PhasePlan, Workload, run_phase};
use crate::engine::{self, CommonConfig, Engine, EngineResult, EngineSpec};
use crate::results::{
    DeleteRangeFigures, EngineResult as Figures, GcFigures, OpFigures, PhaseResult, Results, Space,
    WorkloadInfo,
};
use crate::shape::{self, Shape};
use crate::sys::{self, DeviceIo, dir_bytes};
use crate::workload::{
    KeyDistSpec, KeyFormat, MixgraphSpec, PhaseSpec, ValueGen, ValueSizeSpec, delete_range,
};

/// Most keys (loaded and inserted) a run may have: the live set takes 8 bytes per key, so this
/// bounds it at 32 GiB.
pub const MAX_KEYS: u64 = 1 << 32;

/// Everything a run needs, as resolved from the command line.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Engines, run one after the other in this order.
    pub engines: Vec<EngineSpec>,
    /// Key length in bytes.
    pub key_size: usize,
    /// Value sizes.
    pub value_size: ValueSizeSpec,
    /// Key choice.
    pub dist: KeyDistSpec,
    /// Keys the load phase writes.
    pub keys: u64,
    /// Phases, in order.
    pub phases: Vec<PhaseSpec>,
    /// Operations of an `update` phase.
    pub update_ops: u64,
    /// Operations of a `read` or `readwhilewriting` phase.
    pub read_ops: u64,
    /// Operations of a `scan` phase.
    pub scan_ops: u64,
    /// Operations of a YCSB phase.
    pub ycsb_ops: u64,
    /// Parameters of a `mixgraph` phase.
    pub mixgraph: MixgraphSpec,
    /// Operations of a `mixgraph` phase.
    pub mixgraph_ops: u64,
    /// Range deletes of a `delete-range` phase; the phase runs
    /// [`delete_range::OPS_PER_ROUND`] operations per range delete.
    pub delete_range_ops: u64,
    /// Consecutive keys each range delete removes (at least 1).
    pub delete_range_keys: u64,
    /// Every write's TTL, uniform in `(min, max)` milliseconds; engines without a per-write
    /// TTL are skipped.
    pub ttl_ms: Option<(u64, u64)>,
    /// Client threads.
    pub threads: usize,
    /// Knobs every engine gets.
    pub common: CommonConfig,
    /// How `common`'s sizes were derived from the dataset (recorded in the results).
    pub shape: Shape,
    /// Space budget as a multiple of the dataset bytes.
    pub space_budget: Option<f64>,
    /// Fraction of each value that compresses away (0: incompressible).
    pub compressible: f64,
    /// Random seed.
    pub seed: u64,
    /// A phase stops after this long (its figures cover what it did).
    pub phase_time_limit: Option<Duration>,
    /// An engine that completes no operation and moves no device byte for this long has hung:
    /// the run ends with the results so far (see [`watchdog`]). `None`: never.
    pub hang_timeout: Option<Duration>,
    /// Where engines keep their files (one subdirectory each, removed after the engine ran
    /// unless `keep_data`).
    pub data_dir: PathBuf,
    /// Keep the engines' directories.
    pub keep_data: bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// How long an engine may stay over the budget without making room before a violation
    /// ([`budget::VIOLATION_AFTER`], 10 s, unless a test shortens it).
    pub budget_patience: Duration,
    /// The command line, for the results.
    pub command: String,
}

impl RunConfig {
    /// Bytes of keys and values the load phase writes (the dataset size the budget and cache
    /// percentages refer to).
    pub fn dataset_bytes(&self) -> u64 {
        (self.keys as f64 * (self.key_size as f64 + self.value_size.mean())) as u64
    }

    /// Operations `phase` runs.
    pub fn phase_ops(&self, phase: PhaseSpec) -> u64 {
        match phase {
            PhaseSpec::Load => self.keys,
            PhaseSpec::Update => self.update_ops,
            PhaseSpec::Read | PhaseSpec::ReadWhileWriting => self.read_ops,
            PhaseSpec::Scan => self.scan_ops,
            PhaseSpec::DeleteRange => {
                // Refused by `validate` before a run; saturating keeps this total.
                delete_range::phase_ops(self.delete_range_ops).unwrap_or(u64::MAX)
            }
            PhaseSpec::Ycsb(_) => self.ycsb_ops,
            PhaseSpec::Mixgraph => self.mixgraph_ops,
        }
    }

    /// Key numbers the live set needs: the loaded keys plus room for every YCSB insert;
    /// `None` on overflow.
    fn live_capacity(&self) -> Option<u64> {
        self.phases.iter().try_fold(self.keys, |total, p| match p {
            PhaseSpec::Ycsb(w) if phase::inserts(*w) => total.checked_add(self.ycsb_ops),
            _ => Some(total),
        })
    }

    /// Checks what the runner needs of the configuration (the command line checks the rest
    /// first, with messages naming its options).
    ///
    /// # Errors
    /// Too many keys (loaded plus inserted) for [`MAX_KEYS`] or for the key size, a
    /// compressible ratio outside [0, 1), or a `delete-range` phase with ranges of no keys or
    /// more operations than a `u64` counts.
    pub fn validate(&self) -> Result<(), String> {
        let capacity = self
            .live_capacity()
            .filter(|&c| c <= MAX_KEYS)
            .ok_or_else(|| {
                format!(
                    "the run would have more than {MAX_KEYS} keys ({} loaded, {} YCSB operations per \
                     inserting phase)",
                    self.keys, self.ycsb_ops
                )
            })?;
        KeyFormat::new(self.key_size, capacity).map_err(|e| format!("--key-size: {e}"))?;
        if self.phases.contains(&PhaseSpec::DeleteRange) {
            if self.delete_range_keys == 0 {
                return Err("a delete-range phase needs ranges of at least 1 key".into());
            }
            if delete_range::phase_ops(self.delete_range_ops).is_none() {
                return Err(format!(
                    "{} range deletes are too many: with their updates and reads the phase's \
                     operations overflow",
                    self.delete_range_ops
                ));
            }
        }
        if !(0.0..1.0).contains(&self.compressible) {
            return Err(format!(
                "--compressible must be in [0, 1), not {}",
                self.compressible
            ));
        }
        Ok(())
    }

    fn workload_info(&self) -> WorkloadInfo {
        WorkloadInfo {
            key_size: self.key_size,
            value_size: self.value_size.to_string(),
            dist: self.dist.to_string(),
            keys: self.keys,
            load_bytes: self.dataset_bytes(),
            update_bytes: (self.update_ops as f64 * (self.key_size as f64 + self.value_size.mean()))
                as u64,
            phases: self.phases.iter().map(ToString::to_string).collect(),
            threads: self.threads,
            cache_bytes: self.common.cache_bytes,
            memtable_bytes: self.common.memtable_bytes,
            table_bytes: self.common.table_bytes,
            value_file_bytes: self.common.value_file_bytes,
            shape: self.shape.to_string(),
            engine_sizes: self
                .engines
                .iter()
                .filter_map(|e| shape::family(e.kind))
                .filter_map(|f| Some((f.to_string(), shape::engine_sizes(f, &self.common)?)))
                .collect(),
            direct_io: self.common.direct_io,
            compression: self.common.compression.to_string(),
            space_budget: self.space_budget,
            compressible: self.compressible,
            seed: self.seed,
            ttl_ms: self.ttl_ms,
            mixgraph: self
                .phases
                .contains(&PhaseSpec::Mixgraph)
                .then(|| self.mixgraph.to_string()),
        }
    }
}

/// Runs every engine of `cfg` and returns the results. An engine that fails keeps the phases
/// it completed and records the error; the run goes on with the next engine.
///
/// # Errors
/// When the key format or value generator cannot be built from `cfg` (checked by the command
/// line before anything runs).
pub fn run(cfg: &RunConfig) -> Result<Results, String> {
    run_with(cfg, engine::open)
}

/// Opens an engine of a spec in an empty directory.
pub type Opener<'a> =
    dyn Fn(&EngineSpec, &Path, &CommonConfig) -> EngineResult<Box<dyn Engine>> + 'a;

/// [`run`] with engines opened by `open` (tests pass engines of their own).
///
/// # Errors
/// As [`run`].
pub fn run_with(
    cfg: &RunConfig,
    open: impl Fn(&EngineSpec, &Path, &CommonConfig) -> EngineResult<Box<dyn Engine>>,
) -> Result<Results, String> {
    run_observed(cfg, open, &|_, _| {})
}

/// [`run_with`], calling `observe` with the results so far before each engine starts (with the
/// engine's name) and after the last one (with `None`), so a caller can save partial results.
///
/// # Errors
/// As [`run`].
pub fn run_observed(
    cfg: &RunConfig,
    open: impl Fn(&EngineSpec, &Path, &CommonConfig) -> EngineResult<Box<dyn Engine>>,
    observe: &dyn Fn(&Results, Option<&str>),
) -> Result<Results, String> {
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    cfg.validate()?;
    let capacity = cfg.live_capacity().expect("validated");
    let keys = KeyFormat::new(cfg.key_size, capacity).map_err(|e| e.to_string())?;
    let workload = Workload {
        keys,
        dist: cfg.dist,
        loaded_keys: cfg.keys,
        values: ValueGen::new(cfg.value_size, cfg.compressible, cfg.seed),
        delete_range_keys: cfg.delete_range_keys,
        mixgraph: cfg.mixgraph,
        seed: cfg.seed,
        ttl_ms: cfg.ttl_ms,
    };
    let mut results = Results {
        schema_version: crate::report::SCHEMA_VERSION,
        command: cfg.command.clone(),
        machine: sys::machine(started_unix),
        workload: cfg.workload_info(),
        engines: Vec::with_capacity(cfg.engines.len()),
    };
    for (i, spec) in cfg.engines.iter().enumerate() {
        observe(&results, Some(&spec.to_string()));
        let r = run_engine(cfg, &workload, i, spec, &open);
        if cfg.progress {
            eprintln!("{}", summary_line(&r));
        }
        results.engines.push(r);
    }
    observe(&results, None);
    Ok(results)
}

/// One line per engine for the terminal.
fn summary_line(r: &Figures) -> String {
    let phases: Vec<String> = r
        .phases
        .iter()
        .map(|p| match &p.skipped {
            Some(why) => format!("{} skipped: {why}", p.name),
            None => format!("{} {:.0} ops/s", p.name, p.ops_per_sec),
        })
        .collect();
    match &r.error {
        Some(e) => format!("{}: {} — FAILED: {e}", r.name, phases.join(", ")),
        None => format!("{}: {}", r.name, phases.join(", ")),
    }
}

fn run_engine(
    cfg: &RunConfig,
    workload: &Workload,
    index: usize,
    spec: &EngineSpec,
    open: &Opener<'_>,
) -> Figures {
    let mut result = Figures {
        name: spec.to_string(),
        kind: spec.kind.name().to_string(),
        ..Figures::default()
    };
    let dir = cfg
        .data_dir
        .join(format!("{index:02}-{}", spec.kind.name()));
    if let Err(e) = fresh_dir(&dir) {
        result.error = Some(format!("cannot prepare {}: {e}", dir.display()));
        return result;
    }
    let engine: Arc<dyn Engine> = match open(spec, &dir, &cfg.common) {
        Ok(e) => Arc::from(e),
        Err(e) => {
            result.error = Some(format!("open failed: {e}"));
            return result;
        }
    };
    let capacity = cfg.live_capacity().expect("validated by run_with");
    let live = LiveSet::new(capacity, cfg.keys, cfg.key_size);
    let dataset = cfg.dataset_bytes();
    let budget = Budget::with_patience(
        cfg.space_budget.map(|r| (r * dataset as f64) as u64),
        cfg.budget_patience,
    );
    let monitor = Monitor::start(
        dir.clone(),
        Arc::clone(&engine),
        spec.to_string(),
        budget,
        cfg.progress,
        cfg.phase_time_limit,
    );
    for (pi, &phase) in cfg.phases.iter().enumerate() {
        let unsupported = if phase == PhaseSpec::DeleteRange && !engine.supports_delete_range() {
            Some("the engine has no range delete")
        } else if cfg.ttl_ms.is_some() && !engine.supports_ttl() {
            Some("the engine has no per-write TTL (--ttl-ms)")
        } else {
            None
        };
        if let Some(why) = unsupported {
            // Emulating the range with a delete per key, or running without the TTLs, would put
            // another workload's figures under this phase's name: the phase is recorded as not
            // run instead.
            monitor.note(&format!(
                "gleaner-bench: {spec}: phase {phase} skipped: not supported ({why})"
            ));
            result.phases.push(PhaseResult {
                name: phase.to_string(),
                skipped: Some(SKIPPED_UNSUPPORTED.to_string()),
                ..PhaseResult::default()
            });
            continue;
        }
        let plan = PhasePlan {
            spec: phase,
            ops: cfg.phase_ops(phase),
            index: pi as u64,
        };
        // A panic in the engine (or the harness) ends this engine's run, not the whole run:
        // the other engines' results are still wanted.
        let attempt = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_one_phase(cfg, workload, &*engine, &live, &monitor, &dir, &plan)
        }));
        match attempt {
            Ok((figures, error)) => {
                result.phases.push(figures);
                if let Some(e) = error {
                    result.error = Some(format!("phase {phase}: {e}"));
                    break;
                }
            }
            Err(panic) => {
                result.error = Some(format!(
                    "phase {phase}: panicked: {}",
                    panic_message(&*panic)
                ));
                break;
            }
        }
    }
    let (timeseries, reclaim_errors) = monitor.finish();
    result.timeseries = timeseries;
    match std::panic::catch_unwind(AssertUnwindSafe(|| engine.close())) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            result.error.get_or_insert(format!("close failed: {e}"));
        }
        Err(panic) => {
            result
                .error
                .get_or_insert(format!("close panicked: {}", panic_message(&*panic)));
        }
    }
    if let Some(e) = reclaim_errors.first() {
        result.error.get_or_insert(format!("reclaim failed: {e}"));
    }
    drop(engine);
    if !cfg.keep_data {
        // The next engine needs the space; a failure to clean up is not a result.
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// The text of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

fn fresh_dir(dir: &Path) -> std::io::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)
}

/// Runs one phase and measures it; the error, if any, ends the engine's run.
fn run_one_phase(
    cfg: &RunConfig,
    workload: &Workload,
    engine: &dyn Engine,
    live: &LiveSet,
    monitor: &Monitor,
    dir: &Path,
    plan: &PhasePlan,
) -> (PhaseResult, Option<String>) {
    let io_before = DeviceIo::now();
    let cpu_before = cpu::CpuSnapshot::now();
    let gc_before = engine.gc_counters();
    let stall_before = engine.stall_seconds();
    let engine_io_before = engine.io_counters();
    let started_at = monitor.elapsed();
    let gauges = monitor.begin_phase(&plan.spec.to_string(), plan.ops);
    let started = Instant::now();
    let mut outcome = run_phase(engine, workload, plan, live, &gauges, cfg.threads);
    let writes = outcome.user_bytes_written > 0;
    if outcome.error.is_none() && writes {
        // Flushing belongs to the phase: every engine ends a write phase with its data in
        // files, so the space figures compare like with like.
        if let Err(e) = engine.flush() {
            outcome.error = Some(format!("flush failed: {e}"));
        }
    }
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    monitor.end_phase();
    let io = DeviceIo::now().since(&io_before);
    let cpu_seconds = cpu::CpuSnapshot::now().since(&cpu_before, outcome.client_cpu_ticks);
    let gauge = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let disk_end = dir_bytes(dir);
    let tree = engine.tree_shape();
    let live_bytes = live.live_bytes();
    let peak = gauge(&gauges.peak_disk).max(disk_end);
    let ratio = |disk: u64| {
        if live_bytes == 0 {
            0.0
        } else {
            disk as f64 / live_bytes as f64
        }
    };
    let delete_range = (plan.spec == PhaseSpec::DeleteRange).then(|| DeleteRangeFigures {
        ops: outcome.range_delete_latency.count(),
        keys_per_range: workload.delete_range_keys,
        keys_removed: outcome.range_keys_removed,
        latency_us: outcome.range_delete_latency.summary(),
    });
    let figures = PhaseResult {
        name: plan.spec.to_string(),
        skipped: None,
        started_at: Some(started_at),
        ops: outcome.ops,
        seconds,
        ops_per_sec: outcome.ops as f64 / seconds,
        mb_per_sec: (outcome.user_bytes_written + outcome.user_bytes_read) as f64 / 1e6 / seconds,
        latency_us: outcome.latency.summary(),
        by_op: if outcome.by_op.len() > 1 {
            outcome
                .by_op
                .iter()
                .map(|(kind, l)| {
                    let figures = OpFigures {
                        ops: l.count(),
                        latency_us: l.summary(),
                    };
                    (kind.to_string(), figures)
                })
                .collect()
        } else {
            BTreeMap::new()
        },
        device_bytes_read: io.read_bytes,
        device_bytes_written: io.write_bytes,
        user_bytes_written: outcome.user_bytes_written,
        write_amp: if writes {
            io.write_bytes as f64 / outcome.user_bytes_written as f64
        } else {
            0.0
        },
        space: Space {
            live_bytes,
            disk_bytes_end: disk_end,
            disk_bytes_peak: peak,
            space_amp_end: ratio(disk_end),
            space_amp_peak: ratio(peak),
        },
        stall_seconds: outcome.stall_seconds,
        budget_violations: gauge(&gauges.violations),
        engine_stall_seconds: match (stall_before, engine.stall_seconds()) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        },
        gc: match (gc_before, engine.gc_counters()) {
            (Some(a), Some(b)) => Some(GcFigures {
                jobs: b.jobs.saturating_sub(a.jobs),
                value_bytes_read: b.value_bytes_read.saturating_sub(a.value_bytes_read),
                index_bytes_read: b.index_bytes_read.saturating_sub(a.index_bytes_read),
                lookup_bytes_read: b.lookup_bytes_read.saturating_sub(a.lookup_bytes_read),
                drop_cache_answers: b.drop_cache_answers.saturating_sub(a.drop_cache_answers),
                bytes_written: b.bytes_written.saturating_sub(a.bytes_written),
                bytes_written_by_class: b
                    .bytes_written_by_class
                    .iter()
                    .map(|(class, n)| {
                        let before = a.bytes_written_by_class.get(class).copied().unwrap_or(0);
                        (class.clone(), n.saturating_sub(before))
                    })
                    .collect(),
                relocated_bytes: b.relocated_bytes.saturating_sub(a.relocated_bytes),
                written_back: b.written_back.saturating_sub(a.written_back),
                read_seconds: b.read_micros.saturating_sub(a.read_micros) as f64 / 1e6,
                lookup_seconds: b.lookup_micros.saturating_sub(a.lookup_micros) as f64 / 1e6,
                write_seconds: b.write_micros.saturating_sub(a.write_micros) as f64 / 1e6,
                paced_seconds: b.paced_micros.saturating_sub(a.paced_micros) as f64 / 1e6,
                job_seconds: b.job_micros.saturating_sub(a.job_micros) as f64 / 1e6,
                compaction_wait_seconds: b
                    .compaction_wait_micros
                    .saturating_sub(a.compaction_wait_micros)
                    as f64
                    / 1e6,
                policy: b.policy,
            }),
            _ => None,
        },
        engine_io: match (engine_io_before, engine.io_counters()) {
            (Some(a), Some(b)) => Some(json_delta(&b, &a)),
            (None, b) => b,
            (Some(_), None) => None,
        },
        tree,
        delete_range,
        cpu_seconds,
    };
    let mut error = outcome.error;
    // A phase cut short by its time limit is not an error: its figures cover what it did.
    if error.is_none() && outcome.ops < plan.ops && !gauges.timed_out.load(Ordering::Relaxed) {
        error = Some(format!(
            "only {} of {} operations ran",
            outcome.ops, plan.ops
        ));
    }
    (figures, error)
}

/// Why a phase an engine cannot run was skipped ([`PhaseResult::skipped`]).
pub const SKIPPED_UNSUPPORTED: &str = "not supported";

/// The key under which an engine's [`Engine::io_counters`] reports gauges (sizes at the
/// phase's end) that [`json_delta`] must not subtract.
pub const AT_END: &str = "at_end";

/// `end - start` for every number in two JSON documents of the same shape (cumulative
/// counters); non-numeric values, and everything under [`AT_END`], are taken from `end`.
pub fn json_delta(end: &serde_json::Value, start: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (end, start) {
        (Value::Object(e), Value::Object(s)) => Value::Object(
            e.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        match s.get(k) {
                            // Gauges read at the phase's end, not counters: kept as they are.
                            Some(sv) if k != AT_END => json_delta(v, sv),
                            _ => v.clone(),
                        },
                    )
                })
                .collect(),
        ),
        (Value::Number(e), Value::Number(s)) => match (e.as_u64(), s.as_u64()) {
            (Some(e), Some(s)) => Value::from(e.saturating_sub(s)),
            _ => match (e.as_f64(), s.as_f64()) {
                (Some(e), Some(s)) => {
                    serde_json::Number::from_f64(e - s).map_or(Value::Null, Value::Number)
                }
                _ => end.clone(),
            },
        },
        _ => end.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_deltas_subtract_numbers_at_every_depth() {
        let start = serde_json::json!({"a": 10, "b": {"c": 1.5, "d": "x"}, "e": [1],
            "at_end": {"g": 3}});
        let end = serde_json::json!({"a": 25, "b": {"c": 4.0, "d": "y"}, "e": [2], "f": 7,
            "at_end": {"g": 5}});
        assert_eq!(
            json_delta(&end, &start),
            serde_json::json!({"a": 15, "b": {"c": 2.5, "d": "y"}, "e": [2], "f": 7,
                "at_end": {"g": 5}})
        );
    }
}

//! The `gleaner-bench` command line: `run`, the presets `quick` and `paper`, and `report`.
//!
//! Every check of the user's input happens before anything is written; a failed check prints
//! one message naming the option and exits with code 2.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::engine::{self, CommonConfig, EngineSpec, PEERS_BUILT};
use crate::report;
use crate::results::Results;
use crate::runner::{self, MAX_KEYS, RunConfig};
use crate::workload::{
    DEFAULT_KEY_LEN, KeyDistSpec, PhaseSpec, ValueSizeSpec, YcsbWorkload, parse_size,
};

/// Exit code for bad input (nothing ran).
pub const EXIT_USAGE: u8 = 2;
/// Exit code when an engine failed during the run (results are still written).
pub const EXIT_ENGINE_FAILED: u8 = 1;

/// Default memtable ceiling (the papers' 64 MiB).
const MEMTABLE_MAX: u64 = 64 << 20;
/// Smallest memtable the harness gives an engine.
const MEMTABLE_MIN: u64 = 1 << 20;
/// Largest key-table target size the harness derives (the papers' 64 MiB).
const TABLE_MAX: u64 = 64 << 20;
/// Smallest key-table target size the harness derives.
const TABLE_MIN: u64 = 2 << 20;
/// Largest value-file target size the harness derives (the papers' 256 MiB).
const VALUE_FILE_MAX: u64 = 256 << 20;
/// Smallest value-file target size the harness derives.
const VALUE_FILE_MIN: u64 = 8 << 20;
/// Smallest block cache the harness gives an engine.
const CACHE_MIN: u64 = 1 << 20;
/// Most client threads.
const MAX_THREADS: usize = 256;

#[derive(Debug, Parser)]
#[command(
    name = "gleaner-bench",
    version,
    about = "Runs Gleaner and peer engines through the papers' workloads and reports side by side"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs a workload against one or more engines.
    Run(RunArgs),
    /// About a minute: Mixed-8K load, update, read, scan on Gleaner and (when built with the
    /// `peers` feature) RocksDB, RocksDB-BlobDB, fjall and fjall-blob; prints the report.
    Quick(QuickArgs),
    /// A paper experiment at a scale that fits one machine.
    Paper(PaperArgs),
    /// Rebuilds report.md and the plots of DIR from its results.json.
    Report {
        /// A directory written by `run`, `quick` or `paper`.
        dir: PathBuf,
    },
}

/// Options every run has.
#[derive(Debug, Clone, Args)]
struct CommonArgs {
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Block-cache size for every engine: bytes (`64MiB`) or a percentage of the dataset (`1%`).
    #[arg(long, default_value = "1%")]
    cache: String,
    /// Memtable size for every engine (default: dataset ÷ 32, between 1 MiB and 64 MiB). Key
    /// tables target dataset ÷ 64 (2 to 64 MiB) and value files dataset ÷ 16 (8 to 256 MiB).
    #[arg(long)]
    memtable: Option<String>,
    /// Direct I/O for reads and background writes, where the engine supports it.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    direct_io: OnOff,
    /// Space budget: a multiple of the dataset bytes (`1.5`), or `none`.
    #[arg(long, default_value = "1.5")]
    space_budget: String,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Stop a phase after this many seconds (its figures cover what it did).
    #[arg(long)]
    phase_time_limit: Option<u64>,
    /// End the run when an engine completes no operation and moves no device byte for this
    /// many seconds (a deadlock no time limit can interrupt); the results so far are written,
    /// with the hung engine marked failed. 0 disables it.
    #[arg(long, default_value_t = 600)]
    hang_timeout: u64,
    /// Where the engines keep their files (default: OUT/data). Each engine's directory is
    /// removed after it ran unless --keep-data.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Keep the engines' directories.
    #[arg(long)]
    keep_data: bool,
    /// Write into OUT even if it is not empty.
    #[arg(long)]
    force: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Engines (`gleaner[:POLICY][,name=value...]`, `rocksdb`, `rocksdb-blob`, `fjall`,
    /// `fjall-blob`, `null`); repeat for several. Presets choose their own when not given.
    #[arg(long = "engine", value_name = "SPEC")]
    engines: Vec<EngineSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Debug, Clone, Args)]
struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Value sizes: `fixed:SIZE`, `mixed8k`, `mixed:RATIO`, `pareto:MEAN`, `uniform:MIN-MAX`.
    #[arg(long, default_value = "mixed8k")]
    value_size: ValueSizeSpec,
    /// Key choice: `uniform`, `zipf:THETA`, `hotspot:OPS:DATA`, `latest`.
    #[arg(long, default_value = "zipf:0.99")]
    dist: KeyDistSpec,
    /// Key length in bytes.
    #[arg(long, default_value_t = DEFAULT_KEY_LEN)]
    key_size: usize,
    /// Dataset size: bytes of keys and values the load phase writes.
    #[arg(long, conflicts_with = "keys")]
    load_bytes: Option<String>,
    /// Dataset size as a number of keys.
    #[arg(long)]
    keys: Option<u64>,
    /// Phases, comma-separated: load, update, read, scan, readwhilewriting, ycsb-a..ycsb-f.
    #[arg(long, value_delimiter = ',', default_value = "load,update,read,scan")]
    phases: Vec<PhaseSpec>,
    /// YCSB workloads to run after the phases (`--ycsb a,b,f`).
    #[arg(long, value_delimiter = ',')]
    ycsb: Vec<YcsbWorkload>,
    /// Bytes the update phase writes (default: 3× the dataset).
    #[arg(long)]
    update_bytes: Option<String>,
    /// Operations of a read or readwhilewriting phase (default: one per key).
    #[arg(long)]
    read_ops: Option<u64>,
    /// Operations of a scan phase (default: keys ÷ 500, at least 10).
    #[arg(long)]
    scan_ops: Option<u64>,
    /// Operations of each YCSB phase (default: one per key).
    #[arg(long)]
    ycsb_ops: Option<u64>,
    /// Fraction of each value that compresses away (0 = incompressible, below 1).
    #[arg(long, default_value_t = 0.0)]
    compressible: f64,
    /// Output directory: results.json, report.md and the plots.
    #[arg(long)]
    out: PathBuf,
}

/// Preset scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scale {
    /// A few seconds (CI smoke test): 8 MiB loaded.
    Tiny,
    /// About a minute with every peer: 128 MiB loaded.
    Small,
}

#[derive(Debug, Clone, Args)]
struct QuickArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Dataset scale.
    #[arg(long, value_enum, default_value_t = Scale::Small)]
    scale: Scale,
    /// Output directory (default: target/gleaner-bench/quick-UNIXTIME).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The paper experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Experiment {
    /// Scavenger Fig. 12a/b: Mixed-8K (1:1 of 100–512 B and 16 KiB), Zipf 0.99.
    ScavengerMixed8k,
    /// Scavenger Fig. 12c/d: fixed 16 KiB values, Zipf 0.99.
    ScavengerFixed16k,
}

#[derive(Debug, Clone, Args)]
struct PaperArgs {
    /// The experiment.
    #[arg(value_enum)]
    experiment: Experiment,
    #[command(flatten)]
    common: CommonArgs,
    /// Dataset size (at least 4 GiB for the committed results).
    #[arg(long, default_value = "4GiB")]
    load_bytes: String,
    /// Output directory (default: target/gleaner-bench/EXPERIMENT-UNIXTIME).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Bad input: the message names the option.
#[derive(Debug)]
struct Usage(String);

impl<T: Into<String>> From<T> for Usage {
    fn from(s: T) -> Self {
        Usage(s.into())
    }
}

/// Runs the command line `args` (including the program name) and returns the exit code.
pub fn main_with_args(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args: Vec<String> = args.into_iter().collect();
    let command_line = args.join(" ");
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            // clap prints help and version with exit code 0 and bad input with 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(EXIT_USAGE));
        }
    };
    let prepared = match cli.command {
        Command::Report { dir } => {
            return match report::rebuild(&dir) {
                Ok(()) => {
                    say(&format!(
                        "rebuilt {} and the plots in {}",
                        report::REPORT_FILE,
                        dir.display()
                    ));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("gleaner-bench report: {e}");
                    ExitCode::from(EXIT_USAGE)
                }
            };
        }
        Command::Run(a) => prepare_run(&a, command_line),
        Command::Quick(a) => prepare_quick(&a, command_line),
        Command::Paper(a) => prepare_paper(&a, command_line),
    };
    match prepared {
        Ok((cfg, out)) => execute(&cfg, &out),
        Err(Usage(msg)) => {
            eprintln!("gleaner-bench: {msg}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Prints `text` and a newline on stdout; a closed stdout (`| head`) is not an error worth
/// failing a finished run for.
fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Writes `results` as they stand into `out` when the run cannot finish: `running` is the
/// engine that hung, recorded as failed after the finished ones.
fn write_partial(out: &Path, results: &Results, running: Option<&str>, idle: Duration) {
    let mut results = results.clone();
    if let Some(name) = running {
        results.engines.push(crate::results::EngineResult {
            name: name.to_string(),
            kind: name.split([':', ',']).next().unwrap_or(name).to_string(),
            error: Some(format!(
                "hung: no operation completed and no device I/O for {:.0} s; the run was ended                  here (engines after this one were not run)",
                idle.as_secs_f64()
            )),
            ..Default::default()
        });
    }
    if let Err(e) = report::write_json(out, &results) {
        eprintln!(
            "gleaner-bench: cannot write results into {}: {e}",
            out.display()
        );
        return;
    }
    let _ = std::fs::write(out.join(report::REPORT_FILE), report::markdown(&results));
    let _ = report::plots(out, &results);
}

/// Runs `cfg` and writes the results, report and plots into `out`. results.json is rewritten
/// before each engine starts, so a run that is killed keeps what it measured; a hang (see
/// [`runner::watchdog`]) writes the results so far and ends the process with exit code 1.
fn execute(cfg: &RunConfig, out: &Path) -> ExitCode {
    type Partial = Arc<Mutex<Option<(Results, Option<String>)>>>;
    let partial: Partial = Arc::new(Mutex::new(None));
    let _watchdog = cfg.hang_timeout.map(|timeout| {
        let partial = Arc::clone(&partial);
        let out = out.to_path_buf();
        runner::watchdog::Watchdog::start(timeout, move |idle| {
            let saved = partial.lock().unwrap_or_else(|p| p.into_inner()).clone();
            eprintln!(
                "gleaner-bench: no progress for {:.0} s: an engine hung; writing the results so far into {}",
                idle.as_secs_f64(),
                out.display()
            );
            if let Some((results, running)) = saved {
                write_partial(&out, &results, running.as_deref(), idle);
            }
            std::process::exit(i32::from(EXIT_ENGINE_FAILED));
        })
    });
    let observe = |results: &Results, running: Option<&str>| {
        if !results.engines.is_empty()
            && let Err(e) = report::write_json(out, results)
        {
            eprintln!("gleaner-bench: cannot save partial results: {e}");
        }
        *partial.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((results.clone(), running.map(str::to_string)));
    };
    let results = match runner::run_observed(cfg, crate::engine::open, &observe) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gleaner-bench: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Err(e) = report::write_json(out, &results) {
        eprintln!(
            "gleaner-bench: cannot write results into {}: {e}",
            out.display()
        );
        return ExitCode::from(EXIT_ENGINE_FAILED);
    }
    let md = report::markdown(&results);
    if let Err(e) = std::fs::write(out.join(report::REPORT_FILE), &md) {
        eprintln!(
            "gleaner-bench: cannot write the report into {}: {e}",
            out.display()
        );
        return ExitCode::from(EXIT_ENGINE_FAILED);
    }
    if let Err(e) = report::plots(out, &results) {
        eprintln!("gleaner-bench: cannot draw the plots: {e}");
    }
    say(&md);
    say(&format!("results, report and plots in {}", out.display()));
    if results.engines.iter().any(|e| e.error.is_some()) {
        ExitCode::from(EXIT_ENGINE_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// The sizes and phases of a workload before the common options are applied.
struct Shape {
    value_size: ValueSizeSpec,
    dist: KeyDistSpec,
    key_size: usize,
    keys: u64,
    phases: Vec<PhaseSpec>,
    update_bytes: Option<u64>,
    read_ops: Option<u64>,
    scan_ops: Option<u64>,
    ycsb_ops: Option<u64>,
    compressible: f64,
}

fn prepare_run(a: &RunArgs, command: String) -> Result<(RunConfig, PathBuf), Usage> {
    let entry = a.key_size as f64 + a.value_size.mean();
    let keys = match (&a.load_bytes, a.keys) {
        (Some(b), None) => {
            let bytes = size("--load-bytes", b)?;
            ((bytes as f64 / entry).round() as u64).max(1)
        }
        (None, Some(k)) => k,
        (None, None) => {
            return Err("give the dataset size with --load-bytes SIZE or --keys N".into());
        }
        (Some(_), Some(_)) => return Err("--load-bytes and --keys are exclusive".into()),
    };
    let mut phases = a.phases.clone();
    phases.extend(a.ycsb.iter().map(|w| PhaseSpec::Ycsb(*w)));
    let shape = Shape {
        value_size: a.value_size,
        dist: a.dist,
        key_size: a.key_size,
        keys,
        phases,
        update_bytes: a
            .update_bytes
            .as_deref()
            .map(|b| size("--update-bytes", b))
            .transpose()?,
        read_ops: a.read_ops,
        scan_ops: a.scan_ops,
        ycsb_ops: a.ycsb_ops,
        compressible: a.compressible,
    };
    if a.common.engines.is_empty() {
        return Err("give at least one --engine SPEC (e.g. --engine gleaner:terarkdb)".into());
    }
    build(
        &a.common,
        a.common.engines.clone(),
        shape,
        a.out.clone(),
        command,
    )
}

fn default_out(name: &str) -> PathBuf {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("target")
        .join("gleaner-bench")
        .join(format!("{name}-{now}"))
}

/// Gleaner with the `scavenger` and `terarkdb` policies (and, for the paper's experiments, the
/// industrial baselines `titan` and `blobdb`), then every peer this binary has.
fn preset_engines(common: &CommonArgs, baselines: bool) -> Vec<EngineSpec> {
    if !common.engines.is_empty() {
        return common.engines.clone();
    }
    // Scavenger (the default policy) against its TerarkDB baseline, then the peers.
    let mut names = vec!["gleaner:scavenger", "gleaner:terarkdb"];
    if baselines {
        // The schemes the Scavenger paper compares with, on the same engine.
        names.extend(["gleaner:titan", "gleaner:blobdb"]);
    }
    if PEERS_BUILT {
        names.extend(["rocksdb", "rocksdb-blob", "fjall", "fjall-blob"]);
    }
    names
        .into_iter()
        .map(|n| n.parse().expect("preset engine specs parse"))
        .collect()
}

/// The presets' workload: `load` bytes of `value_size` values, Zipf 0.99, then load, update
/// (3×), read (one per key) and scan (keys ÷ 500 scans of 1..1000 entries).
fn preset_shape(value_size: ValueSizeSpec, load: u64) -> Shape {
    let keys = (load as f64 / (DEFAULT_KEY_LEN as f64 + value_size.mean())).round() as u64;
    Shape {
        value_size,
        dist: KeyDistSpec::Zipf { theta: 0.99 },
        key_size: DEFAULT_KEY_LEN,
        keys,
        phases: vec![
            PhaseSpec::Load,
            PhaseSpec::Update,
            PhaseSpec::Read,
            PhaseSpec::Scan,
        ],
        update_bytes: None,
        read_ops: None,
        scan_ops: None,
        ycsb_ops: None,
        compressible: 0.0,
    }
}

fn prepare_quick(a: &QuickArgs, command: String) -> Result<(RunConfig, PathBuf), Usage> {
    let load: u64 = match a.scale {
        Scale::Tiny => 8 << 20,
        Scale::Small => 128 << 20,
    };
    let out = a.out.clone().unwrap_or_else(|| default_out("quick"));
    let shape = preset_shape(ValueSizeSpec::MIXED_8K, load);
    build(
        &a.common,
        preset_engines(&a.common, false),
        shape,
        out,
        command,
    )
}

fn prepare_paper(a: &PaperArgs, command: String) -> Result<(RunConfig, PathBuf), Usage> {
    let (name, value_size) = match a.experiment {
        Experiment::ScavengerMixed8k => ("scavenger-mixed8k", ValueSizeSpec::MIXED_8K),
        Experiment::ScavengerFixed16k => ("scavenger-fixed16k", ValueSizeSpec::Fixed(16 << 10)),
    };
    // Scavenger §4.2 loads 100 GB, updates 300 GB, reads 300 GB and runs 40 M scans of
    // 1..1000 entries under a 1.5× space budget with a 1 % block cache. Scaled to one machine:
    // the same load:update ratio, one read per key, and scans that read about as many entries
    // as there are keys, so every engine finishes in minutes.
    let shape = preset_shape(value_size, size("--load-bytes", &a.load_bytes)?);
    let out = a.out.clone().unwrap_or_else(|| default_out(name));
    build(
        &a.common,
        preset_engines(&a.common, true),
        shape,
        out,
        command,
    )
}

/// Parses a `--name SIZE` option.
fn size(option: &str, text: &str) -> Result<u64, Usage> {
    parse_size(text).ok_or_else(|| {
        Usage(format!(
            "{option} `{text}` is not a size: digits with an optional k/KiB, m/MiB or g/GiB suffix"
        ))
    })
}

/// Checks everything and assembles the run.
fn build(
    c: &CommonArgs,
    engines: Vec<EngineSpec>,
    shape: Shape,
    out: PathBuf,
    command: String,
) -> Result<(RunConfig, PathBuf), Usage> {
    for spec in &engines {
        engine::validate(spec, None)?;
    }
    if c.phase_time_limit == Some(0) {
        return Err("--phase-time-limit must be at least 1 second".into());
    }
    if c.threads == 0 || c.threads > MAX_THREADS {
        return Err(format!(
            "--threads must be between 1 and {MAX_THREADS}, not {}",
            c.threads
        )
        .into());
    }
    if shape.keys == 0 || shape.keys > MAX_KEYS {
        return Err(format!(
            "the dataset must have between 1 and {MAX_KEYS} keys, not {}",
            shape.keys
        )
        .into());
    }
    if shape.phases.is_empty() {
        return Err("--phases lists no phase".into());
    }
    if shape.phases.iter().any(|p| *p != PhaseSpec::Load) && shape.phases[0] != PhaseSpec::Load {
        return Err(
            "--phases must start with `load`: the other phases work on the loaded keys".into(),
        );
    }
    let entry = shape.key_size as f64 + shape.value_size.mean();
    let dataset = (shape.keys as f64 * entry) as u64;
    let space_budget = match c.space_budget.as_str() {
        "none" => None,
        t => match t.parse::<f64>() {
            Ok(r) if (1.0..=100.0).contains(&r) => Some(r),
            _ => {
                return Err(format!("--space-budget must be a ratio from 1 to 100 (of the dataset) or `none`, not `{t}`").into());
            }
        },
    };
    let cache_bytes = if let Some(pct) = c.cache.strip_suffix('%') {
        match pct.parse::<f64>() {
            Ok(p) if p.is_finite() && p > 0.0 && p <= 100.0 => {
                ((dataset as f64 * p / 100.0) as u64).max(CACHE_MIN)
            }
            _ => {
                return Err(
                    format!("--cache `{}`: a percentage must be in (0, 100]", c.cache).into(),
                );
            }
        }
    } else {
        size("--cache", &c.cache)?
    };
    let memtable_bytes = match &c.memtable {
        Some(t) => {
            let m = size("--memtable", t)?;
            if !(64 << 10..=4 << 30).contains(&m) {
                return Err(format!("--memtable must be between 64 KiB and 4 GiB, not {t}").into());
            }
            m
        }
        None => (dataset / 32).clamp(MEMTABLE_MIN, MEMTABLE_MAX),
    };
    // File sizes scale with the dataset like the memtable, reaching the engines' defaults (and
    // the papers': 64 MiB tables, 256 MiB value files) at 4 GiB, so a small run keeps the shape
    // of a large one instead of holding its whole dataset in one or two files.
    let table_bytes = (dataset / 64).clamp(TABLE_MIN, TABLE_MAX);
    let value_file_bytes = (dataset / 16).clamp(VALUE_FILE_MIN, VALUE_FILE_MAX);
    let update_bytes = shape.update_bytes.unwrap_or(dataset.saturating_mul(3));
    let cfg_data_dir = c.data_dir.clone().unwrap_or_else(|| out.join("data"));
    let cfg = RunConfig {
        engines,
        key_size: shape.key_size,
        value_size: shape.value_size,
        dist: shape.dist,
        keys: shape.keys,
        phases: shape.phases,
        update_ops: ((update_bytes as f64 / entry).round() as u64).max(1),
        read_ops: shape.read_ops.unwrap_or(shape.keys),
        scan_ops: shape.scan_ops.unwrap_or((shape.keys / 500).max(10)),
        ycsb_ops: shape.ycsb_ops.unwrap_or(shape.keys),
        threads: c.threads,
        common: CommonConfig {
            cache_bytes,
            direct_io: c.direct_io == OnOff::On,
            memtable_bytes,
            table_bytes,
            value_file_bytes,
            background_threads: 2,
        },
        space_budget,
        compressible: shape.compressible,
        seed: c.seed,
        phase_time_limit: c.phase_time_limit.map(Duration::from_secs),
        hang_timeout: (c.hang_timeout > 0).then(|| Duration::from_secs(c.hang_timeout)),
        data_dir: cfg_data_dir,
        keep_data: c.keep_data,
        progress: !c.quiet,
        budget_patience: runner::budget::VIOLATION_AFTER,
        command,
    };
    for spec in &cfg.engines {
        engine::validate(spec, Some(&cfg.common))?;
    }
    cfg.validate()?;
    check_out_dir(&out, c.force)?;
    // One engine's directory at a time, unless they are all kept.
    let copies = if c.keep_data {
        cfg.engines.len() as f64
    } else {
        1.0
    };
    let need = (dataset as f64 * space_budget.unwrap_or(2.0) * copies).ceil() as u64;
    if let Some(free) = crate::sys::free_bytes(&cfg.data_dir)
        && free < need
    {
        return Err(format!(
            "{} has {} MiB free; the dataset ({} MiB) × the space budget ({}){} needs {} MiB",
            cfg.data_dir.display(),
            free >> 20,
            dataset >> 20,
            space_budget.map_or_else(|| "none: 2× assumed".to_string(), |r| r.to_string()),
            if c.keep_data {
                " × the engines kept (--keep-data)"
            } else {
                ""
            },
            need >> 20
        )
        .into());
    }
    std::fs::create_dir_all(&out)
        .map_err(|e| format!("cannot create --out {}: {e}", out.display()))?;
    Ok((cfg, out))
}

/// Refuses an output directory that exists and is not empty, unless `force`.
fn check_out_dir(out: &Path, force: bool) -> Result<(), Usage> {
    if out.exists() && !out.is_dir() {
        return Err(format!("--out {} exists and is not a directory", out.display()).into());
    }
    let non_empty = std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some());
    if non_empty && !force {
        return Err(format!(
            "--out {} exists and is not empty; choose another directory or pass --force",
            out.display()
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hung_engine_is_written_after_the_finished_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let done = report::fixture::results();
        let finished = done.engines.len();
        write_partial(
            dir.path(),
            &done,
            Some("fjall-blob,gc_staleness=0.5"),
            Duration::from_secs(601),
        );
        let back = report::read_json(dir.path()).expect("results.json written");
        assert_eq!(back.engines.len(), finished + 1);
        let hung = back.engines.last().expect("hung engine");
        assert_eq!(
            (hung.name.as_str(), hung.kind.as_str()),
            ("fjall-blob,gc_staleness=0.5", "fjall-blob")
        );
        assert!(
            hung.error
                .as_deref()
                .is_some_and(|e| e.contains("hung") && e.contains("601 s")),
            "{:?}",
            hung.error
        );
        let md = std::fs::read_to_string(dir.path().join(report::REPORT_FILE)).expect("report");
        assert!(md.contains("hung"), "the report shows the failure");
    }
}

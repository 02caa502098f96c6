//! The `gleaner-bench` command line: `run`, the presets `quick` and `paper`, and `report`.
//!
//! Every check of the user's input happens before anything is written; a failed check prints
//! one message naming the option and exits with code 2.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::engine::{self, CommonConfig, Compression, EngineSpec, PEERS_BUILT};
use crate::report;
use crate::results::Results;
use crate::runner::{self, MAX_KEYS, RunConfig};
use crate::shape::{self, Shape};
use crate::workload::delete_range::{self, DEFAULT_RANGE_KEYS};
use crate::workload::{
    DEFAULT_KEY_LEN, KeyDistSpec, MixgraphSpec, PhaseSpec, ValueSizeSpec, YcsbWorkload, parse_size,
};

/// Exit code for bad input (nothing ran).
pub const EXIT_USAGE: u8 = 2;
/// Exit code when an engine failed during the run (results are still written).
pub const EXIT_ENGINE_FAILED: u8 = 1;

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
    // Boxed: its options make it far larger than the other commands.
    Run(Box<RunArgs>),
    /// About a minute: Mixed-8K load, update, read, scan on Gleaner and (when built with the
    /// `peers` feature) RocksDB, RocksDB-BlobDB, fjall and fjall-blob; prints the report.
    Quick(QuickArgs),
    /// A paper experiment at a scale that fits one machine.
    Paper(PaperArgs),
    /// Expiring values on Gleaner: expiry-grouped value tables against ratio-triggered GC, on a
    /// workload where every write carries a TTL (the peers have no per-write TTL).
    Expiry(crate::expiry_study::ExpiryArgs),
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
    /// Memtable size for every engine, overriding the one `--shape` derives.
    #[arg(long)]
    memtable: Option<String>,
    /// How memtables, tables, value files and level sizes follow the dataset, for every
    /// engine alike: `absolute` (memtable dataset ÷ 32 within 1–64 MiB, tables ÷ 64 within
    /// 2–64 MiB, value files ÷ 16 within 8–256 MiB, level base the engines' 256 MiB: the
    /// papers' absolute sizes from 4 GiB up) or `paper` (the Scavenger paper's 64 MiB memtable
    /// and tables, 256 MiB level base and value files × dataset ÷ 100 GB, so the trees have
    /// the paper's depth). Default: `paper` for the `paper` experiments, `absolute` otherwise.
    #[arg(long, value_enum)]
    shape: Option<Shape>,
    /// Direct I/O for reads and background writes, where the engine supports it.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    direct_io: OnOff,
    /// Block compression of every engine's index tree: Gleaner's key tables, RocksDB's SSTs,
    /// fjall's segments (and fjall-blob's blob files, which fjall ties to them; RocksDB's blob
    /// files and Gleaner's values are never compressed).
    #[arg(long, value_enum, default_value_t = Compression::Lz4)]
    compression: Compression,
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
    /// Phases, comma-separated: load, update, read, scan, readwhilewriting, delete-range,
    /// mixgraph, ycsb-a..ycsb-f.
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
    /// Parameters of a mixgraph phase: a preset (`dpkv-0.9`, `dpkv-1.2`, `fast20`), then
    /// `,NAME=VALUE` overrides by db_bench's flag names (docs/benchmarks.md, "mixgraph").
    #[arg(long, default_value = "dpkv-0.9")]
    mixgraph: MixgraphSpec,
    /// Operations of a mixgraph phase (default: one per key).
    #[arg(long)]
    mixgraph_ops: Option<u64>,
    /// Range deletes of a delete-range phase, each followed by 10 updates and 10 reads
    /// (default: keys ÷ 1000, at least 10).
    #[arg(long)]
    delete_range_ops: Option<u64>,
    /// Consecutive keys each range delete of a delete-range phase removes.
    #[arg(long, default_value_t = DEFAULT_RANGE_KEYS)]
    delete_range_keys: u64,
    /// Give every write a TTL uniform in MIN-MAX milliseconds (`20000-60000`): reads then
    /// accept an absent key (expired), scans are not checked, and the live bytes count every
    /// key as written (so space amplification reads low). Engines without a per-write TTL
    /// (RocksDB, fjall) are skipped, saying so. See also `gleaner-bench expiry`.
    #[arg(long, value_name = "MIN-MAX")]
    ttl_ms: Option<String>,
    /// Fraction of each value that compresses away (0 = incompressible, below 1).
    #[arg(long, default_value_t = 0.0)]
    compressible: f64,
    /// Output directory: results.json, report.md and the plots.
    #[arg(long)]
    out: PathBuf,
}

/// Preset scales: the dataset bytes loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scale {
    /// A few seconds (CI smoke test): 8 MiB loaded.
    Tiny,
    /// About a minute with every peer: 128 MiB loaded.
    Small,
    /// 4 GiB: the committed paper results.
    Medium,
    /// 16 GiB: a confirmation run (hours with every engine; needs 24 GiB free disk).
    Large,
    /// 32 GiB: a confirmation run (needs 48 GiB free disk).
    Xlarge,
}

impl Scale {
    /// Bytes of keys and values loaded.
    fn load_bytes(self) -> u64 {
        match self {
            Scale::Tiny => 8 << 20,
            Scale::Small => 128 << 20,
            Scale::Medium => 4 << 30,
            Scale::Large => 16 << 30,
            Scale::Xlarge => 32 << 30,
        }
    }
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
    /// Dataset size (default 4 GiB, the committed results' size; any size, e.g. `32GiB`).
    #[arg(long, conflicts_with = "scale")]
    load_bytes: Option<String>,
    /// Dataset size by name (`medium` = 4 GiB, `large` = 16 GiB, `xlarge` = 32 GiB, ...),
    /// instead of --load-bytes.
    #[arg(long, value_enum)]
    scale: Option<Scale>,
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
        Command::Expiry(a) => {
            return match crate::expiry_study::run(&a, &command_line) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("gleaner-bench expiry: {e}");
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
struct Plan {
    value_size: ValueSizeSpec,
    dist: KeyDistSpec,
    key_size: usize,
    keys: u64,
    phases: Vec<PhaseSpec>,
    update_bytes: Option<u64>,
    read_ops: Option<u64>,
    scan_ops: Option<u64>,
    ycsb_ops: Option<u64>,
    mixgraph: MixgraphSpec,
    mixgraph_ops: Option<u64>,
    delete_range_ops: Option<u64>,
    delete_range_keys: u64,
    compressible: f64,
    ttl_ms: Option<(u64, u64)>,
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
    let plan = Plan {
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
        mixgraph: a.mixgraph,
        mixgraph_ops: a.mixgraph_ops,
        delete_range_ops: a.delete_range_ops,
        delete_range_keys: a.delete_range_keys,
        compressible: a.compressible,
        ttl_ms: a.ttl_ms.as_deref().map(parse_ttl_range).transpose()?,
    };
    if a.common.engines.is_empty() {
        return Err("give at least one --engine SPEC (e.g. --engine gleaner:terarkdb)".into());
    }
    build(
        &a.common,
        a.common.engines.clone(),
        plan,
        Shape::Absolute,
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
fn preset_plan(value_size: ValueSizeSpec, load: u64) -> Plan {
    let keys = (load as f64 / (DEFAULT_KEY_LEN as f64 + value_size.mean())).round() as u64;
    Plan {
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
        mixgraph: MixgraphSpec::default(),
        mixgraph_ops: None,
        delete_range_ops: None,
        delete_range_keys: DEFAULT_RANGE_KEYS,
        compressible: 0.0,
        ttl_ms: None,
    }
}

/// A `--ttl-ms MIN-MAX` range of milliseconds.
fn parse_ttl_range(text: &str) -> Result<(u64, u64), Usage> {
    text.split_once('-')
        .and_then(|(l, h)| Some((l.parse::<u64>().ok()?, h.parse::<u64>().ok()?)))
        .filter(|(l, h)| l <= h && *h <= gleaner::expiry::MAX_EXPIRY_MS)
        .ok_or_else(|| {
            format!("--ttl-ms `{text}` is not MIN-MAX milliseconds (MIN at most MAX)").into()
        })
}

fn prepare_quick(a: &QuickArgs, command: String) -> Result<(RunConfig, PathBuf), Usage> {
    let out = a.out.clone().unwrap_or_else(|| default_out("quick"));
    let plan = preset_plan(ValueSizeSpec::MIXED_8K, a.scale.load_bytes());
    build(
        &a.common,
        preset_engines(&a.common, false),
        plan,
        Shape::Absolute,
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
    let plan = preset_plan(value_size, paper_load_bytes(a)?);
    let out = a.out.clone().unwrap_or_else(|| default_out(name));
    // The paper's tree shape at any dataset size: its sizes scaled by dataset ÷ 100 GB.
    build(
        &a.common,
        preset_engines(&a.common, true),
        plan,
        Shape::Paper,
        out,
        command,
    )
}

/// The dataset size of a `paper` run: `--load-bytes`, `--scale`, or 4 GiB.
fn paper_load_bytes(a: &PaperArgs) -> Result<u64, Usage> {
    match (&a.load_bytes, a.scale) {
        (Some(text), None) => size("--load-bytes", text),
        (None, Some(scale)) => Ok(scale.load_bytes()),
        (None, None) => Ok(Scale::Medium.load_bytes()),
        (Some(_), Some(_)) => Err("--load-bytes and --scale are exclusive".into()),
    }
}

/// Parses a `--name SIZE` option.
fn size(option: &str, text: &str) -> Result<u64, Usage> {
    parse_size(text).ok_or_else(|| {
        Usage(format!(
            "{option} `{text}` is not a size: digits with an optional k/KiB, m/MiB or g/GiB suffix"
        ))
    })
}

/// Checks everything and assembles the run; `default_shape` applies unless `--shape` is given.
fn build(
    c: &CommonArgs,
    engines: Vec<EngineSpec>,
    plan: Plan,
    default_shape: Shape,
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
    if plan.keys == 0 || plan.keys > MAX_KEYS {
        return Err(format!(
            "the dataset must have between 1 and {MAX_KEYS} keys, not {}",
            plan.keys
        )
        .into());
    }
    if plan.phases.is_empty() {
        return Err("--phases lists no phase".into());
    }
    if plan.phases.iter().any(|p| *p != PhaseSpec::Load) && plan.phases[0] != PhaseSpec::Load {
        return Err(
            "--phases must start with `load`: the other phases work on the loaded keys".into(),
        );
    }
    // A range of no keys is refused even when no delete-range phase runs (it can only be a
    // typo); ranges longer than the dataset only when one does, so the default of 100 keys
    // does not stand in the way of smaller runs without the phase.
    let deletes_ranges = plan.phases.contains(&PhaseSpec::DeleteRange);
    if plan.delete_range_keys == 0 || (deletes_ranges && plan.delete_range_keys > plan.keys) {
        return Err(format!(
            "--delete-range-keys must be between 1 and the {} keys loaded, not {}",
            plan.keys, plan.delete_range_keys
        )
        .into());
    }
    let delete_range_ops = plan.delete_range_ops.unwrap_or((plan.keys / 1000).max(10));
    if delete_range::phase_ops(delete_range_ops).is_none() {
        return Err(format!(
            "--delete-range-ops {delete_range_ops} is too many: with {} updates and {} reads \
             each, the phase's operations overflow",
            delete_range::UPDATES_PER_ROUND,
            delete_range::READS_PER_ROUND
        )
        .into());
    }
    let entry = plan.key_size as f64 + plan.value_size.mean();
    let dataset = (plan.keys as f64 * entry) as u64;
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
    let lsm_shape = c.shape.unwrap_or(default_shape);
    let sizes = shape::sizes(lsm_shape, dataset);
    let memtable_bytes = match &c.memtable {
        Some(t) => {
            let m = size("--memtable", t)?;
            if !(64 << 10..=4 << 30).contains(&m) {
                return Err(format!("--memtable must be between 64 KiB and 4 GiB, not {t}").into());
            }
            m
        }
        None => sizes.memtable_bytes,
    };
    let update_bytes = plan.update_bytes.unwrap_or(dataset.saturating_mul(3));
    let cfg_data_dir = c.data_dir.clone().unwrap_or_else(|| out.join("data"));
    let cfg = RunConfig {
        engines,
        key_size: plan.key_size,
        value_size: plan.value_size,
        dist: plan.dist,
        keys: plan.keys,
        phases: plan.phases,
        update_ops: ((update_bytes as f64 / entry).round() as u64).max(1),
        read_ops: plan.read_ops.unwrap_or(plan.keys),
        scan_ops: plan.scan_ops.unwrap_or((plan.keys / 500).max(10)),
        ycsb_ops: plan.ycsb_ops.unwrap_or(plan.keys),
        mixgraph: plan.mixgraph,
        mixgraph_ops: plan.mixgraph_ops.unwrap_or(plan.keys),
        delete_range_ops,
        delete_range_keys: plan.delete_range_keys,
        ttl_ms: plan.ttl_ms,
        threads: c.threads,
        // `--memtable` overrides the shape's memtable.
        common: CommonConfig {
            memtable_bytes,
            compression: c.compression,
            ..sizes.common(cache_bytes, c.direct_io == OnOff::On)
        },
        shape: lsm_shape,
        space_budget,
        compressible: plan.compressible,
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

    /// Parses `args` (after the program name, with `--out` in a fresh directory appended) and
    /// prepares the run as `main_with_args` would, without running it.
    fn prepared(args: &[&str]) -> Result<RunConfig, Usage> {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out").to_string_lossy().into_owned();
        let mut all = vec!["gleaner-bench"];
        all.extend(args);
        all.extend(["--out", &out]);
        let cli = Cli::try_parse_from(all).map_err(|e| Usage(e.to_string()))?;
        let prepared = match cli.command {
            Command::Run(a) => prepare_run(&a, String::new()),
            Command::Quick(a) => prepare_quick(&a, String::new()),
            Command::Paper(a) => prepare_paper(&a, String::new()),
            Command::Report { .. } | Command::Expiry(_) => panic!("not a run"),
        };
        prepared.map(|(cfg, _)| cfg)
    }

    #[test]
    fn each_command_has_its_default_shape_and_shape_overrides_it() {
        let quick = prepared(&["quick", "--scale", "tiny"]).expect("quick");
        assert_eq!(quick.shape, Shape::Absolute);
        let run = prepared(&["run", "--engine", "null", "--load-bytes", "8MiB"]).expect("run");
        assert_eq!(run.shape, Shape::Absolute);
        let paper =
            prepared(&["paper", "scavenger-mixed8k", "--load-bytes", "64MiB"]).expect("paper");
        assert_eq!(paper.shape, Shape::Paper);
        let quick_paper =
            prepared(&["quick", "--scale", "tiny", "--shape", "paper"]).expect("quick paper");
        assert_eq!(quick_paper.shape, Shape::Paper);
        let paper_absolute = prepared(&[
            "paper",
            "scavenger-mixed8k",
            "--load-bytes",
            "64MiB",
            "--shape",
            "absolute",
        ])
        .expect("paper absolute");
        assert_eq!(paper_absolute.shape, Shape::Absolute);
        // The engines get exactly the sizes of the shape for the dataset.
        for cfg in [&quick, &run, &paper, &quick_paper, &paper_absolute] {
            let s = shape::sizes(cfg.shape, cfg.dataset_bytes());
            let c = &cfg.common;
            assert_eq!(
                (
                    c.memtable_bytes,
                    c.table_bytes,
                    c.value_file_bytes,
                    c.level_base_bytes,
                    c.gc_max_input_bytes
                ),
                (
                    s.memtable_bytes,
                    s.table_bytes,
                    s.value_file_bytes,
                    s.level_base_bytes,
                    s.gc_max_input_bytes
                ),
                "{:?}",
                cfg.shape
            );
        }
        // `absolute` is the rule from before `--shape`: an 8 MiB run got a 1 MiB memtable,
        // 2 MiB tables, 8 MiB value files and nothing else.
        assert_eq!(quick.common.memtable_bytes, 1 << 20);
        assert_eq!(quick.common.table_bytes, 2 << 20);
        assert_eq!(quick.common.value_file_bytes, 8 << 20);
        assert_eq!(quick.common.level_base_bytes, None);
        assert_eq!(quick.common.gc_max_input_bytes, None);
        // The paper's floors at this size.
        assert_eq!(quick_paper.common.memtable_bytes, shape::PAPER_MEMTABLE_MIN);
        assert_eq!(
            quick_paper.common.level_base_bytes,
            Some(shape::PAPER_LEVEL_BASE_MIN)
        );
    }

    #[test]
    fn explicit_memtable_and_cache_override_the_shape() {
        let cfg = prepared(&[
            "paper",
            "scavenger-mixed8k",
            "--load-bytes",
            "64MiB",
            "--memtable",
            "4MiB",
            "--cache",
            "3MiB",
        ])
        .expect("paper");
        assert_eq!(cfg.common.memtable_bytes, 4 << 20);
        assert_eq!(cfg.common.cache_bytes, 3 << 20);
        // Everything else still follows the shape.
        let s = shape::sizes(Shape::Paper, cfg.dataset_bytes());
        assert_eq!(cfg.common.table_bytes, s.table_bytes);
        assert_eq!(cfg.common.level_base_bytes, s.level_base_bytes);
    }

    #[test]
    fn delete_range_options_default_from_the_keys_and_can_be_set() {
        let run = |extra: &[&str]| {
            let mut args = vec![
                "run",
                "--engine",
                "null",
                "--value-size",
                "fixed:100",
                "--phases",
                "load,delete-range",
            ];
            args.extend(extra);
            prepared(&args)
        };
        let big = run(&["--keys", "50000"]).expect("run");
        assert_eq!((big.delete_range_ops, big.delete_range_keys), (50, 100));
        assert_eq!(big.phase_ops(PhaseSpec::DeleteRange), 50 * 21);
        let small = run(&["--keys", "100"]).expect("run");
        assert_eq!(small.delete_range_ops, 10, "at least 10 range deletes");
        let set = run(&[
            "--keys",
            "5000",
            "--delete-range-ops",
            "3",
            "--delete-range-keys",
            "7",
        ])
        .expect("run");
        assert_eq!((set.delete_range_ops, set.delete_range_keys), (3, 7));
        assert_eq!(set.phases, [PhaseSpec::Load, PhaseSpec::DeleteRange]);
        // Ranges longer than the dataset are refused only when the phase runs.
        let too_long = run(&["--keys", "50"]).expect_err("ranges of 100 of 50 keys");
        assert!(too_long.0.contains("--delete-range-keys"), "{}", too_long.0);
        prepared(&[
            "run",
            "--engine",
            "null",
            "--keys",
            "50",
            "--phases",
            "load,read",
        ])
        .expect("the default range length does not bind without the phase");
    }

    #[test]
    fn a_bad_shape_is_refused_naming_the_flag() {
        for command in [
            vec!["quick", "--shape", "scaled"],
            vec!["paper", "scavenger-mixed8k", "--shape", "scaled"],
            vec![
                "run", "--engine", "null", "--keys", "10", "--shape", "scaled",
            ],
        ] {
            let Err(Usage(message)) = prepared(&command) else {
                panic!("{command:?} was accepted");
            };
            assert!(
                message.contains("--shape") && message.contains("scaled"),
                "{message}"
            );
            assert!(
                message.contains("absolute") && message.contains("paper"),
                "the valid values are listed: {message}"
            );
        }
    }

    #[test]
    fn compression_is_one_flag_for_every_engine() {
        let run = |extra: &[&str]| {
            let mut args = vec!["run", "--engine", "null", "--keys", "100"];
            args.extend(extra);
            prepared(&args)
        };
        // The default is LZ4, what every engine used before the flag.
        assert_eq!(run(&[]).expect("run").common.compression, Compression::Lz4);
        for (text, expected) in [("none", Compression::None), ("lz4", Compression::Lz4)] {
            let cfg = run(&["--compression", text]).expect("run");
            assert_eq!(cfg.common.compression, expected, "{text}");
            assert_eq!(expected.to_string(), text);
        }
        // The presets share the flag.
        let quick = prepared(&["quick", "--scale", "tiny", "--compression", "none"]);
        assert_eq!(quick.expect("quick").common.compression, Compression::None);
        let paper = prepared(&[
            "paper",
            "scavenger-mixed8k",
            "--load-bytes",
            "64MiB",
            "--compression",
            "none",
        ]);
        assert_eq!(paper.expect("paper").common.compression, Compression::None);
        // A bad value is refused naming the flag and the values it takes.
        let Err(Usage(message)) = run(&["--compression", "snappy"]) else {
            panic!("snappy was accepted");
        };
        assert!(
            message.contains("--compression") && message.contains("snappy"),
            "{message}"
        );
        assert!(
            ["none", "lz4"].iter().all(|v| message.contains(v)),
            "the valid values are listed: {message}"
        );
        // Zstandard is no value: no engine of this build has it (RocksDB links LZ4 only).
        assert!(run(&["--compression", "zstd"]).is_err());
    }

    #[test]
    fn ttl_ranges_are_min_max_milliseconds() {
        assert_eq!(parse_ttl_range("1000-5000").ok(), Some((1000, 5000)));
        assert_eq!(parse_ttl_range("7-7").ok(), Some((7, 7)));
        for bad in ["5000-1000", "soon", "1-", "-5", "1-99999999999999999999"] {
            let Err(Usage(m)) = parse_ttl_range(bad) else {
                panic!("{bad} was accepted");
            };
            assert!(m.contains("--ttl-ms"), "{m}");
        }
    }

    #[test]
    fn paper_runs_reach_32_gib() {
        let parse = |args: &[&str]| -> Result<u64, String> {
            let mut all = vec!["gleaner-bench", "paper", "scavenger-mixed8k"];
            all.extend(args);
            match Cli::try_parse_from(all).map_err(|e| e.to_string())?.command {
                Command::Paper(a) => paper_load_bytes(&a).map_err(|Usage(m)| m),
                _ => unreachable!("a paper command"),
            }
        };
        assert_eq!(parse(&[]), Ok(4 << 30));
        assert_eq!(parse(&["--load-bytes", "32GiB"]), Ok(32 << 30));
        assert_eq!(parse(&["--scale", "large"]), Ok(16 << 30));
        assert_eq!(parse(&["--scale", "xlarge"]), Ok(32 << 30));
        assert_eq!(parse(&["--scale", "medium"]), Ok(4 << 30));
        let both = parse(&["--scale", "xlarge", "--load-bytes", "1GiB"]).expect_err("both");
        assert!(
            both.contains("--load-bytes") && both.contains("--scale"),
            "{both}"
        );
        // 32 GiB of Mixed-8K is some four million keys: well within the harness's limits.
        let keys = preset_plan(ValueSizeSpec::MIXED_8K, 32 << 30).keys;
        assert!(keys > 4_000_000 && keys < MAX_KEYS, "{keys}");
    }

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

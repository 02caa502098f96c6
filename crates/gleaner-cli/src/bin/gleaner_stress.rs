//! `gleaner-stress`: black-box crash loops with real processes and real SIGKILL.
//!
//! `write` applies a deterministic stream of synced batches (operation `n` is a pure function
//! of the seed and `n`) and records, next to the database, how many operations it has
//! attempted and how many were acknowledged. `verify` replays the stream in memory and checks
//! that the database holds exactly the state after the acknowledged operations, or after the
//! one attempted on top of them. `loop` is the driver: it starts `write` as a child process,
//! kills it with SIGKILL at a random moment, verifies, and starts again.
//!
//! `--gc` picks the GC variant (`scavenger`, `tdb`, `tdb-r`, ..., `tdb-rlw`, `titan`, `blobdb`,
//! `novkv`); `loop --gc all` runs them in turn on the same database, one per cycle, so every
//! reopen after a kill switches policies (docs/gc.md, "Switching policies"). `--style` picks
//! the compaction style (`leveled`, `tiered`) or DP-KV's partitioned tree (`dpkv`); `loop
//! --style alternate` changes the compaction style at every cycle, so every reopen after a
//! kill switches styles too. `--separate-at` says when separated values are written (`flush`,
//! `write`); `loop --separate-at alternate` switches every other cycle.
//!
//! Some puts expire. Time is the stream's own: the database reads a manual clock that `write`
//! sets to [`time_at`] each operation's number before writing it, and `verify` to that of the
//! last operation attempted, so what has expired is a function of the stream too.
//!
//! Layout of `--dir D`: the database in `D/db`, the counters in `D/acked` and `D/attempted`.
//!
//! Exit status: 0 on success, 1 when verification finds a mismatch (or the database cannot be
//! opened), 2 for usage and I/O errors of the tool itself.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use crc32c::crc32c;
use gleaner::expiry::ManualClock;
use gleaner::options::OptionValue;
use gleaner::{
    CompactionStyle, Db, GcPolicyKind, Options, Partitioning, ReadOptions, SeparateAt, Switch,
    WriteBatch, WriteOptions,
};

/// Number of distinct keys the stream writes; small so that overwrites and deletes of live keys
/// are frequent and GC always finds garbage.
const KEY_SPACE: u64 = 500;
/// Values at least this long are separated into value tables (tiny, so both paths are used).
const MIN_SEPARATED: u64 = 512;
/// The GC variants `--gc` accepts: the `scavenger` policy, the `terarkdb` policy (`tdb`)
/// with any of Scavenger's techniques switched on (`r` lazy read, `l` index-decoupled tables and
/// lookups, `w` hotness-aware writes), named as in the paper's ablation, `titan`, `blobdb`,
/// `novkv`, `dumpkv` and `diffkv`.
const GC_VARIANTS: &[&str] = &[
    "scavenger",
    "titan",
    "blobdb",
    "novkv",
    "dumpkv",
    "diffkv",
    "tdb",
    "tdb-r",
    "tdb-l",
    "tdb-w",
    "tdb-rl",
    "tdb-rw",
    "tdb-lw",
    "tdb-rlw",
];
/// The stream's time before operation 0 (milliseconds since the epoch): in 2096, after the real
/// clock, so that a database the tool wrote, opened with the real clock (by a test, or by hand),
/// reads at the latest stream time the database recorded (its time floor) or earlier, never
/// later than `verify` will: nothing expires there that the stream has not expired.
const T0: u64 = 4_000_000_000_000;
/// Milliseconds of the stream's time per operation.
const STEP_MS: u64 = 10;

/// Keys numbered below this are never written with an expiry: whatever clock a database the tool
/// wrote is opened with, they read as the stream left them (a test deletes one by hand and
/// expects `verify` to notice).
const NEVER_EXPIRING: u64 = 10;

/// The time operation `n` is written at.
fn time_at(n: u64) -> u64 {
    T0 + n * STEP_MS
}

/// How long `loop` waits for a child (a `write` after SIGKILL, or a `verify`) before giving up.
const CHILD_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Parser, Debug)]
#[command(
    name = "gleaner-stress",
    about = "Crash loops with real processes and SIGKILL"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Write the deterministic stream of synced batches until killed (or `--ops` are done).
    Write {
        /// Stress directory (the database is in `DIR/db`).
        #[arg(long)]
        dir: PathBuf,
        /// Seed of the operation stream.
        #[arg(long)]
        seed: u64,
        /// First operation to apply; without it, `write` verifies the database first and
        /// continues after the state it finds.
        #[arg(long)]
        start: Option<u64>,
        /// Stop after this many operations (default: run until killed).
        #[arg(long)]
        ops: Option<u64>,
        /// Also run `compact_range` and `run_gc` back to back in a background thread, so a
        /// kill very likely lands in the middle of compaction or GC.
        #[arg(long)]
        churn: bool,
        /// GC variant: `scavenger`, `tdb` (the `terarkdb` policy), or `tdb-` with any of `r`,
        /// `l`, `w` (Scavenger's techniques switched on).
        #[arg(long, default_value = "scavenger", value_parser = parse_gc_variant)]
        gc: String,
        /// Compaction style: `leveled` or `tiered`, or `dpkv`: DP-KV's partitioned tree
        /// (tiered cold, leveled hot), its detector ticking every 100 accesses and finding
        /// the stream's near-uniform keys hot, so keys move between the partitions.
        #[arg(long, default_value = "leveled", value_parser = Style::parse)]
        style: Style,
        /// When separated values are written: `flush`, or `write` (once, as they arrive).
        #[arg(long, default_value = "flush", value_parser = SeparateAt::parse_option)]
        separate_at: SeparateAt,
    },
    /// Check the database against the replayed stream; exit 1 on a mismatch.
    Verify {
        /// Stress directory (the database is in `DIR/db`).
        #[arg(long)]
        dir: PathBuf,
        /// Seed of the operation stream.
        #[arg(long)]
        seed: u64,
        /// GC variant to open the database with (as for `write`).
        #[arg(long, default_value = "scavenger", value_parser = parse_gc_variant)]
        gc: String,
        /// Compaction style to open the database with (as for `write`).
        #[arg(long, default_value = "leveled", value_parser = Style::parse)]
        style: Style,
        /// When separated values are written (as for `write`).
        #[arg(long, default_value = "flush", value_parser = SeparateAt::parse_option)]
        separate_at: SeparateAt,
    },
    /// Driver: start `write`, SIGKILL it after a random delay, verify; `--cycles` times.
    Loop {
        /// Stress directory (created if missing; the database is in `DIR/db`).
        #[arg(long)]
        dir: PathBuf,
        /// Seed of the operation stream (and of the kill delays).
        #[arg(long)]
        seed: u64,
        /// Number of kill-verify cycles.
        #[arg(long, default_value_t = 20)]
        cycles: u64,
        /// Shortest delay before the kill, in milliseconds.
        #[arg(long, default_value_t = 200)]
        min_ms: u64,
        /// Longest delay before the kill, in milliseconds.
        #[arg(long, default_value_t = 1500)]
        max_ms: u64,
        /// GC variant of every cycle (as for `write`), or `all`: cycle `i` runs the `i`-th of
        /// the nine variants in turn, so the database also changes GC policy across restarts.
        #[arg(long, default_value = "scavenger", value_parser = parse_loop_gc)]
        gc: String,
        /// Compaction style of every cycle (as for `write`), or `alternate`: odd cycles run
        /// leveled, even ones tiered, so the database also changes style across restarts.
        #[arg(long, default_value = "leveled", value_parser = parse_loop_style)]
        style: String,
        /// When separated values are written in every cycle (as for `write`), or `alternate`:
        /// two cycles at `flush`, two at `write`, and so on, so every other restart switches
        /// (and, with `--gc all`, each variant runs under both within 28 cycles).
        #[arg(long, default_value = "flush", value_parser = parse_loop_separate_at)]
        separate_at: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Write {
            dir,
            seed,
            start,
            ops,
            churn,
            gc,
            style,
            separate_at,
        } => write_cmd(
            &dir,
            seed,
            start,
            ops,
            churn,
            &Setup {
                gc,
                style,
                separate_at,
            },
        ),
        Cmd::Verify {
            dir,
            seed,
            gc,
            style,
            separate_at,
        } => verify_cmd(
            &dir,
            seed,
            &Setup {
                gc,
                style,
                separate_at,
            },
        ),
        Cmd::Loop {
            dir,
            seed,
            cycles,
            min_ms,
            max_ms,
            gc,
            style,
            separate_at,
        } => loop_cmd(
            &dir,
            &LoopPlan {
                seed,
                cycles,
                min_ms,
                max_ms,
                gc,
                style,
                separate_at,
            },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Mismatch(m)) => {
            eprintln!("gleaner-stress: VERIFY FAILED: {m}");
            ExitCode::from(1)
        }
        Err(Failure::Tool(m)) => {
            eprintln!("gleaner-stress: {m}");
            ExitCode::from(2)
        }
    }
}

/// Why a command failed: the database is wrong (exit 1) or the tool could not do its job (2).
#[derive(Debug)]
enum Failure {
    Mismatch(String),
    Tool(String),
}

type Res<T> = Result<T, Failure>;

fn tool<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> Failure + '_ {
    move |e| Failure::Tool(format!("{what}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// The operation stream

/// splitmix64: a good, dependency-free mix of a 64-bit state.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small deterministic generator (splitmix64 stream).
struct Rng(u64);

impl Rng {
    fn new(parts: &[u64]) -> Rng {
        let mut s = 0x5eed_u64;
        for p in parts {
            s = mix(s ^ p);
        }
        Rng(s)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One entry of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Put(Vec<u8>, Vec<u8>),
    /// A put that expires at the given time (of the stream's clock).
    PutExpiring(Vec<u8>, Vec<u8>, u64),
    Delete(Vec<u8>),
    /// A range delete of `[start, end)`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

fn key_name(k: u64) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

/// The value operation `n` puts at key number `k`: a readable header naming its origin (so a
/// wrong value in a failure message says where it came from) padded with derived bytes.
fn value_for(seed: u64, n: u64, k: u64, len: usize) -> Vec<u8> {
    let mut v = format!("s{seed}/op{n}/key{k:05}/len{len}|").into_bytes();
    let mut rng = Rng::new(&[seed, n, k, 0xda7a]);
    while v.len() < len {
        v.extend_from_slice(&rng.next().to_le_bytes());
    }
    v.truncate(len.max(1));
    v
}

/// Operation `n` of the stream of `seed`: one in fifty a range delete of 1 to 40 keys, alone in
/// its batch; else 1 to 5 entries on distinct keys (distinct so the expected state does not
/// depend on how the engine orders entries of one batch); about a quarter deletes, the puts
/// mostly small values and a third large (separated) ones, one in five of them (but on the
/// first [`NEVER_EXPIRING`] keys) expiring within the next 200 operations (now and then at
/// once).
fn operation(seed: u64, n: u64) -> Vec<Entry> {
    let mut rng = Rng::new(&[seed, n]);
    if rng.below(50) == 0 {
        let start = rng.below(KEY_SPACE);
        let end = start + 1 + rng.below(40);
        return vec![Entry::DeleteRange(key_name(start), key_name(end))];
    }
    let count = 1 + rng.below(5);
    let mut keys: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    for _ in 0..count {
        let k = rng.below(KEY_SPACE);
        if keys.contains(&k) {
            continue;
        }
        keys.push(k);
        let roll = rng.below(100);
        if roll < 25 {
            out.push(Entry::Delete(key_name(k)));
        } else {
            let len = if roll < 75 {
                20 + rng.below(60) as usize
            } else {
                1024 + rng.below(7 * 1024 + 1) as usize
            };
            let value = value_for(seed, n, k, len);
            if rng.below(5) == 0 && k >= NEVER_EXPIRING {
                let expiry = time_at(n) + rng.below(201) * STEP_MS;
                out.push(Entry::PutExpiring(key_name(k), value, expiry));
            } else {
                out.push(Entry::Put(key_name(k), value));
            }
        }
    }
    out
}

/// The state the stream builds: each key's value, and when it expires if it does.
type State = BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>;

fn apply(state: &mut State, entries: &[Entry]) {
    for e in entries {
        match e {
            Entry::Put(k, v) => {
                state.insert(k.clone(), (v.clone(), None));
            }
            Entry::PutExpiring(k, v, expiry) => {
                state.insert(k.clone(), (v.clone(), Some(*expiry)));
            }
            Entry::Delete(k) => {
                state.remove(k);
            }
            Entry::DeleteRange(start, end) => state.retain(|k, _| !(k >= start && k < end)),
        }
    }
}

/// What a reader at time `now` finds in `state`.
fn visible(state: &State, now: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    state
        .iter()
        .filter(|(_, (_, expiry))| expiry.is_none_or(|e| e > now))
        .map(|(k, (v, _))| (k.clone(), v.clone()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Progress counters

/// A counter file holds a count as 8 bytes little-endian plus their crc32c. It is replaced by
/// write-to-temp, fsync, rename, fsync of the directory, so a reader sees the old or the new
/// number, never a torn one; the checksum catches anything else.
fn write_counter(dir: &Path, name: &str, value: u64) -> Res<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut buf = value.to_le_bytes().to_vec();
    buf.extend_from_slice(&crc32c(&value.to_le_bytes()).to_le_bytes());
    let mut f = File::create(&tmp).map_err(tool("create counter"))?;
    f.write_all(&buf).map_err(tool("write counter"))?;
    f.sync_all().map_err(tool("sync counter"))?;
    fs::rename(&tmp, dir.join(name)).map_err(tool("rename counter"))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(tool("sync stress directory"))
}

/// The count in counter file `name`, 0 when it does not exist yet.
fn read_counter(dir: &Path, name: &str) -> Res<u64> {
    let buf = match fs::read(dir.join(name)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Failure::Tool(format!("read counter {name}: {e}"))),
    };
    if buf.len() != 12 {
        return Err(Failure::Tool(format!(
            "counter {name}: {} bytes",
            buf.len()
        )));
    }
    let value = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(buf[8..].try_into().expect("4 bytes"));
    if crc != crc32c(&buf[..8]) {
        return Err(Failure::Tool(format!("counter {name}: bad checksum")));
    }
    Ok(value)
}

/// Counts of acknowledged and attempted operations (operations `0..acked` were acknowledged;
/// `0..attempted` were submitted; `attempted` is `acked` or `acked + 1`).
fn read_progress(dir: &Path) -> Res<(u64, u64)> {
    let acked = read_counter(dir, "acked")?;
    let attempted = read_counter(dir, "attempted")?;
    if attempted != acked && attempted != acked + 1 {
        return Err(Failure::Tool(format!(
            "progress files disagree: acked {acked}, attempted {attempted}"
        )));
    }
    Ok((acked, attempted))
}

// ---------------------------------------------------------------------------------------------
// Commands

/// Options that keep flushes, compactions and GC running nearly all the time: tiny memtables,
/// key and value tables, a low level-1 target and a GC ratio near 0.
fn stress_options() -> Options {
    Options::default()
        .with_memtable_size(16 << 10)
        .with_key_table_size(8 << 10)
        .with_level_base_size(32 << 10)
        .with_value_table_size(32 << 10)
        .with_min_separated_value_size(MIN_SEPARATED)
        .with_gc_garbage_ratio(0.05)
        .with_gc_threads(2)
        // Expiring values in value tables of their own, which expire whole: groups of 50
        // operations of the stream's time.
        .with_expiry_group_ms(50 * STEP_MS)
        // Every separated value goes into the value cache as it is written or flushed: the
        // cache lives and dies with the process, so a kill must lose nothing it held, and the
        // writer's flushes and writes do the extra work while they are killed.
        .with_prepopulate_value_cache(true)
        // A row cache smaller than the key space's values, which every write fills: the
        // writer's writes pay its inserts and evictions while they are killed, and the
        // verifier's second pass of point reads is answered from it.
        .with_row_cache_size(64 << 10)
        .with_prepopulate_row_cache(true)
        // Key tables are rewritten for their stale handles at a fifth (not the default half),
        // so such compactions run, and are killed, between the writer's GC jobs.
        .with_stale_handle_share(0.2)
}

/// Accepts the names in [`GC_VARIANTS`] (and `terarkdb` for `tdb`).
fn parse_gc_variant(name: &str) -> Result<String, String> {
    let name = if name == "terarkdb" { "tdb" } else { name };
    if GC_VARIANTS.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(format!(
            "unknown GC variant `{name}` (known: terarkdb, {})",
            GC_VARIANTS.join(", ")
        ))
    }
}

/// As [`parse_gc_variant`], or `all`.
fn parse_loop_gc(name: &str) -> Result<String, String> {
    if name == "all" {
        Ok(name.to_string())
    } else {
        parse_gc_variant(name).map_err(|e| format!("{e}, or all"))
    }
}

/// As [`Style::parse`], or `alternate`.
fn parse_loop_style(name: &str) -> Result<String, String> {
    if name == "alternate" {
        Ok(name.to_string())
    } else {
        Style::parse(name)
            .map(|s| s.name().to_string())
            .map_err(|e| format!("{e}, or `alternate`"))
    }
}

/// A `separate_at` setting, or `alternate`.
fn parse_loop_separate_at(name: &str) -> Result<String, String> {
    if name == "alternate" {
        Ok(name.to_string())
    } else {
        SeparateAt::parse_option(name)
            .map(|s| s.name().to_string())
            .map_err(|e| format!("{e}, or `alternate`"))
    }
}

/// How the index tree is shaped: a compaction style, or DP-KV's partitioned tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Tree(CompactionStyle),
    Dpkv,
}

impl Style {
    fn parse(name: &str) -> Result<Style, String> {
        if name == "dpkv" {
            return Ok(Style::Dpkv);
        }
        CompactionStyle::parse_option(name)
            .map(Style::Tree)
            .map_err(|e| format!("{e}, or `dpkv`"))
    }

    fn name(self) -> &'static str {
        match self {
            Style::Tree(s) => s.name(),
            Style::Dpkv => "dpkv",
        }
    }

    /// `opts` with this shape, set explicitly (left unset, the OPTIONS file of an earlier
    /// cycle would choose).
    fn apply(self, opts: Options) -> Options {
        match self {
            Style::Tree(s) => opts
                .with_compaction_style(s)
                .with_partitioning(Partitioning::None),
            Style::Dpkv => opts
                .with_partitioning(Partitioning::Dpkv)
                .with_dpkv_tick_accesses(100)
                .with_dpkv_hot_density(1.0),
        }
    }
}

/// How a process opens the database: GC variant, compaction style, and when values are
/// separated.
struct Setup {
    /// A name [`parse_gc_variant`] returned.
    gc: String,
    style: Style,
    separate_at: SeparateAt,
}

/// `opts` with GC variant `variant` (a name [`parse_gc_variant`] returned). Every switch is set
/// explicitly: a switch the caller leaves unset would come from the OPTIONS file, i.e. from the
/// variant an earlier cycle ran.
fn with_gc_variant(opts: Options, variant: &str) -> Options {
    if variant == "titan" {
        // As frequent as the others' GC (`gc_garbage_ratio` above).
        return opts
            .with_gc_policy(GcPolicyKind::Titan)
            .with_titan_discardable_ratio(0.05)
            .with_gc_lazy_read(Switch::Auto)
            .with_index_decoupled_tables(Switch::Auto)
            .with_hotness_aware_writes(Switch::Auto);
    }
    if variant == "blobdb" {
        // Forced compactions on, so they are killed mid-flight too.
        return opts
            .with_gc_policy(GcPolicyKind::Blobdb)
            .with_blobdb_force_threshold(0.5)
            .with_gc_lazy_read(Switch::Auto)
            .with_index_decoupled_tables(Switch::Auto)
            .with_hotness_aware_writes(Switch::Auto);
    }
    if variant == "novkv" {
        // As frequent as the others' GC: a valid rate below 1 − `gc_garbage_ratio`.
        return opts
            .with_gc_policy(GcPolicyKind::Novkv)
            .with_novkv_valid_threshold(0.95)
            .with_gc_lazy_read(Switch::Auto)
            .with_index_decoupled_tables(Switch::Auto)
            .with_hotness_aware_writes(Switch::Auto);
    }
    if variant == "dumpkv" {
        // Lifetimes of tens of writes, a model trained every 64 samples (on its task, which
        // the kills interrupt too), tables collected early as often as the others' GC.
        return opts
            .with_gc_policy(GcPolicyKind::Dumpkv)
            .with_dumpkv_time_unit(16)
            .with_dumpkv_train_samples(64)
            .with_dumpkv_force_ratio(0.05)
            .with_gc_lazy_read(Switch::Auto)
            .with_index_decoupled_tables(Switch::Auto)
            .with_hotness_aware_writes(Switch::Auto);
    }
    if variant == "diffkv" {
        // The tool's separation threshold for small values, values of four times it in vLogs,
        // GC as frequent as the others', two sorted runs per key so tagged merges run too, and
        // three merge levels (the suites run the default two).
        return opts
            .with_gc_policy(GcPolicyKind::Diffkv)
            .with_diffkv_merge_levels(3)
            .with_diffkv_small_max(MIN_SEPARATED)
            .with_diffkv_large_min(MIN_SEPARATED * 4)
            .with_diffkv_gc_ratio(0.05)
            .with_diffkv_vtree_gc_ratio(0.05)
            .with_diffkv_max_sorted_runs(2)
            .with_gc_lazy_read(Switch::Auto)
            .with_index_decoupled_tables(Switch::Auto)
            .with_hotness_aware_writes(Switch::Auto);
    }
    if variant == "scavenger" {
        return opts
            .with_gc_policy(GcPolicyKind::Scavenger)
            .with_gc_lazy_read(Switch::Auto)
            .with_index_decoupled_tables(Switch::Auto)
            .with_hotness_aware_writes(Switch::Auto);
    }
    let techniques = variant.strip_prefix("tdb-").unwrap_or("");
    let on = |letter: char| {
        if techniques.contains(letter) {
            Switch::On
        } else {
            Switch::Off
        }
    };
    opts.with_gc_policy(GcPolicyKind::Terarkdb)
        .with_gc_lazy_read(on('r'))
        .with_index_decoupled_tables(on('l'))
        .with_hotness_aware_writes(on('w'))
}

fn open_db(dir: &Path, setup: &Setup, clock: &Arc<ManualClock>) -> Res<Db> {
    // The style is set explicitly, as every GC switch is: left unset, it would come from the
    // OPTIONS file, i.e. from what an earlier cycle ran.
    let opts = setup
        .style
        .apply(with_gc_variant(stress_options(), &setup.gc))
        .with_separate_at(setup.separate_at)
        .with_clock(clock.clone());
    Db::open(dir.join("db"), opts)
        .map_err(|e| Failure::Mismatch(format!("cannot open {}: {e}", dir.join("db").display())))
}

fn write_cmd(
    dir: &Path,
    seed: u64,
    start: Option<u64>,
    ops: Option<u64>,
    churn: bool,
    setup: &Setup,
) -> Res<()> {
    fs::create_dir_all(dir).map_err(tool("create stress directory"))?;
    let start = match start {
        Some(s) => s,
        None => verify(dir, seed, setup)?.resume_at,
    };
    // The database now holds exactly the state after `start` operations. Record that before
    // writing more (acked first, so `attempted` is never behind `acked` and never two ahead).
    write_counter(dir, "acked", start)?;
    write_counter(dir, "attempted", start)?;
    let clock = Arc::new(ManualClock::new(time_at(start)));
    let db = Arc::new(open_db(dir, setup, &clock)?);
    let stop = Arc::new(AtomicBool::new(false));
    let churner = churn.then(|| {
        let (db, stop) = (db.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Errors here would surface as failed writes or a failed verify; the churn only
                // exists to keep background work busy when the kill lands.
                let _ = db.compact_range(None, None);
                let _ = db.run_gc();
            }
        })
    });
    let sync = WriteOptions { sync: true };
    let end = ops.map_or(u64::MAX, |o| start.saturating_add(o));
    let mut n = start;
    while n < end {
        let mut batch = WriteBatch::new();
        for e in operation(seed, n) {
            match e {
                Entry::Put(k, v) => batch.put(k, v),
                Entry::PutExpiring(k, v, expiry) => batch.put_with_expiry(k, v, expiry),
                Entry::Delete(k) => batch.delete(k),
                Entry::DeleteRange(start, end) => batch.delete_range(start, end),
            };
        }
        write_counter(dir, "attempted", n + 1)?;
        clock.set(time_at(n));
        db.write(batch, &sync)
            .map_err(|e| Failure::Tool(format!("write of op {n} (seed {seed}) failed: {e}")))?;
        write_counter(dir, "acked", n + 1)?;
        n += 1;
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = churner {
        let _ = h.join();
    }
    say(&format!(
        "wrote ops {start}..{end} (seed {seed}, GC {}, style {})",
        setup.gc,
        setup.style.name()
    ));
    Ok(())
}

/// What `verify` found.
struct Verified {
    /// Number of operations whose state the database holds; `write` continues here.
    resume_at: u64,
    /// Number of live keys.
    keys: usize,
}

fn describe(v: Option<&Vec<u8>>) -> String {
    match v {
        None => "absent".to_string(),
        Some(v) => {
            let head: String = v
                .iter()
                .take(40)
                .take_while(|b| **b != b'|')
                .map(|&b| b as char)
                .collect();
            format!("{} bytes \"{head}\"", v.len())
        }
    }
}

/// The first key where `found` and `expected` differ, described.
fn first_difference(
    found: &BTreeMap<Vec<u8>, Vec<u8>>,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Option<String> {
    let key = found
        .keys()
        .chain(expected.keys())
        .filter(|k| found.get(*k) != expected.get(*k))
        .min()?;
    Some(format!(
        "key {}: expected {}, found {}",
        String::from_utf8_lossy(key),
        describe(expected.get(key)),
        describe(found.get(key))
    ))
}

/// Checks the database against the replayed stream. It must hold exactly the state after the
/// acknowledged operations, or (when the kill came between submit and acknowledgement) after
/// the attempted one as well. When both states match (the attempted batch changed nothing
/// visible), resuming from either is correct; we take the later.
fn verify(dir: &Path, seed: u64, setup: &Setup) -> Res<Verified> {
    let (acked, attempted) = read_progress(dir)?;
    // The stream's time when it stopped: that of the last operation attempted, the latest the
    // writer's clock showed (it is set after the counter), so no later than the database ever
    // recorded.
    let now = time_at(attempted.saturating_sub(1));
    let mut state_acked = State::new();
    for n in 0..acked {
        apply(&mut state_acked, &operation(seed, n));
    }
    let mut state_attempted = state_acked.clone();
    if attempted > acked {
        apply(&mut state_attempted, &operation(seed, acked));
    }
    let (state_acked, state_attempted) =
        (visible(&state_acked, now), visible(&state_attempted, now));
    let db = open_db(dir, setup, &Arc::new(ManualClock::new(now)))?;
    let mut found = BTreeMap::new();
    for item in db
        .range(
            (Bound::<&[u8]>::Unbounded, Bound::<&[u8]>::Unbounded),
            &ReadOptions::default(),
        )
        .map_err(|e| Failure::Mismatch(format!("scan: {e}")))?
    {
        let (k, v) = item.map_err(|e| Failure::Mismatch(format!("scan: {e}")))?;
        if found.insert(k.clone(), v).is_some() {
            return Err(Failure::Mismatch(format!(
                "seed {seed}: scan returned key {} twice",
                String::from_utf8_lossy(&k)
            )));
        }
    }
    let (resume_at, expected) = if found == state_attempted {
        (attempted, &state_attempted)
    } else if found == state_acked {
        (acked, &state_acked)
    } else {
        let mut msg = format!(
            "seed {seed}, acked {acked}, attempted {attempted}: scan matches neither state; \
             against acked: {}",
            first_difference(&found, &state_acked).unwrap_or_default()
        );
        if attempted > acked {
            msg.push_str(&format!(
                "; against attempted: {}",
                first_difference(&found, &state_attempted).unwrap_or_default()
            ));
        }
        return Err(Failure::Mismatch(msg));
    };
    // Point reads take a different path (memtable, bloom filters, table search), so check
    // every key of the key space with `get` too; twice, the second pass answered from the
    // row cache the first filled, as far as it holds.
    for k in (0..KEY_SPACE).chain(0..KEY_SPACE) {
        let key = key_name(k);
        let got = db.get(&key).map_err(|e| {
            Failure::Mismatch(format!("get {}: {e}", String::from_utf8_lossy(&key)))
        })?;
        if got.as_ref() != expected.get(&key) {
            return Err(Failure::Mismatch(format!(
                "seed {seed}, state after {resume_at} ops: get of key {}: expected {}, found {}",
                String::from_utf8_lossy(&key),
                describe(expected.get(&key)),
                describe(got.as_ref())
            )));
        }
    }
    db.close()
        .map_err(|e| Failure::Mismatch(format!("close after verify: {e}")))?;
    Ok(Verified {
        resume_at,
        keys: found.len(),
    })
}

/// Prints one line of the tool's output. A failed write to stdout (a closed pipe) is ignored:
/// the exit status carries the result.
fn say(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

fn verify_cmd(dir: &Path, seed: u64, setup: &Setup) -> Res<()> {
    let v = verify(dir, seed, setup)?;
    say(&format!(
        "verified: state after {} ops, {} live keys (seed {seed})",
        v.resume_at, v.keys
    ));
    Ok(())
}

/// Waits for `child` at most `timeout`; on expiry kills it and fails, so a hung child cannot
/// hang the driver.
fn wait_bounded(child: &mut Child, what: &str, timeout: Duration) -> Res<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().map_err(tool("wait"))? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failure::Tool(format!(
                "{what} did not finish in {timeout:?}"
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// What `loop` runs.
struct LoopPlan {
    seed: u64,
    cycles: u64,
    min_ms: u64,
    max_ms: u64,
    /// A GC variant, or `all`.
    gc: String,
    /// A compaction style, or `alternate`.
    style: String,
    /// A `separate_at` setting, or `alternate`.
    separate_at: String,
}

impl LoopPlan {
    /// How cycle `cycle` (counted from 1) opens the database.
    fn setup(&self, cycle: u64) -> Setup {
        let gc = if self.gc == "all" {
            GC_VARIANTS[((cycle - 1) % GC_VARIANTS.len() as u64) as usize]
        } else {
            &self.gc
        };
        let style = if self.style == "alternate" {
            Style::Tree(
                CompactionStyle::ALL[((cycle - 1) % CompactionStyle::ALL.len() as u64) as usize],
            )
        } else {
            Style::parse(&self.style).unwrap_or(Style::Tree(CompactionStyle::default()))
        };
        let separate_at = if self.separate_at == "alternate" {
            SeparateAt::ALL[(((cycle - 1) / 2) % 2) as usize]
        } else {
            SeparateAt::parse_option(&self.separate_at).unwrap_or_default()
        };
        Setup {
            gc: gc.to_string(),
            style,
            separate_at,
        }
    }
}

fn loop_cmd(dir: &Path, plan: &LoopPlan) -> Res<()> {
    let LoopPlan {
        seed,
        cycles,
        min_ms,
        max_ms,
        ..
    } = *plan;
    if min_ms > max_ms {
        return Err(Failure::Tool("--min-ms is above --max-ms".to_string()));
    }
    fs::create_dir_all(dir).map_err(tool("create stress directory"))?;
    let exe = std::env::current_exe().map_err(tool("current_exe"))?;
    let began = Instant::now();
    let mut rng = Rng::new(&[seed, 0x100b]);
    let mut resume_at = verify(dir, seed, &plan.setup(1))?.resume_at;
    for cycle in 1..=cycles {
        let setup = plan.setup(cycle);
        let (gc, style) = (setup.gc.as_str(), setup.style.name());
        let separate_at = setup.separate_at.name();
        // Odd cycles add the churn thread, so kills land during compaction and GC as well as
        // during plain writes (which also trigger them, with these tiny tables).
        let churn = cycle % 2 == 1;
        let mut cmd = Command::new(&exe);
        cmd.arg("write")
            .arg("--dir")
            .arg(dir)
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--start")
            .arg(resume_at.to_string())
            .arg("--gc")
            .arg(gc)
            .arg("--style")
            .arg(style)
            .arg("--separate-at")
            .arg(separate_at)
            .stdout(Stdio::null());
        if churn {
            cmd.arg("--churn");
        }
        let mut child = cmd.spawn().map_err(tool("spawn write"))?;
        let delay = min_ms + rng.below(max_ms - min_ms + 1);
        thread::sleep(Duration::from_millis(delay));
        let exited_early = child.try_wait().map_err(tool("wait"))?;
        if let Some(status) = exited_early
            && !status.success()
        {
            return Err(Failure::Tool(format!(
                "cycle {cycle}: write exited by itself with {status} (seed {seed}, GC {gc}, \
                 style {style}, resumed at op {resume_at})"
            )));
        }
        // SIGKILL on Unix: no destructors, no close, exactly like a crash of the process.
        let _ = child.kill();
        wait_bounded(&mut child, "killed write", CHILD_TIMEOUT)?;
        // Verify in a separate process, bounded, so a hang in open or recovery is reported
        // instead of hanging the driver.
        let mut v = Command::new(&exe)
            .arg("verify")
            .arg("--dir")
            .arg(dir)
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--gc")
            .arg(gc)
            .arg("--style")
            .arg(style)
            .arg("--separate-at")
            .arg(separate_at)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(tool("spawn verify"))?;
        let status = wait_bounded(&mut v, "verify", CHILD_TIMEOUT)?;
        if !status.success() {
            return Err(Failure::Mismatch(format!(
                "cycle {cycle} (seed {seed}, GC {gc}, style {style}, separate_at \
                 {separate_at}, churn {churn}, killed after {delay} ms): verify exited with \
                 {status}; see its message above"
            )));
        }
        // The few bytes verify prints fit in the pipe buffer, so reading after exit is safe.
        let mut out = String::new();
        if let Some(mut s) = v.stdout.take() {
            std::io::Read::read_to_string(&mut s, &mut out).map_err(tool("read verify output"))?;
        }
        resume_at = out
            .strip_prefix("verified: state after ")
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| Failure::Tool(format!("unexpected verify output {out:?}")))?;
        let (acked, _) = read_progress(dir)?;
        say(&format!(
            "cycle {cycle}/{cycles} (GC {gc}, {style}): killed after {delay} ms{}, {acked} ops \
             acked, state after {resume_at} ops verified, values separated at {separate_at}",
            if churn { " (churn)" } else { "" }
        ));
    }
    say(&format!(
        "ok: {cycles} cycles, {resume_at} ops acked, 0 failures, {:.1} s (seed {seed}, GC {}, \
         style {})",
        began.elapsed().as_secs_f64(),
        plan.gc,
        plan.style
    ));
    Ok(())
}

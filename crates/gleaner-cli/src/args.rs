//! The command line, declared with clap's derive API.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Operate and inspect a Gleaner database.
///
/// Keys and values are UTF-8 text; with --hex every key and value, on input and output, is
/// hex-encoded (lower-case on output, either case on input), so any bytes work. Text output is
/// written as is: use --hex for data holding tabs, newlines or bytes that are not UTF-8.
///
/// `get`, `scan`, `stats`, `check` and `dump` only read: they change nothing in the directory
/// (writes still in the WAL are replayed in memory) and run side by side. `put`, `delete`,
/// `delete-range`, `load`, `compact` and `gc` write: while one runs, every other command but `dump` fails with
/// `locked`, and it fails while any other command but `dump` runs.
///
/// Exit status: 0 on success; 1 when `get` finds no value or `check` finds damage; 2 for every
/// error (the message is one line on stderr, prefixed `gleaner:`).
#[derive(Debug, Parser)]
#[command(name = "gleaner", version)]
pub struct Cli {
    /// Hex-encode every key and value on input and output.
    #[arg(long, global = true)]
    pub hex: bool,

    /// Set database option NAME to VALUE at open (repeatable), e.g. `--option
    /// memtable_size=4MiB`. Names are those of the OPTIONS file.
    #[arg(long = "option", value_name = "NAME=VALUE", global = true)]
    pub options: Vec<String>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands. Each takes the database directory first.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set KEY to VALUE (synced: durable when the command returns). Creates the database if
    /// it does not exist.
    Put(PutArgs),
    /// Print the value of KEY and a newline; exit status 1 and `not found` on stderr when
    /// there is none.
    Get(KeyArgs),
    /// Remove KEY (synced).
    Delete(KeyArgs),
    /// Remove every key from START (inclusive) to END (exclusive), in bytewise order, with one
    /// range tombstone (synced). START must sort before END.
    DeleteRange(RangeArgs),
    /// Print `KEY<TAB>VALUE` lines for a key range, in key order.
    Scan(ScanArgs),
    /// Apply operations read from stdin, one per line: `put<TAB>KEY<TAB>VALUE`,
    /// `putttl<TAB>KEY<TAB>VALUE<TAB>TTL_MS` (the key expires TTL_MS milliseconds after the line
    /// is read; 0 writes a value that reads as deleted, negative is an error), `del<TAB>KEY` or
    /// `delrange<TAB>START<TAB>END` (every key from START, inclusive, to END, exclusive; START
    /// must sort before END).
    ///
    /// Every --batch operations are committed as one atomic batch (earlier if the batch would
    /// exceed option `max_batch_size`), after which `committed N` is printed, N being the
    /// number of input lines consumed so far. A malformed line stops the load with an error
    /// naming its line number; its batch is not written, earlier batches are. Empty lines are
    /// skipped; a `\r` before the newline is ignored. Creates the database if it does not
    /// exist.
    Load(LoadArgs),
    /// Print a summary of the database's shape and of this invocation's activity (or all
    /// figures as JSON).
    Stats(StatsArgs),
    /// Compact the whole key space down the tree (flushing the memtable first).
    Compact(DirArgs),
    /// Run garbage collection until the GC policy finds no value table worth collecting, then
    /// print a one-line summary (or the figures as JSON).
    ///
    /// Garbage becomes visible to GC only when compaction drops the handles that referenced
    /// it: run `gleaner compact` first to collect what overwrites and deletes left behind.
    Gc(GcArgs),
    /// Verify every file of the database without modifying it.
    ///
    /// Prints one `FILE[@OFFSET]: DETAIL` line per problem on stdout and warnings on stderr.
    /// Exit status 0 when clean (warnings allowed), 1 when damage was found, 2 when the check
    /// could not run (e.g. a command that writes has the database open). Holds the lock shared,
    /// so it runs beside the other read commands.
    Check(DirArgs),
    /// Print one file of the database (a `.sst` key table, a `.vst` value table, a `.log` WAL,
    /// a MANIFEST, CURRENT or OPTIONS) in readable form.
    ///
    /// Reads that one file only, without opening the database or taking its lock, so it also
    /// works on a database open elsewhere.
    Dump(DumpArgs),
}

/// Just the database directory.
#[derive(Debug, Args)]
pub struct DirArgs {
    /// The database directory.
    pub dir: PathBuf,
}

/// A directory and a key.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// The key.
    #[arg(allow_hyphen_values = true)]
    pub key: String,
}

/// A directory and a key range.
#[derive(Debug, Args)]
pub struct RangeArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// First key of the range (inclusive).
    #[arg(allow_hyphen_values = true)]
    pub start: String,
    /// End of the range (exclusive).
    #[arg(allow_hyphen_values = true)]
    pub end: String,
}

/// Arguments of `put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// The key.
    #[arg(allow_hyphen_values = true)]
    pub key: String,
    /// The value.
    #[arg(allow_hyphen_values = true)]
    pub value: String,
    /// Expire the key this many milliseconds from now (by the system clock): reads then find
    /// it absent. 0 writes a value that reads as deleted; negative is an error.
    #[arg(long = "ttl-ms", value_name = "N", allow_hyphen_values = true)]
    pub ttl_ms: Option<i64>,
}

/// Arguments of `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// First key of the range (inclusive). Default: the first key.
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// End of the range (exclusive). Default: past the last key.
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Print at most N entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Walk the range from its end, in descending key order.
    #[arg(long)]
    pub reverse: bool,
    /// Print only the keys.
    #[arg(long)]
    pub keys_only: bool,
}

/// Arguments of `load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// Sync every committed batch to disk before reading on.
    #[arg(long)]
    pub sync: bool,
    /// Operations per committed batch.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
}

/// Arguments of `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// Print every figure as pretty-printed JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// Print what GC did as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// Name of the file inside the directory, e.g. `000012.sst`.
    pub file: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}

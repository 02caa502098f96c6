//! The subcommands, and what they share: options from `--option`, opening and closing the
//! database, and the exit status.

mod check;
mod compact;
mod dump;
mod gc;
mod get;
mod load;
mod scan;
mod stats;
mod write;

use std::io::{BufRead, Write};
use std::path::Path;

use gleaner::{Db, Options};

use crate::args::{Cli, Command};
use crate::codec::Codec;
use crate::error::{CliError, CliResult};

/// How a command that ran to completion ended; errors are [`CliError`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exit status 0.
    Success,
    /// `get` found no value: exit status 1.
    NotFound,
    /// `check` found damage: exit status 1.
    Damaged,
}

impl Status {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::NotFound | Status::Damaged => 1,
        }
    }
}

/// What every command gets from the global flags.
#[derive(Debug)]
pub struct Context {
    /// Text or hex keys and values.
    pub codec: Codec,
    /// `--option` settings in the order given.
    options: Vec<(String, String)>,
}

impl Context {
    /// Parses the global flags. Every `--option` is tried on a scratch [`Options`] right away,
    /// so a misspelt name fails before anything is opened, whatever the command.
    pub fn new(cli: &Cli) -> CliResult<Context> {
        let mut options = Vec::with_capacity(cli.options.len());
        let mut scratch = Options::default();
        for raw in &cli.options {
            let (name, value) = raw.split_once('=').ok_or_else(|| {
                CliError::Invalid(format!("--option expects NAME=VALUE, got `{raw}`"))
            })?;
            let (name, value) = (name.trim(), value.trim());
            scratch.set(name, value)?;
            options.push((name.to_string(), value.to_string()));
        }
        Ok(Context {
            codec: Codec::new(cli.hex),
            options,
        })
    }

    /// Options for opening: `create_if_missing` as the command wants it (commands that only
    /// read must not create a database where a path was mistyped), then every `--option`,
    /// which may override it.
    pub fn options(&self, create_if_missing: bool) -> CliResult<Options> {
        let mut opts = Options::default().with_create_if_missing(create_if_missing);
        for (name, value) in &self.options {
            opts.set(name, value)?;
        }
        Ok(opts)
    }

    /// Opens the database in `dir` read-write, runs `f` on it and closes it explicitly, so a
    /// failure to make the writes durable at close is reported rather than lost in a drop. An
    /// error of `f` wins over an error of the close (the close error is appended to its
    /// message). For the commands that write: `put`, `delete`, `load`, `compact`, `gc`.
    pub fn with_db<T>(
        &self,
        dir: &Path,
        create_if_missing: bool,
        f: impl FnOnce(&Db) -> CliResult<T>,
    ) -> CliResult<T> {
        let db = Db::open(dir, self.options(create_if_missing)?)?;
        run_and_close(db, f)
    }

    /// Opens the existing database in `dir` read-only ([`Db::open_read_only`]: the WAL is
    /// replayed in memory, nothing on disk changes, no background work runs, and the LOCK is
    /// held shared, so read commands run beside each other but not beside a writer), runs `f`
    /// on it and closes it. For `get`, `scan` and `stats`.
    pub fn with_read_only_db<T>(
        &self,
        dir: &Path,
        f: impl FnOnce(&Db) -> CliResult<T>,
    ) -> CliResult<T> {
        let db = Db::open_read_only(dir, self.options(false)?)?;
        run_and_close(db, f)
    }

    /// Decodes a key given on the command line.
    pub fn key(&self, text: &str) -> CliResult<Vec<u8>> {
        self.decode("key", text)
    }

    /// Decodes a key or value (`what`) given on the command line.
    pub fn decode(&self, what: &str, text: &str) -> CliResult<Vec<u8>> {
        self.codec
            .decode(what, text)
            .map(|b| b.into_owned())
            .map_err(CliError::Invalid)
    }
}

/// Runs `f` on `db` and closes it; an error of `f` wins over an error of the close (the close
/// error is appended to its message).
fn run_and_close<T>(db: Db, f: impl FnOnce(&Db) -> CliResult<T>) -> CliResult<T> {
    let result = f(&db);
    let closed = db.close();
    match (result, closed) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(CliError::Close(e)),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(close)) => Err(CliError::Invalid(format!(
            "{e} (closing the database also failed: {close})"
        ))),
    }
}

/// Runs the parsed command line: stdin feeds `load`, results go to `out`, warnings to stderr.
pub fn run(cli: &Cli, input: &mut dyn BufRead, out: &mut dyn Write) -> CliResult<Status> {
    let ctx = Context::new(cli)?;
    match &cli.command {
        Command::Put(a) => write::put(&ctx, a),
        Command::Get(a) => get::run(&ctx, a, out),
        Command::Delete(a) => write::delete(&ctx, a),
        Command::DeleteRange(a) => write::delete_range(&ctx, a),
        Command::Scan(a) => scan::run(&ctx, a, out),
        Command::Load(a) => load::run(&ctx, a, input, out),
        Command::Stats(a) => stats::run(&ctx, a, out),
        Command::Compact(a) => compact::run(&ctx, a),
        Command::Gc(a) => gc::run(&ctx, a, out),
        Command::Check(a) => check::run(&ctx, a, out),
        Command::Dump(a) => dump::run(&ctx, a, out),
    }
}

//! The error every command reports: one line on stderr, exit status 2.

use std::fmt;
use std::io;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The database refused or failed.
    Db(gleaner::Error),
    /// Bad input (an argument, an option, a line of `load`), explained.
    Invalid(String),
    /// Writing to stdout failed.
    Output(io::Error),
    /// Reading stdin failed.
    Input(io::Error),
    /// Closing the database failed after the command itself succeeded (its output may
    /// already be printed, but acknowledged writes may not be durable).
    Close(gleaner::Error),
}

impl CliError {
    /// True when the failure is stdout's reader going away (`gleaner scan ... | head`), which
    /// commands that only print treat as a reason to stop quietly.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            CliError::Output(e) => e.kind() == io::ErrorKind::BrokenPipe,
            CliError::Db(e) => e.io_kind() == Some(io::ErrorKind::BrokenPipe),
            _ => false,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Db(e) => write!(f, "{e}"),
            CliError::Invalid(msg) => write!(f, "{msg}"),
            CliError::Output(e) => write!(f, "writing output: {e}"),
            CliError::Input(e) => write!(f, "reading standard input: {e}"),
            CliError::Close(e) => write!(f, "closing the database: {e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl From<gleaner::Error> for CliError {
    fn from(e: gleaner::Error) -> Self {
        CliError::Db(e)
    }
}

/// Result of a command.
pub type CliResult<T> = Result<T, CliError>;

/// Converts a write to stdout's result.
pub fn output<T>(r: io::Result<T>) -> CliResult<T> {
    r.map_err(CliError::Output)
}

/// Treats a closed stdout as the end of a printing command's work.
pub fn stop_quietly_on_broken_pipe(r: CliResult<()>) -> CliResult<()> {
    match r {
        Err(e) if e.is_broken_pipe() => Ok(()),
        other => other,
    }
}

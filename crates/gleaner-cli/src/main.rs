//! The `gleaner` command: operate and inspect a Gleaner database from the shell.
//!
//! Every error ends the process with exit status 2 and one line `gleaner: <error>` on stderr;
//! `get` of an absent key and `check` of a damaged database exit with 1. Failures of the
//! engine's background work while a command runs (a GC job or compaction that failed and is
//! retried, the database turning read-only) come before it as `gleaner: warning: ...` and
//! `gleaner: error: ...` lines. See `gleaner --help`.

mod args;
mod codec;
mod commands;
mod error;

use std::io::{self, BufWriter};
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;

use crate::args::Cli;
use crate::commands::Status;

fn main() -> ExitCode {
    // Background failures of the engine while a command runs (a failed GC job or compaction
    // during `load`, say): the command's own error, if any, is still its last line.
    gleaner::logging::StderrLogger::install("gleaner", log::LevelFilter::Info);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let mut out = BufWriter::new(io::stdout().lock());
    match commands::run(&cli, &mut input, &mut out) {
        Ok(status) => {
            if status == Status::NotFound {
                eprintln!("not found");
            }
            ExitCode::from(status.code())
        }
        Err(e) => {
            eprintln!("gleaner: {e}");
            ExitCode::from(2)
        }
    }
}

/// Help and version go to stdout with status 0; a usage error becomes the one-line message
/// every other error gets, with status 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        // Nothing sensible is left to do when printing help fails.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let message = match e.kind() {
        // Clap renders the whole help here; the one-line rule still applies.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => "no command given".to_string(),
        _ => one_line(&e.to_string()),
    };
    eprintln!("gleaner: {message} (see `gleaner --help`)");
    ExitCode::from(2)
}

/// Clap's message without the `error:` prefix, tips, usage and pointers to help, on one line: the part before
/// the usage section, with its lines joined.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| {
            !l.is_empty() && !l.starts_with("tip:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn usage_errors_fold_to_one_line() {
        let rendered = "error: the following required arguments were not provided:\n  <KEY>\n\n\
                        Usage: gleaner get <DIR> <KEY>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "the following required arguments were not provided: <KEY>"
        );
        let rendered = "error: invalid value 'x' for '--limit <N>': invalid digit\n\n\
                        For more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "invalid value 'x' for '--limit <N>': invalid digit"
        );
        let rendered = "error: unexpected argument '--x' found\n\n  tip: to pass '--x' as a value, \
                        use '-- --x'\n\nUsage: gleaner get <DIR> <KEY>\n";
        assert_eq!(one_line(rendered), "unexpected argument '--x' found");
    }
}

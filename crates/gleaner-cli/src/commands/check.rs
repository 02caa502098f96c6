//! `check`: offline verification, with the exit status saying whether damage was found.

use std::io::Write;

use gleaner::tools::check_db;

use super::{Context, Status};
use crate::args::DirArgs;
use crate::error::{CliResult, output};

/// `gleaner check DIR`: problems on `out` (one `FILE[@OFFSET]: DETAIL` line each), warnings and
/// the summary on stderr, so stdout carries only what a script needs to act on.
pub fn run(ctx: &Context, args: &DirArgs, out: &mut dyn Write) -> CliResult<Status> {
    let report = check_db(&args.dir, &ctx.options(false)?)?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for p in &report.problems {
        output(writeln!(out, "{p}"))?;
    }
    output(out.flush())?;
    let counts = format!(
        "{} key tables ({} entries, {} value handles, {} of them of shadowed versions GC already \
         reclaimed), {} value tables ({} records) and {} WAL records checked",
        report.tables_checked,
        report.entries_checked,
        report.handles_checked,
        report.handles_reclaimed_early,
        report.value_tables_checked,
        report.records_checked,
        report.wal_records_checked
    );
    if report.is_clean() {
        eprintln!("ok: {counts}");
        Ok(Status::Success)
    } else {
        eprintln!(
            "gleaner: found {} problem(s); {counts}",
            report.problems.len()
        );
        Ok(Status::Damaged)
    }
}

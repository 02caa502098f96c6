//! `gc`: garbage collection run to quiescence, with a summary of what it did.

use std::io::Write;

use gleaner::GcRunStats;
use serde::Serialize;

use super::{Context, Status};
use crate::args::GcArgs;
use crate::error::{CliError, CliResult, output, stop_quietly_on_broken_pipe};

/// What `gleaner gc --json` prints: the fields of [`GcRunStats`] and its totals, flattened
/// (the library type is not serializable, and a flat object is easier for scripts). The names
/// follow `gc` in `gleaner stats --json` where they mean the same thing.
#[derive(Debug, Serialize)]
struct GcRunJson {
    /// Jobs run.
    jobs: u64,
    /// Value tables collected.
    victims: u64,
    /// Records read from victims.
    records_read: u64,
    /// Records dropped as garbage.
    records_dropped: u64,
    /// Records copied to new tables.
    records_written: u64,
    /// Bytes of records read.
    bytes_read: u64,
    /// Bytes of value tables written.
    bytes_written: u64,
    /// Microseconds reading victims.
    read_micros: u64,
    /// Microseconds checking validity.
    lookup_micros: u64,
    /// Microseconds writing outputs.
    write_micros: u64,
}

impl From<&GcRunStats> for GcRunJson {
    fn from(r: &GcRunStats) -> Self {
        let t = &r.totals;
        GcRunJson {
            jobs: r.jobs,
            victims: t.victims,
            records_read: t.records_read,
            records_dropped: t.records_dropped,
            records_written: t.records_written,
            bytes_read: t.bytes_read,
            bytes_written: t.bytes_written,
            read_micros: t.read_micros,
            lookup_micros: t.lookup_micros,
            write_micros: t.write_micros,
        }
    }
}

/// The one-line summary.
fn summary(r: &GcRunStats) -> String {
    let t = &r.totals;
    format!(
        "gc: {} jobs, {} victims, {} records read, {} dropped, {} written, {} bytes written\n",
        r.jobs, t.victims, t.records_read, t.records_dropped, t.records_written, t.bytes_written
    )
}

/// `gleaner gc DIR [--json]`.
pub fn run(ctx: &Context, args: &GcArgs, out: &mut dyn Write) -> CliResult<Status> {
    let stats = ctx.with_db(&args.dir, false, |db| Ok(db.run_gc()?))?;
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&GcRunJson::from(&stats))
            .map_err(|e| CliError::Invalid(format!("rendering GC figures as JSON: {e}")))?;
        json.push('\n');
        json
    } else {
        summary(&stats)
    };
    stop_quietly_on_broken_pipe(output(
        out.write_all(text.as_bytes()).and_then(|()| out.flush()),
    ))?;
    Ok(Status::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_json_carry_every_figure() {
        let r = GcRunStats {
            jobs: 2,
            totals: gleaner::gc::GcJobStats {
                victims: 3,
                records_read: 40,
                records_dropped: 10,
                records_written: 30,
                bytes_written: 4096,
                ..Default::default()
            },
        };
        assert_eq!(
            summary(&r),
            "gc: 2 jobs, 3 victims, 40 records read, 10 dropped, 30 written, 4096 bytes written\n"
        );
        let v = serde_json::to_value(GcRunJson::from(&r)).expect("json");
        assert_eq!(v["jobs"], 2);
        assert_eq!(v["records_dropped"], 10);
        assert_eq!(v["bytes_written"], 4096);
    }
}

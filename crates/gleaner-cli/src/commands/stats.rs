//! `stats`: the engine's figures, as a summary or as JSON.

use std::io::Write;

use gleaner::DbStats;

use super::{Context, Status};
use crate::args::StatsArgs;
use crate::error::{CliError, CliResult, output, stop_quietly_on_broken_pipe};

/// `gleaner stats DIR [--json]`. The shape (levels, tables) is the database's; the activity
/// counters cover this invocation, which includes the open and its recovery.
pub fn run(ctx: &Context, args: &StatsArgs, out: &mut dyn Write) -> CliResult<Status> {
    let stats = ctx.with_db(&args.dir, false, |db| Ok(db.stats()))?;
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&stats)
            .map_err(|e| CliError::Invalid(format!("rendering stats as JSON: {e}")))?;
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

/// `n` bytes in binary units with one decimal (`512 B`, `1.5 KiB`).
fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Microseconds as milliseconds.
fn ms(micros: u64) -> String {
    format!("{} ms", micros / 1000)
}

/// The human-readable summary: one topic per line, levels and I/O classes indented below
/// their heading.
fn summary(s: &DbStats) -> String {
    let mut lines = vec!["levels:".to_string()];
    for l in &s.levels {
        lines.push(format!(
            "  L{}: {} files, {}, score {:.2}",
            l.level,
            l.files,
            bytes(l.bytes),
            l.score
        ));
    }
    lines.push(format!(
        "key tables: {} in total",
        bytes(s.total_table_bytes)
    ));
    lines.push(format!(
        "memtable: {} active; {} immutable ({})",
        bytes(s.memtable_bytes),
        s.immutable_memtables,
        bytes(s.immutable_memtable_bytes)
    ));
    lines.push(format!(
        "last sequence: {}; snapshots: {}",
        s.last_sequence, s.snapshots
    ));
    lines.push("io (read / written):".to_string());
    for (class, c) in &s.io {
        lines.push(format!(
            "  {class}: {} in {} reads / {} in {} writes",
            bytes(c.read_bytes),
            c.read_ops,
            bytes(c.write_bytes),
            c.write_ops
        ));
    }
    let o = &s.operations;
    lines.push(format!(
        "operations: {} batches in {} write groups, {} WAL syncs, {} written by users, {} gets",
        o.batches,
        o.write_groups,
        o.wal_syncs,
        bytes(o.user_bytes_written),
        o.gets
    ));
    let c = &s.compaction;
    lines.push(format!(
        "flushes: {} ({} written, {})",
        c.flushes,
        bytes(c.flush_bytes),
        ms(c.flush_micros)
    ));
    lines.push(format!(
        "compactions: {} ({} manual), {} trivial moves, {} read, {} written, {}; dropped {} \
         shadowed entries and {} tombstones; {} tables deleted; {} running",
        c.compactions,
        c.manual_compactions,
        c.trivial_moves,
        bytes(c.bytes_read),
        bytes(c.bytes_written),
        ms(c.micros),
        c.dropped_shadowed,
        c.dropped_tombstones,
        c.tables_deleted,
        c.running
    ));
    let st = &s.stalls;
    lines.push(format!(
        "stalls: {} slowdowns ({}), {} stops ({})",
        st.slowdown_count,
        ms(st.slowdown_micros),
        st.stop_count,
        ms(st.stop_micros)
    ));
    let ca = &s.cache;
    lines.push(format!(
        "block cache: {} of {} used, {} hits, {} misses; {} open tables",
        bytes(ca.usage_bytes),
        bytes(ca.capacity_bytes),
        ca.hits,
        ca.misses,
        ca.open_tables
    ));
    lines.push(format!(
        "recovery: {} WAL records replayed, {} dropped",
        s.recovery.wal_records,
        bytes(s.recovery.wal_dropped_bytes)
    ));
    lines.push(format!(
        "background error: {}",
        s.background_error.as_deref().unwrap_or("none")
    ));
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_read_naturally() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(64 << 20), "64.0 MiB");
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn summary_covers_every_topic() {
        let text = summary(&DbStats::default());
        for topic in [
            "levels:",
            "memtable:",
            "io (",
            "operations:",
            "flushes:",
            "compactions:",
            "stalls:",
            "block cache:",
            "recovery:",
        ] {
            assert!(text.contains(topic), "{topic} missing from {text}");
        }
    }
}

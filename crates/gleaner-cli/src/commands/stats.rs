//! `stats`: the engine's figures, as a summary or as JSON.

use std::io::Write;

use gleaner::DbStats;

use super::{Context, Status};
use crate::args::StatsArgs;
use crate::error::{CliError, CliResult, output, stop_quietly_on_broken_pipe};

/// `gleaner stats DIR [--json]`. The shape (levels, tables) is the database's; the activity
/// counters cover this invocation, which includes the open and its recovery.
pub fn run(ctx: &Context, args: &StatsArgs, out: &mut dyn Write) -> CliResult<Status> {
    let stats = ctx.with_read_only_db(&args.dir, |db| Ok(db.stats()))?;
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
    let mut lines = vec![format!("levels ({} compaction):", s.compaction.style)];
    for l in &s.levels {
        // L0's tables are a run each; deeper, the runs say whether tiering overlaps them.
        let runs = if l.level == 0 || l.runs <= 1 {
            String::new()
        } else {
            format!(" in {} runs", l.runs)
        };
        lines.push(format!(
            "  L{}: {} files{runs}, {}, score {:.2}",
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
        "stalls: {} slowdowns ({}), {} stops ({}, of which {} with L0 at its stop trigger)",
        st.slowdown_count,
        ms(st.slowdown_micros),
        st.stop_count,
        ms(st.stop_micros),
        ms(st.stop_l0_micros)
    ));
    let ca = &s.cache;
    lines.push(format!(
        "block cache: {} of {} used, {} hits, {} misses; {} open key tables, {} open value \
         tables; {} table opens, {} of which read metadata ({} retained)",
        bytes(ca.usage_bytes),
        bytes(ca.capacity_bytes),
        ca.hits,
        ca.misses,
        ca.open_tables,
        ca.open_value_tables,
        ca.table_opens,
        ca.table_metadata_reads,
        bytes(ca.retained_metadata_bytes)
    ));
    lines.push(format!(
        "recovery: {} WAL records replayed, {} dropped",
        s.recovery.wal_records,
        bytes(s.recovery.wal_dropped_bytes)
    ));
    values(s, &mut lines);
    gc(s, &mut lines);
    let sp = &s.space;
    lines.push(format!(
        "space: {} on disk, {} live data (estimate), space amplification {:.2}",
        bytes(sp.disk_bytes),
        bytes(sp.live_data_estimate),
        sp.space_amplification
    ));
    lines.push(format!(
        "background error: {}",
        s.background_error.as_deref().unwrap_or("none")
    ));
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// `part ÷ whole` as a percentage with one decimal (0 when `whole` is 0).
fn percent(part: u64, whole: u64) -> String {
    let p = if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    };
    format!("{p:.1}%")
}

/// The value-table section: totals, then one line per live table.
fn values(s: &DbStats, lines: &mut Vec<String>) {
    let v = &s.values;
    lines.push(format!(
        "value tables: {} ({} on disk), {} records in {}",
        v.tables,
        bytes(v.file_bytes),
        v.records,
        bytes(v.record_bytes)
    ));
    lines.push(format!(
        "  garbage: {} in {} records ({} of record bytes)",
        bytes(v.garbage_bytes),
        v.garbage_records,
        percent(v.garbage_bytes, v.record_bytes)
    ));
    lines.push(format!(
        "  inheritance records: {}; handles rewritten: {}; tables freed without GC: {}; \
         drops reclaimed early: {}; unresolved drops: {}",
        v.inheritance_records,
        v.handles_rewritten,
        v.tables_freed_without_gc,
        v.drops_reclaimed_early,
        v.unresolved_drops
    ));
    for t in &v.per_table {
        lines.push(format!(
            "  {:06}.vst: {}, {} records, {} garbage, class {}",
            t.number,
            bytes(t.file_bytes),
            t.records,
            percent(t.garbage_bytes, t.record_bytes),
            t.class
        ));
    }
}

/// The GC section: what the jobs since the open did, and the time per phase.
fn gc(s: &DbStats, lines: &mut Vec<String>) {
    let g = &s.gc;
    lines.push(format!(
        "gc: policy {}; {} jobs ({} failed), {} victims, {} being collected now",
        if g.policy.is_empty() { "-" } else { &g.policy },
        g.jobs,
        g.errors,
        g.victims,
        g.claimed
    ));
    lines.push(format!(
        "  records: {} read, {} dropped, {} written",
        g.records_read, g.records_dropped, g.records_written
    ));
    lines.push(format!(
        "  bytes: {} value reads, {} lookup reads, {} written",
        bytes(g.value_bytes_read),
        bytes(g.lookup_bytes_read),
        bytes(g.bytes_written)
    ));
    lines.push(format!(
        "  time: read {}, lookup {}, write {}; jobs {} in all, {} waiting for compactions",
        ms(g.read_micros),
        ms(g.lookup_micros),
        ms(g.write_micros),
        ms(g.job_micros),
        ms(g.compaction_wait_micros)
    ));
    if s.values.drop_keys_written > 0 {
        lines.push(format!(
            "  drop keys: {} written ({}), {} drop files live",
            s.values.drop_keys_written,
            bytes(s.values.drop_key_bytes_written),
            s.values.drop_files,
        ));
    }
    if !g.policy_stats.is_empty() {
        let own: Vec<String> = g
            .policy_stats
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        lines.push(format!("  {}: {}", g.policy, own.join(", ")));
    }
    if g.policy_files_damaged > 0 {
        lines.push(format!(
            "  policy files damaged (read as absent): {}",
            g.policy_files_damaged
        ));
    }
    let o = &s.operations;
    if o.handle_updates_written + o.handle_updates_skipped + o.handle_updates_dropped > 0 {
        lines.push(format!(
            "  handle updates on read: {} written, {} skipped (a newer write won), {} dropped",
            o.handle_updates_written, o.handle_updates_skipped, o.handle_updates_dropped
        ));
    }
    if let Some(e) = &g.last_error {
        lines.push(format!("  last error: {e}"));
    }
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
    fn value_tables_get_a_line_each() {
        let mut s = DbStats::default();
        s.values.tables = 1;
        s.values.record_bytes = 1000;
        s.values.garbage_bytes = 250;
        s.values.per_table.push(gleaner::stats::ValueTableStats {
            number: 12,
            file_bytes: 2048,
            records: 10,
            record_bytes: 1000,
            garbage_records: 2,
            garbage_bytes: 250,
            class: 0,
            drop_keys: 0,
        });
        s.gc.last_error = Some("disk on fire".into());
        let text = summary(&s);
        assert!(
            text.contains("  garbage: 250 B in 0 records (25.0% of record bytes)\n"),
            "{text}"
        );
        assert!(
            text.contains("  000012.vst: 2.0 KiB, 10 records, 25.0% garbage, class 0\n"),
            "{text}"
        );
        assert!(text.contains("  last error: disk on fire\n"), "{text}");
        assert_eq!(percent(1, 0), "0.0%");
    }

    #[test]
    fn levels_show_the_style_and_several_runs() {
        let mut s = DbStats::default();
        s.compaction.style = "tiered".into();
        for (level, files, runs) in [(0, 2, 2), (1, 0, 0), (2, 5, 1), (3, 7, 3)] {
            s.levels.push(gleaner::stats::LevelStats {
                level,
                files,
                runs,
                ..Default::default()
            });
        }
        let text = summary(&s);
        assert!(text.starts_with("levels (tiered compaction):\n"), "{text}");
        for line in [
            "  L0: 2 files, 0 B,",
            "  L1: 0 files, 0 B,",
            "  L2: 5 files, 0 B,",
            "  L3: 7 files in 3 runs, 0 B,",
        ] {
            assert!(text.contains(line), "{line} missing from {text}");
        }
    }

    #[test]
    fn summary_covers_every_topic() {
        let text = summary(&DbStats::default());
        for topic in [
            "levels (",
            "memtable:",
            "io (",
            "operations:",
            "flushes:",
            "compactions:",
            "stalls:",
            "block cache:",
            "recovery:",
            "value tables:",
            "gc: policy",
            "space:",
        ] {
            assert!(text.contains(topic), "{topic} missing from {text}");
        }
    }
}

//! `report.md`: the run's context, then one table per phase with the engines side by side, the
//! way the Scavenger paper compares engines per phase (throughput, I/O, amplification, GC).

use std::collections::BTreeMap;

use super::format::{self, NONE};
use super::plots::PLOTS;
use super::select::{PhaseKey, Reference};
use crate::results::{
    DeleteRangeFigures, EngineResult, GcFigures, OpFigures, PhaseResult, Results, TreeShape,
    WorkloadInfo,
};

/// Renders the report. Pure and deterministic: the same `Results` always gives the same text,
/// so a rebuilt `report.md` only changes in git when the results do.
pub fn markdown(results: &Results) -> String {
    let mut out = Out::default();
    header(&mut out, results);
    if results.engines.is_empty() {
        out.line("No engines were run.");
        return out.0;
    }
    engines(&mut out, results);
    summary(&mut out, results);
    for key in results.phase_keys() {
        phase_table(&mut out, results, key);
    }
    plots(&mut out);
    errors(&mut out, results);
    out.0
}

#[derive(Default)]
struct Out(String);

impl Out {
    fn line(&mut self, text: &str) {
        self.0.push_str(text);
        self.0.push('\n');
    }

    fn blank(&mut self) {
        self.0.push('\n');
    }

    fn item(&mut self, label: &str, value: &str) {
        self.line(&format!("- {label}: {value}"));
    }

    fn row(&mut self, cells: &[String]) {
        self.line(&format!("| {} |", cells.join(" | ")));
    }
}

fn header(out: &mut Out, r: &Results) {
    let m = &r.machine;
    let w = &r.workload;
    out.line("# Benchmark report");
    out.blank();
    out.line(&format!("Command: {}", code(&r.command)));
    out.blank();
    out.line("## Machine");
    out.blank();
    out.item("Host", &format::cell(&m.hostname));
    out.item("CPUs", &m.cpus.to_string());
    out.item("Memory", &format::bytes(m.memory_bytes));
    out.item("Kernel", &format::cell(&m.kernel));
    out.item("Started", &format::utc(m.started_unix));
    out.blank();
    out.line("## Workload");
    out.blank();
    out.item("Key size", &format!("{} B", w.key_size));
    out.item("Value size", &code(&w.value_size));
    out.item("Key distribution", &code(&w.dist));
    out.item("Keys", &format::thousands(w.keys));
    out.item("Dataset (bytes loaded)", &format::bytes(w.load_bytes));
    out.item("Update bytes", &format::bytes(w.update_bytes));
    out.item("Phases", &w.phases.join(", "));
    out.item("Threads", &w.threads.to_string());
    out.item("Cache", &format::bytes(w.cache_bytes));
    if w.memtable_bytes > 0 {
        out.item(
            "Memtable / table / value file",
            &format!(
                "{} / {} / {}",
                format::bytes(w.memtable_bytes),
                format::bytes(w.table_bytes),
                format::bytes(w.value_file_bytes)
            ),
        );
    }
    out.item("Shape", &shape_text(w));
    for (family, sizes) in &w.engine_sizes {
        let list: Vec<String> = sizes
            .iter()
            .map(|(option, bytes)| format!("{} {}", code(option), format::bytes(*bytes)))
            .collect();
        out.item(&format!("Sizes for {}", code(family)), &list.join(", "));
    }
    out.item("Direct I/O", if w.direct_io { "yes" } else { "no" });
    out.item("Compression", &code(&w.compression));
    let budget = match (w.space_budget, w.budget_bytes()) {
        (Some(multiple), Some(bytes)) => format!(
            "{} dataset ({})",
            format::ratio(multiple),
            format::bytes(bytes)
        ),
        _ => "none".to_string(),
    };
    out.item("Space budget", &budget);
    out.item("Compressible fraction", &format::fixed(w.compressible, 2));
    out.item("Seed", &w.seed.to_string());
    out.blank();
}

/// The `--shape` line: the name and what it means for this dataset.
fn shape_text(w: &WorkloadInfo) -> String {
    match w.shape.as_str() {
        "paper" => {
            let f = w.load_bytes as f64 / crate::shape::PAPER_DATASET_BYTES as f64;
            // Four decimals from 1 % of the paper's dataset up; three digits below.
            let f = if f >= 0.01 {
                format::fixed(f, 4)
            } else {
                format!("{f:.2e}")
            };
            format!(
                "`paper`: the Scavenger paper's sizes (64 MiB memtable and tables, 256 MiB level base and value files) × dataset ÷ 100 GB = × {f}, floored"
            )
        }
        "absolute" => "`absolute`: memtable, table and value-file sizes follow the dataset up to \
             the papers' 64 / 64 / 256 MiB; level base and GC job size the engines' own"
            .to_string(),
        other => code(other),
    }
}

/// A tree's non-empty levels and their files: `L0 2, L1 5, L2 40` (`0` for an empty tree).
/// `clients 12.3, gc 8.0, ...`: CPU seconds by thread role, most first (`—` when unknown).
fn cpu_by_role(cpu: &BTreeMap<String, f64>) -> String {
    if cpu.is_empty() {
        return NONE.to_string();
    }
    let mut roles: Vec<(&String, &f64)> = cpu.iter().collect();
    roles.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    roles
        .iter()
        .map(|(role, s)| format!("{role} {}", format::fixed(**s, 1)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn files_per_level(tree: &TreeShape) -> String {
    let cells: Vec<String> = tree
        .levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.files > 0)
        .map(|(i, l)| format!("L{i} {}", format::thousands(l.files)))
        .collect();
    if cells.is_empty() {
        "0".to_string()
    } else {
        cells.join(", ")
    }
}

fn engines(out: &mut Out, r: &Results) {
    out.line("## Engines");
    out.blank();
    out.line("| # | engine | kind | status |");
    out.line("|---:|---|---|---|");
    for (i, e) in r.engines.iter().enumerate() {
        let status = if e.error.is_some() {
            "failed (see Errors)"
        } else {
            "ok"
        };
        out.row(&[
            (i + 1).to_string(),
            code(&e.name),
            format::cell(&e.kind),
            status.to_string(),
        ]);
    }
    out.blank();
    if let Some(reference) = r.reference() {
        let name = code(&r.engines[reference.index].name);
        if r.engines.len() < 2 {
            out.line("One engine only: no ratios.");
        } else if reference.is_peer {
            out.line(&format!(
                "Ratios (`× ref`) are against {name}, the first peer engine."
            ));
        } else {
            out.line(&format!(
                "No peer engine in this run: ratios (`× ref`) are against the first engine, {name}."
            ));
        }
        out.blank();
    }
}

/// Throughput per phase at a glance (the paper's Figure 12a), before the detailed tables.
fn summary(out: &mut Out, r: &Results) {
    out.line("## Throughput (ops/s)");
    out.blank();
    table_header(out, "phase", &r.engines);
    for key in r.phase_keys() {
        let mut cells = vec![phase_title(key)];
        cells.extend(r.engines.iter().map(|e| match e.phase(key) {
            None => NONE.to_string(),
            Some(p) if p.skipped.is_some() => "skipped".to_string(),
            Some(p) => format::fixed(p.ops_per_sec, 0),
        }));
        out.row(&cells);
    }
    out.blank();
}

fn phase_title(key: PhaseKey<'_>) -> String {
    if key.occurrence == 0 {
        code(key.name)
    } else {
        format!("{} (run {})", code(key.name), key.occurrence + 1)
    }
}

fn table_header(out: &mut Out, first: &str, engines: &[EngineResult]) {
    let mut cells = vec![first.to_string()];
    cells.extend(engines.iter().map(|e| code(&e.name)));
    out.row(&cells);
    // Figures are right-aligned so digits line up across engines.
    out.line(&format!("|---|{}", "---:|".repeat(engines.len())));
}

/// The rows of one phase table: one cell per engine, `—` where the engine has no such phase or
/// skipped it (the `status` row then says why).
struct Table<'a> {
    phases: Vec<Option<&'a PhaseResult>>,
    reference: Option<Reference>,
    rows: Vec<Vec<String>>,
}

impl<'a> Table<'a> {
    /// The engine's phase at `index` if it ran: a skipped phase's figures are zeros that mean
    /// nothing, so they are neither shown nor compared.
    fn ran(&self, index: usize) -> Option<&'a PhaseResult> {
        self.phases
            .get(index)
            .copied()
            .flatten()
            .filter(|p| p.skipped.is_none())
    }

    /// A row showing one figure of every engine's phase.
    fn figure(&mut self, label: &str, show: impl Fn(&PhaseResult) -> String) {
        let mut cells = vec![label.to_string()];
        cells.extend((0..self.phases.len()).map(|i| self.ran(i).map_or(NONE.to_string(), &show)));
        self.rows.push(cells);
    }

    /// A `status` row (`ran`, or `skipped: ` and why) when some engine skipped the phase.
    fn status(&mut self) {
        if !self.any(|p| p.skipped.is_some()) {
            return;
        }
        let mut cells = vec!["status".to_string()];
        cells.extend(self.phases.iter().map(|p| match p {
            None => NONE.to_string(),
            Some(p) => p.skipped.as_deref().map_or("ran".to_string(), |why| {
                format!("skipped: {}", format::cell(why))
            }),
        }));
        self.rows.push(cells);
    }

    /// A `× ref` row: each engine's figure divided by the reference engine's; the reference's
    /// own cell says `ref`. Omitted when there is nothing to compare (one engine).
    fn ratio(&mut self, label: &str, figure: impl Fn(&PhaseResult) -> f64) {
        let Some(reference) = self.reference else {
            return;
        };
        let ref_value = self.ran(reference.index).map(&figure);
        let mut cells = vec![label.to_string()];
        for i in 0..self.phases.len() {
            cells.push(if i == reference.index {
                "ref".to_string()
            } else {
                format::ratio_of(self.ran(i).map(&figure), ref_value)
            });
        }
        self.rows.push(cells);
    }

    /// Whether any engine's phase has `test` true: optional rows appear only then.
    fn any(&self, test: impl Fn(&PhaseResult) -> bool) -> bool {
        self.phases.iter().flatten().any(|p| test(p))
    }
}

fn phase_table(out: &mut Out, r: &Results, key: PhaseKey<'_>) {
    let mut t = Table {
        phases: r.engines.iter().map(|e| e.phase(key)).collect(),
        reference: r.reference().filter(|_| r.engines.len() > 1),
        rows: Vec::new(),
    };
    t.status();
    t.figure("operations", |p| format::thousands(p.ops));
    t.figure("seconds", |p| format::fixed(p.seconds, 1));
    t.figure("ops/s", |p| format::fixed(p.ops_per_sec, 0));
    t.ratio("ops/s × ref", |p| p.ops_per_sec);
    t.figure("MB/s", |p| format::fixed(p.mb_per_sec, 1));
    t.figure("latency p50 (µs)", |p| format::fixed(p.latency_us.p50, 1));
    t.figure("latency p99 (µs)", |p| format::fixed(p.latency_us.p99, 1));
    t.figure("latency p99.9 (µs)", |p| {
        format::fixed(p.latency_us.p999, 1)
    });
    t.figure("latency max (µs)", |p| format::fixed(p.latency_us.max, 1));
    // Each kind of operation of a phase that mixes several (mixgraph's gets, puts and seeks;
    // YCSB's), since one slow kind hides in the phase's percentiles.
    let kinds: std::collections::BTreeSet<String> = t
        .phases
        .iter()
        .flatten()
        .flat_map(|p| p.by_op.keys().cloned())
        .collect();
    for kind in kinds {
        let of = |show: fn(&OpFigures) -> String| {
            let kind = kind.clone();
            move |p: &PhaseResult| p.by_op.get(&kind).map_or(NONE.to_string(), show)
        };
        t.figure(
            &format!("{kind} operations"),
            of(|o| format::thousands(o.ops)),
        );
        t.figure(
            &format!("{kind} latency p50 (µs)"),
            of(|o| format::fixed(o.latency_us.p50, 1)),
        );
        t.figure(
            &format!("{kind} latency p99 (µs)"),
            of(|o| format::fixed(o.latency_us.p99, 1)),
        );
        t.figure(
            &format!("{kind} latency mean (µs)"),
            of(|o| format::fixed(o.latency_us.mean, 1)),
        );
    }
    // The range deletes of a `delete-range` phase on their own; the rows above cover all of its
    // operations, the updates and reads between the range deletes included.
    if t.any(|p| p.delete_range.is_some()) {
        let ranges = |show: fn(&DeleteRangeFigures) -> String| {
            move |p: &PhaseResult| p.delete_range.as_ref().map_or(NONE.to_string(), show)
        };
        t.figure("range deletes", ranges(|d| format::thousands(d.ops)));
        t.figure(
            "keys per range",
            ranges(|d| format::thousands(d.keys_per_range)),
        );
        t.figure(
            "live keys removed by range deletes",
            ranges(|d| format::thousands(d.keys_removed)),
        );
        t.figure(
            "range delete latency p50 (µs)",
            ranges(|d| format::fixed(d.latency_us.p50, 1)),
        );
        t.figure(
            "range delete latency p99 (µs)",
            ranges(|d| format::fixed(d.latency_us.p99, 1)),
        );
        t.figure(
            "range delete latency p99.9 (µs)",
            ranges(|d| format::fixed(d.latency_us.p999, 1)),
        );
        t.figure(
            "range delete latency max (µs)",
            ranges(|d| format::fixed(d.latency_us.max, 1)),
        );
    }
    t.figure("device bytes read", |p| format::bytes(p.device_bytes_read));
    t.figure("device bytes written", |p| {
        format::bytes(p.device_bytes_written)
    });
    t.figure("user bytes written", |p| {
        format::bytes(p.user_bytes_written)
    });
    t.figure("write amp", |p| format::fixed(p.write_amp, 2));
    t.ratio("write amp × ref", |p| p.write_amp);
    t.figure("disk at end", |p| format::bytes(p.space.disk_bytes_end));
    t.figure("disk peak", |p| format::bytes(p.space.disk_bytes_peak));
    t.figure("space amp end", |p| format::fixed(p.space.space_amp_end, 2));
    t.ratio("space amp end × ref", |p| p.space.space_amp_end);
    t.figure("space amp peak", |p| {
        format::fixed(p.space.space_amp_peak, 2)
    });
    t.figure("stall seconds", |p| format::fixed(p.stall_seconds, 1));
    if t.any(|p| p.engine_stall_seconds.is_some()) {
        t.figure("engine stall seconds", |p| {
            p.engine_stall_seconds
                .map_or(NONE.to_string(), |s| format::fixed(s, 1))
        });
    }
    t.figure("budget violations", |p| {
        format::thousands(p.budget_violations)
    });
    // Where the CPU went, where the run could read it (Linux).
    if t.any(|p| !p.cpu_seconds.is_empty()) {
        t.figure("CPU seconds", |p| {
            if p.cpu_seconds.is_empty() {
                return NONE.to_string();
            }
            format::fixed(p.cpu_seconds.values().sum(), 1)
        });
        t.figure("CPU seconds by thread", |p| cpu_by_role(&p.cpu_seconds));
    }
    // The index tree at the end of the phase, where some engine reports it.
    if t.any(|p| p.tree.is_some()) {
        let tree = |show: fn(&TreeShape) -> String| {
            move |p: &PhaseResult| p.tree.as_ref().map_or(NONE.to_string(), show)
        };
        t.figure(
            "levels in use",
            tree(|s| format::thousands(s.levels_in_use as u64)),
        );
        t.figure("files per level", tree(files_per_level));
        t.figure(
            "index-tree bytes",
            tree(|s| format::bytes(s.levels.iter().map(|l| l.bytes).sum())),
        );
        t.figure(
            "value files",
            tree(|s| s.value_files.map_or(NONE.to_string(), format::thousands)),
        );
    }
    // GC rows only where some engine collected in this phase: Gleaner's load phase, and every
    // peer, would otherwise add seven rows of dashes.
    if t.any(|p| p.gc.is_some()) {
        let gc = |show: fn(&GcFigures) -> String| {
            move |p: &PhaseResult| p.gc.as_ref().map_or(NONE.to_string(), show)
        };
        t.figure("GC jobs", gc(|g| format::thousands(g.jobs)));
        t.figure(
            "GC value bytes read",
            gc(|g| format::bytes(g.value_bytes_read)),
        );
        t.figure(
            "GC index bytes read",
            gc(|g| format::bytes(g.index_bytes_read)),
        );
        t.figure(
            "GC lookup bytes read",
            gc(|g| format::bytes(g.lookup_bytes_read)),
        );
        t.figure(
            "GC checks answered by the DropCache",
            gc(|g| format::thousands(g.drop_cache_answers)),
        );
        t.figure("GC bytes written", gc(|g| format::bytes(g.bytes_written)));
        t.figure(
            "GC bytes written by class",
            gc(|g| {
                g.bytes_written_by_class
                    .iter()
                    .map(|(class, n)| format!("{class} {}", format::bytes(*n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
        );
        t.figure(
            "values relocated by compaction (bytes)",
            gc(|g| format::bytes(g.relocated_bytes)),
        );
        t.figure(
            "handles written back",
            gc(|g| format::thousands(g.written_back)),
        );
        t.figure("GC read seconds", gc(|g| format::fixed(g.read_seconds, 1)));
        t.figure(
            "GC lookup seconds",
            gc(|g| format::fixed(g.lookup_seconds, 1)),
        );
        t.figure(
            "GC write seconds",
            gc(|g| format::fixed(g.write_seconds, 1)),
        );
        t.figure(
            "GC seconds yielding to reads",
            gc(|g| format::fixed(g.paced_seconds, 1)),
        );
        t.figure(
            "GC job seconds (wall clock, claim to commit)",
            gc(|g| format::fixed(g.job_seconds, 1)),
        );
        t.figure(
            "GC seconds waiting for compactions",
            gc(|g| format::fixed(g.compaction_wait_seconds, 1)),
        );
    }

    out.line(&format!("## Phase {}", phase_title(key)));
    out.blank();
    table_header(out, "figure", &r.engines);
    for row in &t.rows {
        out.row(row);
    }
    out.blank();
}

fn plots(out: &mut Out) {
    out.line("## Plots");
    out.blank();
    for plot in &PLOTS {
        out.line(&format!("![{}]({})", plot.title, plot.file));
        out.blank();
    }
}

fn errors(out: &mut Out, r: &Results) {
    let failed: Vec<&EngineResult> = r.engines.iter().filter(|e| e.error.is_some()).collect();
    if failed.is_empty() {
        return;
    }
    out.line("## Errors");
    out.blank();
    for e in failed {
        let message = e.error.as_deref().unwrap_or_default();
        out.line(&format!(
            "- {} ({}), phases before the failure are reported above:",
            code(&e.name),
            format::cell(&e.kind)
        ));
        out.blank();
        // A fence longer than any backtick run in the message, so the message cannot close it.
        let fence = "`".repeat(longest_backtick_run(message).max(2) + 1);
        out.line(&format!("  {fence}text"));
        for line in message.lines() {
            out.line(format!("  {line}").trim_end_matches(' '));
        }
        out.line(&format!("  {fence}"));
        out.blank();
    }
}

/// Inline code for a name or spec, with pipes escaped for tables and a delimiter longer than any
/// backtick run inside (CommonMark's rule), so odd characters in names cannot break the layout.
fn code(text: &str) -> String {
    let text = format::cell(text);
    if text.is_empty() {
        return NONE.to_string();
    }
    let ticks = "`".repeat(longest_backtick_run(&text) + 1);
    if text.starts_with('`') || text.ends_with('`') {
        format!("{ticks} {text} {ticks}")
    } else {
        format!("{ticks}{text}{ticks}")
    }
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn report_markdown_header_and_workload() {
        let md = markdown(&fixture::results());
        for expected in [
            "# Benchmark report\n",
            "Command: `gleaner-bench run --engines gleaner:terarkdb,rocksdb,null --phases load,update,read`\n",
            "- Host: bench-host\n",
            "- CPUs: 2\n",
            "- Memory: 8.0 GiB\n",
            "- Kernel: 6.1.0-test\n",
            "- Started: 2023-11-14 22:13:20 UTC\n",
            "- Key size: 24 B\n",
            "- Value size: `mixed8k`\n",
            "- Key distribution: `zipf:0.99`\n",
            "- Keys: 1,000,000\n",
            "- Dataset (bytes loaded): 8.0 GiB\n",
            "- Update bytes: 24.0 GiB\n",
            "- Threads: 2\n",
            "- Cache: 64.0 MiB\n",
            "- Memtable / table / value file: 64.0 MiB / 64.0 MiB / 256.0 MiB\n",
            "- Direct I/O: yes\n",
            "- Compression: `lz4`\n",
            "- Space budget: 1.50× dataset (12.0 GiB)\n",
            "- Seed: 42\n",
        ] {
            assert!(md.contains(expected), "missing {expected:?} in\n{md}");
        }
    }

    #[test]
    fn report_markdown_phase_tables() {
        let md = markdown(&fixture::results());
        for expected in [
            "Ratios (`× ref`) are against `rocksdb`, the first peer engine.\n",
            "## Throughput (ops/s)\n\n| phase | `gleaner:terarkdb` | `rocksdb` | `null` |\n|---|---:|---:|---:|\n| `load` | 12,500 | 5,000 | 1,234,568 |\n",
            "## Phase `update`\n\n| figure | `gleaner:terarkdb` | `rocksdb` | `null` |\n|---|---:|---:|---:|\n",
            "| ops/s | 15,000 | 8,197 | 1,250,000 |\n",
            "| ops/s × ref | 1.83× | ref | 152.50× |\n",
            "| write amp | 2.20 | 11.00 | 0.00 |\n",
            "| write amp × ref | 0.20× | ref | 0.00× |\n",
            "| space amp end | 1.40 | 1.10 | 0.00 |\n",
            "| space amp end × ref | 1.27× | ref | 0.00× |\n",
            "| latency p99.9 (µs) | 1,250.5 | 1,250.5 | 1,250.5 |\n",
            "| device bytes read | 1.0 MiB | 1.0 MiB | 1.0 MiB |\n",
            "| stall seconds | 3.5 | 0.0 | 0.0 |\n",
            "| budget violations | 1 | 0 | 0 |\n",
            "| GC jobs | 42 | — | — |\n",
            "| GC value bytes read | 5.0 GiB | — | — |\n",
            "| GC lookup bytes read | 100.0 MiB | — | — |\n",
            "| GC bytes written | 3.0 GiB | — | — |\n",
            "| GC read seconds | 12.5 | — | — |\n",
            "| GC lookup seconds | 3.2 | — | — |\n",
            "| GC write seconds | 8.0 | — | — |\n",
            // The null engine failed before `read`: dashes in its column.
            "| ops/s | 40,000 | 50,000 | — |\n| ops/s × ref | 0.80× | ref | — |\n",
            // Read-only phase: write amplification 0 on both sides gives no ratio.
            "| write amp × ref | — | ref | — |\n",
            "| engine stall seconds | 1.5 | — | — |\n",
            // CPU by thread role, most first (ties by name), where the run measured it.
            "| CPU seconds | 301.0 | — | — |\n",
            "| CPU seconds by thread | clients 120.0, compaction 80.5, gc 80.5, flush 20.0 | — | — |\n",
        ] {
            assert!(md.contains(expected), "missing {expected:?} in\n{md}");
        }
        // GC rows only in the phase that had GC.
        assert_eq!(md.matches("| GC jobs |").count(), 1);
        let tables = ["## Phase `load`", "## Phase `update`", "## Phase `read`"];
        let positions: Vec<usize> = tables.iter().map(|t| md.find(t).unwrap()).collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "phases out of order"
        );
    }

    #[test]
    fn report_markdown_shape_and_sizes_in_the_workload() {
        let mut results = fixture::results();
        let md = markdown(&results);
        for expected in [
            "- Shape: `absolute`: memtable, table and value-file sizes follow the dataset up to the papers' 64 / 64 / 256 MiB; level base and GC job size the engines' own\n",
            "- Sizes for `gleaner`: `level_base_size` 256.0 MiB, `memtable_size` 64.0 MiB\n",
            "- Sizes for `rocksdb`: `max_bytes_for_level_base` 256.0 MiB\n",
        ] {
            assert!(md.contains(expected), "missing {expected:?} in\n{md}");
        }
        // 8 GiB under `paper`: f = 8·2³⁰ ÷ 10¹¹.
        results.workload.shape = "paper".to_string();
        let md = markdown(&results);
        assert!(
            md.contains("- Shape: `paper`: the Scavenger paper's sizes (64 MiB memtable and tables, 256 MiB level base and value files) × dataset ÷ 100 GB = × 0.0859, floored\n"),
            "{md}"
        );
        results.workload.load_bytes = 8 << 20;
        assert!(markdown(&results).contains("= × 8.39e-5, floored\n"));
    }

    #[test]
    fn report_markdown_level_counts_per_phase() {
        let md = markdown(&fixture::results());
        // One phase's section: from its heading to the next.
        let table = |phase: &str| -> &str {
            let start = md
                .find(&format!("## Phase `{phase}`\n"))
                .expect("phase table");
            let end = md[start + 1..]
                .find("\n## ")
                .map_or(md.len(), |i| start + 1 + i);
            &md[start..end]
        };
        let load = table("load");
        assert!(load.contains("| levels in use | 2 | — | — |\n"), "{load}");
        assert!(
            load.contains("| files per level | L0 2, L1 4 | — | — |\n"),
            "{load}"
        );
        assert!(load.contains("| value files | 30 | — | — |"), "{load}");
        let update = table("update");
        for expected in [
            // Gleaner: L0 empty after the flush, so two levels; RocksDB: L0, L5 and L6.
            "| levels in use | 2 | 3 | — |\n",
            "| files per level | L1 3, L2 12 | L0 1, L5 9, L6 130 | — |\n",
            "| index-tree bytes | 2.2 GiB | 8.8 GiB | — |\n",
            "| value files | 1,234 | — | — |",
        ] {
            assert!(
                update.contains(expected),
                "missing {expected:?} in\n{update}"
            );
        }
        // No engine reported its tree in `read`: no tree rows there.
        assert!(
            !table("read").contains("levels in use"),
            "{}",
            table("read")
        );
        assert_eq!(md.matches("| levels in use |").count(), 2);
    }

    #[test]
    fn report_markdown_errors_and_plots() {
        let md = markdown(&fixture::results());
        assert!(
            md.contains("| 3 | `null` | null | failed (see Errors) |\n"),
            "{md}"
        );
        assert!(
            md.contains(
                "## Errors\n\n- `null` (null), phases before the failure are reported above:\n\n  ```text\n  read: injected failure\n  while opening the null engine\n  ```\n"
            ),
            "{md}"
        );
        assert!(
            md.contains("![Throughput over time](throughput.png)\n"),
            "{md}"
        );
        assert!(md.find("## Errors").unwrap() > md.find("## Phase `read`").unwrap());
    }

    #[test]
    fn report_markdown_delete_range_rows_and_a_skipped_engine() {
        let md = markdown(&fixture::with_delete_range());
        let start = md.find("## Phase `delete-range`\n").expect("phase table");
        let end = md[start + 1..]
            .find("\n## ")
            .map_or(md.len(), |i| start + 1 + i);
        let table = &md[start..end];
        for expected in [
            "| figure | `gleaner:terarkdb` | `rocksdb` | `null` | `fjall` |\n",
            "| status | ran | ran | — | skipped: not supported |\n",
            "| operations | 21,000 | 21,000 | — | — |\n",
            "| ops/s | 7,000 | 3,500 | — | — |\n",
            "| ops/s × ref | 2.00× | ref | — | — |\n",
            "| range deletes | 1,000 | 1,000 | — | — |\n",
            "| keys per range | 100 | 100 | — | — |\n",
            "| live keys removed by range deletes | 61,234 | 61,234 | — | — |\n",
            "| range delete latency p99 (µs) | 900.0 | 900.0 | — | — |\n",
        ] {
            assert!(table.contains(expected), "missing {expected:?} in\n{table}");
        }
        assert!(
            md.contains("| `delete-range` | 7,000 | 3,500 | — | skipped |\n"),
            "{md}"
        );
        // Other phases have no status row (nobody skipped them) and no range-delete rows.
        assert_eq!(md.matches("\n| status |").count(), 1);
        assert_eq!(md.matches("| range deletes |").count(), 1);
    }

    #[test]
    fn report_markdown_is_deterministic() {
        let results = fixture::results();
        assert_eq!(markdown(&results), markdown(&results));
        assert_eq!(markdown(&results), markdown(&results.clone()));
    }

    #[test]
    fn report_markdown_without_a_peer_says_so() {
        let mut results = fixture::results();
        results.engines.remove(1);
        let md = markdown(&results);
        assert!(
            md.contains("No peer engine in this run: ratios (`× ref`) are against the first engine, `gleaner:terarkdb`.\n"),
            "{md}"
        );
        assert!(md.contains("| ops/s × ref | ref | 83.33× |\n"), "{md}");
    }

    #[test]
    fn report_markdown_edge_cases_do_not_panic() {
        let mut results = Results::default();
        let md = markdown(&results);
        assert!(md.contains("No engines were run.\n"));
        assert!(!md.contains("## Plots"));

        results.engines.push(EngineResult {
            name: "odd|name`x`".to_string(),
            kind: "gleaner".to_string(),
            error: Some("```".to_string()),
            ..EngineResult::default()
        });
        results.workload.space_budget = Some(f64::NAN);
        let md = markdown(&results);
        assert!(md.contains("One engine only: no ratios.\n"), "{md}");
        assert!(md.contains("`` odd\\|name`x` ``"), "{md}");
        assert!(md.contains("  ````text\n  ```\n  ````\n"), "{md}");
        assert!(md.contains("- Space budget: none\n"), "{md}");
    }
}

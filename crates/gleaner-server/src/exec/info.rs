//! `INFO [section ...]`.
//!
//! Sections, as Redis 7.0 names them: `server`, `clients`, `memory`, `persistence`, `stats`,
//! `replication` (always `role:master`: there is no replication), `cpu`, `modules` (empty),
//! `errorstats`, `cluster` (`cluster_enabled:0`), `keyspace` (exact key counts: see
//! [`super::keyspace_cmds::count_keys`]), `commandstats`, and `gleaner` (the engine's figures:
//! GC, space, levels, compactions, stalls). `INFO` and `INFO default` give all but
//! `commandstats`; `INFO all` and `INFO everything` give all; names are case-insensitive and
//! may be combined (each section once); unknown names give nothing, as in Redis. The full
//! engine statistics are `GLEANER.STATS` (JSON).

use std::fmt::Write;

use bytes::Bytes;
use gleaner::DbStats;

use crate::commands::COMMANDS;
use crate::resp::Reply;
use crate::shared::Shared;
use crate::stats::ServerStats;

/// The Redis version gleaner-server answers as (in `INFO` and `HELLO`), for clients that read
/// it to decide which commands to use: the command set and error texts are Redis 7.0's.
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";

/// Every section, in output order.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
    "commandstats",
    "gleaner",
];

/// Sections `INFO all` has and `INFO` (default) has not.
const NOT_DEFAULT: &[&str] = &["commandstats"];

/// The sections `INFO args...` asks for, in output order.
fn wanted(args: &[Bytes]) -> Vec<&'static str> {
    let names: Vec<String> = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let default = names.is_empty() || names.iter().any(|n| n == "default");
    let all = names.iter().any(|n| n == "all" || n == "everything");
    SECTIONS
        .iter()
        .copied()
        .filter(|s| all || (default && !NOT_DEFAULT.contains(s)) || names.iter().any(|n| n == s))
        .collect()
}

/// Runs INFO.
pub fn info(shared: &Shared, args: &[Bytes]) -> Reply {
    let db = shared.db.stats();
    let mut text = String::new();
    for section in wanted(&args[1..]) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        let mut title = section.to_string();
        title[..1].make_ascii_uppercase();
        let _ = write!(text, "# {title}\r\n");
        for (k, v) in fields(shared, &db, section) {
            let _ = write!(text, "{k}:{v}\r\n");
        }
    }
    Reply::Verbatim(text)
}

fn fields(shared: &Shared, db: &DbStats, section: &str) -> Vec<(String, String)> {
    section_fields(shared, db, section)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain(dynamic_fields(shared, section))
        .collect()
}

/// The fields named at run time: one per command (`commandstats`) or database (`keyspace`).
fn dynamic_fields(shared: &Shared, section: &str) -> Vec<(String, String)> {
    let g = ServerStats::get;
    match section {
        "commandstats" => COMMANDS
            .iter()
            .zip(shared.stats.commands.iter())
            .filter(|(_, c)| g(&c.calls) + g(&c.rejected) > 0)
            .map(|(spec, c)| {
                let (calls, usec) = (g(&c.calls), g(&c.usec));
                let per_call = if calls == 0 {
                    0.0
                } else {
                    usec as f64 / calls as f64
                };
                (
                    format!("cmdstat_{}", spec.name),
                    format!(
                        "calls={calls},usec={usec},usec_per_call={per_call:.2},\
                         rejected_calls={},failed_calls={}",
                        g(&c.rejected),
                        g(&c.failed)
                    ),
                )
            })
            .collect(),
        "keyspace" => {
            let now = shared.db.time_ms();
            (0..shared.keyspace.databases())
                .filter_map(|i| {
                    let (n, expires, avg_ttl) =
                        super::keyspace_cmds::keyspace_figures(shared, i as u8, now).ok()?;
                    (n > 0).then(|| {
                        (
                            format!("db{i}"),
                            format!("keys={n},expires={expires},avg_ttl={avg_ttl}"),
                        )
                    })
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

fn section_fields(shared: &Shared, db: &DbStats, section: &str) -> Vec<(&'static str, String)> {
    let g = ServerStats::get;
    let s = &shared.stats;
    let c = &shared.config;
    match section {
        "server" => {
            let up = shared.started.elapsed().as_secs();
            vec![
                ("redis_version", REDIS_COMPAT_VERSION.into()),
                ("gleaner_version", env!("CARGO_PKG_VERSION").into()),
                ("redis_mode", "standalone".into()),
                (
                    "os",
                    format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
                ),
                ("arch_bits", (usize::BITS).to_string()),
                ("process_id", std::process::id().to_string()),
                ("tcp_port", shared.local_addr.port().to_string()),
                ("bind", shared.local_addr.to_string()),
                ("uptime_in_seconds", up.to_string()),
                ("uptime_in_days", (up / 86_400).to_string()),
                ("database_dir", c.dir.display().to_string()),
                ("gc_policy", db.gc.policy.clone()),
            ]
        }
        "clients" => vec![
            ("connected_clients", g(&s.connected_clients).to_string()),
            ("maxclients", c.max_clients.to_string()),
            ("blocked_clients", "0".into()),
            (
                "timeout",
                c.idle_timeout.map_or(0, |d| d.as_secs()).to_string(),
            ),
            ("proto_max_bulk_len", c.limits.max_bulk_len.to_string()),
            ("max_args", c.limits.max_args.to_string()),
            ("max_pending_bytes", c.max_pending_bytes.to_string()),
        ],
        "memory" => {
            let rss = rss_bytes().unwrap_or(0);
            vec![
                // No allocator statistics: the resident set size stands for used memory.
                ("used_memory", rss.to_string()),
                ("used_memory_human", human(rss)),
                ("used_memory_rss", rss.to_string()),
                ("used_memory_rss_human", human(rss)),
                ("memtable_bytes", db.memtable_bytes.to_string()),
                (
                    "immutable_memtable_bytes",
                    db.immutable_memtable_bytes.to_string(),
                ),
                ("block_cache_usage_bytes", db.cache.usage_bytes.to_string()),
                (
                    "block_cache_capacity_bytes",
                    db.cache.capacity_bytes.to_string(),
                ),
                (
                    "row_cache_usage_bytes",
                    db.cache.row_usage_bytes.to_string(),
                ),
                (
                    "row_cache_capacity_bytes",
                    db.cache.row_capacity_bytes.to_string(),
                ),
                ("maxmemory", "0".into()),
                ("mem_allocator", c.allocator.into()),
            ]
        }
        "replication" => vec![
            ("role", "master".into()),
            ("connected_slaves", "0".into()),
            ("master_failover_state", "no-failover".into()),
            ("master_repl_offset", "0".into()),
            ("repl_backlog_active", "0".into()),
        ],
        "cpu" => {
            let t = cpu_seconds().unwrap_or_default();
            vec![
                ("used_cpu_sys", format!("{:.6}", t.sys)),
                ("used_cpu_user", format!("{:.6}", t.user)),
                ("used_cpu_sys_children", format!("{:.6}", t.children_sys)),
                ("used_cpu_user_children", format!("{:.6}", t.children_user)),
            ]
        }
        "cluster" => vec![("cluster_enabled", "0".into())],
        "persistence" => vec![
            ("loading", "0".into()),
            ("sync", c.sync.name().into()),
            ("wal_syncs", db.operations.wal_syncs.to_string()),
            ("server_wal_syncs", shared.durability.syncs().to_string()),
            ("wal_records_recovered", db.recovery.wal_records.to_string()),
            (
                "wal_bytes_dropped_at_recovery",
                db.recovery.wal_dropped_bytes.to_string(),
            ),
            (
                "background_error",
                db.background_error.clone().unwrap_or_default(),
            ),
        ],
        "stats" => vec![
            (
                "total_connections_received",
                g(&s.total_connections_received).to_string(),
            ),
            (
                "total_commands_processed",
                g(&s.total_commands_processed).to_string(),
            ),
            (
                "rejected_connections",
                g(&s.rejected_connections).to_string(),
            ),
            (
                "total_net_input_bytes",
                g(&s.total_net_input_bytes).to_string(),
            ),
            (
                "total_net_output_bytes",
                g(&s.total_net_output_bytes).to_string(),
            ),
            ("keyspace_hits", g(&s.keyspace_hits).to_string()),
            ("keyspace_misses", g(&s.keyspace_misses).to_string()),
            ("total_error_replies", g(&s.error_replies).to_string()),
            ("protocol_errors", g(&s.protocol_errors).to_string()),
            (
                "limit_disconnections",
                g(&s.limit_disconnections).to_string(),
            ),
            ("idle_disconnections", g(&s.idle_disconnections).to_string()),
            ("space_budget_errors", g(&s.space_budget_errors).to_string()),
            ("scan_cursors", shared.cursors.len().to_string()),
        ],
        "gleaner" => {
            let v = &db.values;
            let levels = db
                .levels
                .iter()
                .filter(|l| l.files > 0)
                .map(|l| format!("L{}={}", l.level, l.files))
                .collect::<Vec<_>>()
                .join(",");
            vec![
                ("gc_policy", db.gc.policy.clone()),
                ("disk_bytes", db.space.disk_bytes.to_string()),
                (
                    "live_data_estimate",
                    db.space.live_data_estimate.to_string(),
                ),
                (
                    "space_amplification",
                    format!("{:.3}", db.space.space_amplification),
                ),
                (
                    "key_estimate",
                    (db.memtable_entries + db.levels.iter().map(|l| l.entries).sum::<u64>())
                        .to_string(),
                ),
                ("key_table_bytes", db.total_table_bytes.to_string()),
                ("key_tables_per_level", levels),
                ("value_tables", v.tables.to_string()),
                ("value_file_bytes", v.file_bytes.to_string()),
                ("value_record_bytes", v.record_bytes.to_string()),
                ("value_garbage_bytes", v.garbage_bytes.to_string()),
                ("gc_jobs", db.gc.jobs.to_string()),
                ("gc_errors", db.gc.errors.to_string()),
                (
                    "gc_last_error",
                    db.gc.last_error.clone().unwrap_or_default(),
                ),
                ("gc_victims", db.gc.victims.to_string()),
                ("gc_records_dropped", db.gc.records_dropped.to_string()),
                ("gc_records_written", db.gc.records_written.to_string()),
                ("gc_bytes_written", db.gc.bytes_written.to_string()),
                ("row_cache_hits", db.cache.row_hits.to_string()),
                ("row_cache_misses", db.cache.row_misses.to_string()),
                ("flushes", db.compaction.flushes.to_string()),
                ("compactions", db.compaction.compactions.to_string()),
                ("compaction_errors", db.compaction.errors.to_string()),
                (
                    "write_stall_slowdowns",
                    db.stalls.slowdown_count.to_string(),
                ),
                ("write_stall_stops", db.stalls.stop_count.to_string()),
                (
                    "space_throttle_band",
                    db.throttle.as_ref().map_or_else(
                        || "off".to_string(),
                        |t| {
                            serde_json::to_value(t.band)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default()
                        },
                    ),
                ),
                ("last_sequence", db.last_sequence.to_string()),
                (
                    "background_error",
                    db.background_error.clone().unwrap_or_default(),
                ),
            ]
        }
        _ => Vec::new(),
    }
}

/// CPU time of this process and its waited-for children, in seconds.
#[derive(Debug, Default)]
struct CpuSeconds {
    user: f64,
    sys: f64,
    children_user: f64,
    children_sys: f64,
}

/// From `/proc/self/stat` (Linux; `None` elsewhere), in clock ticks of 1/100 s (the kernel's
/// `USER_HZ` on every Linux architecture).
fn cpu_seconds() -> Option<CpuSeconds> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime, stime, cutime, cstime are fields 14-17 of the line: 11-14 after the name.
    let tick = |i: usize| f.get(i)?.parse::<f64>().ok().map(|t| t / 100.0);
    Some(CpuSeconds {
        user: tick(11)?,
        sys: tick(12)?,
        children_user: tick(13)?,
        children_sys: tick(14)?,
    })
}

/// The resident set size of this process, from `/proc/self/status` (Linux); `None` elsewhere.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.2}{}", UNITS[unit])
}

//! `INFO [section ...]` and the key-count estimate of `DBSIZE`.
//!
//! Sections: `server`, `clients`, `memory`, `persistence`, `stats`, `keyspace` and `gleaner`
//! (the engine's figures: GC, space, levels, compactions, stalls). `INFO`, `INFO default`,
//! `INFO all` and `INFO everything` give all of them; unknown names give nothing, as in Redis.
//! The full engine statistics are `GLEANER.STATS` (JSON).

use std::fmt::Write;

use bytes::Bytes;
use gleaner::DbStats;

use crate::resp::Reply;
use crate::shared::Shared;
use crate::stats::ServerStats;

/// The protocol level gleaner-server answers as, for clients that read `redis_version` to
/// decide which commands to use (RESP3 and `HELLO` came with Redis 6; `SET ... GET` and the
/// error texts are Redis 7's).
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";

const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "keyspace",
    "gleaner",
];

/// The `DBSIZE` estimate: entries in the memtables and key tables, i.e. every version and
/// tombstone not yet compacted away. It is an upper bound on the number of keys, exact when
/// every key was written once and never deleted, and drifts high with overwrites and deletes
/// until compaction drops the shadowed versions.
pub fn key_estimate(shared: &Shared) -> u64 {
    estimate(&shared.db.stats())
}

fn estimate(s: &DbStats) -> u64 {
    s.memtable_entries + s.levels.iter().map(|l| l.entries).sum::<u64>()
}

/// Runs INFO.
pub fn info(shared: &Shared, args: &[Bytes]) -> Reply {
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| matches!(w.as_str(), "all" | "default" | "everything"));
    let db = shared.db.stats();
    let mut text = String::new();
    for &section in SECTIONS {
        if !all && !wanted.iter().any(|w| w == section) {
            continue;
        }
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

fn fields(shared: &Shared, db: &DbStats, section: &str) -> Vec<(&'static str, String)> {
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
            ]
        }
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
        "keyspace" => {
            let keys = estimate(db);
            if keys == 0 {
                Vec::new()
            } else {
                vec![("db0", format!("keys={keys},expires=0,avg_ttl=0"))]
            }
        }
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
                ("key_estimate", estimate(db).to_string()),
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

//! CPU seconds of a phase by thread role (clients, flush, compaction, GC, purge, ...), from
//! Linux's `/proc`: where an engine's CPU goes, on a machine whose two cores are the budget.
//!
//! Engine threads live across phases: their CPU is the difference of two snapshots of
//! `/proc/self/task`. Client threads live for one phase: each reads its own CPU time
//! (`/proc/thread-self/stat`) as it ends. Threads that ended between the snapshots otherwise
//! (an engine's short-lived helpers) are the rest of the process's total (`/proc/self/stat`,
//! which keeps the CPU of ended threads), reported as `exited`. Elsewhere than Linux every
//! figure is absent.

use std::collections::{BTreeMap, HashMap};

/// `/proc` reports CPU times in USER_HZ ticks, 100 a second on every Linux architecture the
/// harness runs on (the kernel scales its internal clock to it for user space).
const TICKS_PER_SECOND: f64 = 100.0;

/// The role of the clients' threads (measured by themselves, see [`own_ticks`]).
pub const CLIENTS: &str = "clients";

/// The role of CPU no living thread accounts for.
pub const EXITED: &str = "exited";

/// Most threads a snapshot reads: a bound on the work, far above any engine's count.
const MAX_THREADS: usize = 4096;

/// The CPU ticks of every living thread of the process, by thread id, with its role, and of
/// the whole process.
#[derive(Debug, Clone, Default)]
pub struct CpuSnapshot {
    threads: HashMap<u32, (&'static str, u64)>,
    process: Option<u64>,
}

impl CpuSnapshot {
    /// Reads `/proc` now (an empty snapshot where it is absent).
    pub fn now() -> CpuSnapshot {
        let mut snap = CpuSnapshot {
            process: std::fs::read_to_string("/proc/self/stat")
                .ok()
                .and_then(|s| stat_ticks(&s)),
            ..CpuSnapshot::default()
        };
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return snap;
        };
        for entry in dir.flatten().take(MAX_THREADS) {
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let path = entry.path();
            let (Ok(comm), Ok(stat)) = (
                std::fs::read_to_string(path.join("comm")),
                std::fs::read_to_string(path.join("stat")),
            ) else {
                // The thread ended between the listing and the read.
                continue;
            };
            if let Some(ticks) = stat_ticks(&stat) {
                snap.threads.insert(tid, (role(comm.trim()), ticks));
            }
        }
        snap
    }

    /// CPU seconds by role between `before` and `self`, with `client_ticks` the clients' own
    /// count; empty when `/proc` could not be read. Threads named like the harness's main
    /// thread (which waits for the clients) are `harness`.
    pub fn since(&self, before: &CpuSnapshot, client_ticks: u64) -> BTreeMap<String, f64> {
        let (Some(end), Some(start)) = (self.process, before.process) else {
            return BTreeMap::new();
        };
        let mut ticks: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut accounted = client_ticks;
        for (tid, (role, t)) in &self.threads {
            let earlier = before.threads.get(tid).map_or(0, |(_, b)| *b);
            let d = t.saturating_sub(earlier);
            *ticks.entry(role).or_default() += d;
            accounted += d;
        }
        *ticks.entry(CLIENTS).or_default() += client_ticks;
        *ticks.entry(EXITED).or_default() += end.saturating_sub(start).saturating_sub(accounted);
        ticks
            .into_iter()
            .filter(|(_, t)| *t > 0)
            .map(|(r, t)| (r.to_string(), t as f64 / TICKS_PER_SECOND))
            .collect()
    }
}

/// The calling thread's CPU ticks so far (0 where `/proc` is absent): a client reads it as it
/// starts and ends.
pub fn own_ticks() -> u64 {
    std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| stat_ticks(&s))
        .unwrap_or(0)
}

/// User plus system ticks from a `stat` line: fields 14 and 15, counted after the command name,
/// which is in parentheses and may hold spaces and parentheses itself.
fn stat_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    // After the name: state (field 3) ... utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The role of a thread by its name: Gleaner's (`gleaner-flush-0`, `gleaner-gc-io-3`, ...),
/// RocksDB's (`rocksdb:high` flushes, `rocksdb:low` and `rocksdb:bottom` compact) and the
/// harness's own.
fn role(comm: &str) -> &'static str {
    const ROLES: &[(&str, &str)] = &[
        ("gleaner-flush", "flush"),
        ("gleaner-compact", "compaction"),
        ("gleaner-gc", "gc"),
        ("gleaner-purge", "purge"),
        ("gleaner-read", "read-ahead"),
        ("gleaner-hotness", "hotness"),
        ("gleaner-policy", "gc"),
        ("rocksdb:high", "flush"),
        ("rocksdb:low", "compaction"),
        ("rocksdb:bottom", "compaction"),
        ("bench-", "harness"),
        ("gleaner-bench", "harness"),
    ];
    ROLES
        .iter()
        .find(|(prefix, _)| comm.starts_with(prefix))
        .map_or("other", |(_, r)| r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "1234 (a) b (c) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 1";
        assert_eq!(stat_ticks(line), Some(281));
        assert_eq!(stat_ticks("1234 (x) S 1 2"), None, "too few fields");
        assert_eq!(stat_ticks("no name"), None);
    }

    #[test]
    fn roles_follow_thread_names() {
        assert_eq!(role("gleaner-gc-io-3"), "gc");
        assert_eq!(role("gleaner-gc-0"), "gc");
        assert_eq!(role("gleaner-compact"), "compaction");
        assert_eq!(role("rocksdb:low"), "compaction");
        assert_eq!(role("rocksdb:high"), "flush");
        assert_eq!(role("bench-monitor"), "harness");
        assert_eq!(role("tokio-runtime-w"), "other");
    }

    #[test]
    fn deltas_split_by_role_and_the_rest_is_exited() {
        let mut before = CpuSnapshot {
            process: Some(1_000),
            ..CpuSnapshot::default()
        };
        before.threads.insert(1, ("flush", 100));
        before.threads.insert(2, ("gc", 50));
        let mut after = CpuSnapshot {
            process: Some(1_600),
            ..CpuSnapshot::default()
        };
        after.threads.insert(1, ("flush", 150));
        after.threads.insert(2, ("gc", 250));
        // A thread born during the phase counts from zero.
        after.threads.insert(3, ("gc", 30));
        let s = after.since(&before, 200);
        assert_eq!(s.get("flush"), Some(&0.5));
        assert_eq!(s.get("gc"), Some(&2.3));
        assert_eq!(s.get(CLIENTS), Some(&2.0));
        // 600 in all: 50 + 230 + 200 accounted, 120 by threads gone.
        assert_eq!(s.get(EXITED), Some(&1.2));
        assert!(CpuSnapshot::default().since(&before, 5).is_empty());
    }

    #[test]
    fn this_process_is_measured_on_linux() {
        if !std::path::Path::new("/proc/self/task").exists() {
            eprintln!("skipped: no /proc");
            return;
        }
        let snap = CpuSnapshot::now();
        assert!(snap.process.is_some());
        assert!(!snap.threads.is_empty());
    }
}

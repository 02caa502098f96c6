//! The server's own counters, reported by INFO (`clients` and `stats` sections).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one command (`INFO commandstats`).
#[derive(Debug, Default)]
pub struct CommandCounters {
    /// Times it ran (a queued command counts when `EXEC` runs it).
    pub calls: AtomicU64,
    /// Microseconds spent running it.
    pub usec: AtomicU64,
    /// Times it was refused before running (arity, authentication, `MULTI` queuing).
    pub rejected: AtomicU64,
    /// Times it ran and answered an error.
    pub failed: AtomicU64,
}

/// Counters since the server started (or `CONFIG RESETSTAT`). All relaxed: they are figures,
/// not synchronization.
#[derive(Debug)]
pub struct ServerStats {
    /// Clients connected now.
    pub connected_clients: AtomicU64,
    /// Connections accepted (rejected ones included).
    pub total_connections_received: AtomicU64,
    /// Connections refused at `--maxclients` or by protected mode.
    pub rejected_connections: AtomicU64,
    /// Commands run (queued ones count when EXEC runs them).
    pub total_commands_processed: AtomicU64,
    /// Bytes read from clients.
    pub total_net_input_bytes: AtomicU64,
    /// Bytes written to clients.
    pub total_net_output_bytes: AtomicU64,
    /// Connections closed for a malformed request.
    pub protocol_errors: AtomicU64,
    /// Connections closed for breaking a limit (`--max-bulk-len`, `--max-args`,
    /// `--max-pending-bytes`).
    pub limit_disconnections: AtomicU64,
    /// Connections closed by `--timeout`.
    pub idle_disconnections: AtomicU64,
    /// Reads of a key that found it.
    pub keyspace_hits: AtomicU64,
    /// Reads of a key that did not.
    pub keyspace_misses: AtomicU64,
    /// Commands answered with an error.
    pub error_replies: AtomicU64,
    /// Writes refused by the engine's space budget (`-OOM`).
    pub space_budget_errors: AtomicU64,
    /// Per command, indexed by [`crate::commands::CommandSpec::index`].
    pub commands: Box<[CommandCounters]>,
}

impl Default for ServerStats {
    fn default() -> Self {
        ServerStats {
            connected_clients: AtomicU64::default(),
            total_connections_received: AtomicU64::default(),
            rejected_connections: AtomicU64::default(),
            total_commands_processed: AtomicU64::default(),
            total_net_input_bytes: AtomicU64::default(),
            total_net_output_bytes: AtomicU64::default(),
            protocol_errors: AtomicU64::default(),
            limit_disconnections: AtomicU64::default(),
            idle_disconnections: AtomicU64::default(),
            keyspace_hits: AtomicU64::default(),
            keyspace_misses: AtomicU64::default(),
            error_replies: AtomicU64::default(),
            space_budget_errors: AtomicU64::default(),
            commands: crate::commands::COMMANDS
                .iter()
                .map(|_| CommandCounters::default())
                .collect(),
        }
    }
}

impl ServerStats {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// `CONFIG RESETSTAT`: zeroes the counters of events (not `connected_clients`, which is
    /// a level).
    pub fn reset(&self) {
        let events = [
            &self.total_connections_received,
            &self.rejected_connections,
            &self.total_commands_processed,
            &self.total_net_input_bytes,
            &self.total_net_output_bytes,
            &self.protocol_errors,
            &self.limit_disconnections,
            &self.idle_disconnections,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.error_replies,
            &self.space_budget_errors,
        ];
        for c in events {
            c.store(0, Ordering::Relaxed);
        }
        for c in self.commands.iter() {
            for f in [&c.calls, &c.usec, &c.rejected, &c.failed] {
                f.store(0, Ordering::Relaxed);
            }
        }
    }
}

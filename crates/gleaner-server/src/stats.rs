//! The server's own counters, reported by INFO (`clients` and `stats` sections).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters since the server started. All relaxed: they are figures, not synchronization.
#[derive(Debug, Default)]
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
}

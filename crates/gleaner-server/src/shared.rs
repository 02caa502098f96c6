//! What every connection shares: the database, the configuration, counters, cursors and locks.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use gleaner::Db;

use crate::config::Config;
use crate::cursors::ScanCursors;
use crate::durability::Durability;
use crate::keylocks::KeyLocks;
use crate::keyspace::Keyspace;
use crate::stats::ServerStats;

/// The server's shared state.
#[derive(Debug)]
pub struct Shared {
    /// The database.
    pub db: Db,
    /// The configuration (limits fitted to the database).
    pub config: Config,
    /// The mapping of (database, key) to stored keys.
    pub keyspace: Keyspace,
    /// The address actually bound (the port is known when `--bind` asked for port 0).
    pub local_addr: SocketAddr,
    /// Counters.
    pub stats: ServerStats,
    /// SCAN cursors.
    pub cursors: ScanCursors,
    /// Key locks of writes.
    pub locks: KeyLocks,
    /// `--sync` coordination.
    pub durability: Durability,
    /// When the server started.
    pub started: Instant,
    /// Signalled by `SHUTDOWN`: the server stops as on SIGTERM.
    pub shutdown: tokio::sync::Notify,
    next_client_id: AtomicU64,
}

impl Shared {
    /// Shared state for `db` (laid out as `keyspace` says) served under `config` at
    /// `local_addr`.
    pub fn new(db: Db, config: Config, keyspace: Keyspace, local_addr: SocketAddr) -> Shared {
        Shared {
            keyspace,
            durability: Durability::new(config.sync),
            db,
            config,
            local_addr,
            stats: ServerStats::default(),
            cursors: ScanCursors::default(),
            locks: KeyLocks::default(),
            started: Instant::now(),
            shutdown: tokio::sync::Notify::new(),
            next_client_id: AtomicU64::new(1),
        }
    }

    /// A new client id.
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }
}

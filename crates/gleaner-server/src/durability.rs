//! `--sync`: when a write is acknowledged, relative to the WAL's fsync.
//!
//! - `always`: every write is a synced engine write ([`WriteOptions::sync`]): its reply is
//!   sent after the WAL holding it was fsynced. Concurrent clients' writes share fsyncs through
//!   the engine's group commit.
//! - `batch` (the default): writes are applied unsynced, and before the replies of a pipeline
//!   (everything a client sent that the server read in one go, up to its batch bounds) are
//!   sent, one [`Db::sync_wal`] covers them. An acknowledged write is as durable as under
//!   `always`; a pipeline of N writes costs one fsync, not N, and clients replying at the same
//!   time share it ([`Durability::sync_through`]).
//! - `everysec`: writes are acknowledged unsynced, and the server syncs the WAL once a second
//!   when anything was written since the last sync ([`Durability::sync_if_due`]), as Redis's
//!   `appendfsync everysec`. A power loss or kernel crash may lose the writes of the last
//!   second or so (recovery yields a prefix of the acknowledged writes); a crash of the server
//!   process loses nothing.
//! - `no`: writes are never synced by the server; a reply means the write is in the WAL in the
//!   operating system's page cache. It survives a crash of the server process, not a power
//!   loss or kernel crash (then the database recovers to a prefix of the acknowledged writes,
//!   possibly missing the last ones). The engine still syncs the WAL when a memtable is sealed
//!   and at a clean shutdown.

use std::sync::atomic::{AtomicU64, Ordering};

use gleaner::{Db, WriteOptions};
use parking_lot::Mutex;

/// The `--sync` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SyncMode {
    /// Every write is fsynced before its reply.
    Always,
    /// Each pipeline's writes are fsynced once, before its replies.
    Batch,
    /// Writes are acknowledged at once and fsynced once a second (Redis's `appendfsync
    /// everysec`).
    Everysec,
    /// The server never fsyncs (survives a process crash, not a power loss).
    No,
}

impl SyncMode {
    /// The name used on the command line and in INFO.
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Always => "always",
            SyncMode::Batch => "batch",
            SyncMode::Everysec => "everysec",
            SyncMode::No => "no",
        }
    }
}

/// Coalesces the WAL syncs of `--sync batch`.
///
/// Every write applied unsynced gets a ticket (a sequence number of writes that returned from
/// the engine); a sync records the highest ticket issued before it started, and a client whose
/// ticket is at or below that has nothing to wait for. So while one client's fsync runs, every
/// client that wrote meanwhile waits for the mutex and then, usually, for one more fsync that
/// covers them all.
#[derive(Debug)]
pub struct Durability {
    mode: SyncMode,
    tickets: AtomicU64,
    synced: Mutex<u64>,
    syncs: AtomicU64,
}

impl Durability {
    /// Coordination for `mode`.
    pub fn new(mode: SyncMode) -> Self {
        Durability {
            mode,
            tickets: AtomicU64::new(0),
            synced: Mutex::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    /// The mode.
    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    /// The options of an engine write under this mode.
    pub fn write_options(&self) -> WriteOptions {
        WriteOptions {
            sync: self.mode == SyncMode::Always,
        }
    }

    /// Call after an unsynced write returned from the engine: the ticket to pass to
    /// [`sync_through`](Self::sync_through) before acknowledging it (`None` when the mode needs
    /// no later sync).
    pub fn note_write(&self) -> Option<u64> {
        match self.mode {
            SyncMode::Batch => Some(self.tickets.fetch_add(1, Ordering::SeqCst) + 1),
            SyncMode::Everysec => {
                self.tickets.fetch_add(1, Ordering::SeqCst);
                None
            }
            SyncMode::Always | SyncMode::No => None,
        }
    }

    /// Under `everysec`, called once a second: syncs the WAL if a write returned since the
    /// last sync. Does nothing under the other modes.
    ///
    /// Errors: the engine's (the engine then refuses further writes).
    pub fn sync_if_due(&self, db: &Db) -> gleaner::Result<()> {
        if self.mode != SyncMode::Everysec {
            return Ok(());
        }
        let issued = self.tickets.load(Ordering::SeqCst);
        self.sync_through(db, issued)
    }

    /// Makes every write with a ticket up to `ticket` durable, syncing the WAL unless a sync
    /// that started after that write already did.
    ///
    /// Errors: the engine's; after a failed sync the engine refuses further syncs and writes,
    /// so no later caller is told its write is durable when it may not be.
    pub fn sync_through(&self, db: &Db, ticket: u64) -> gleaner::Result<()> {
        let mut synced = self.synced.lock();
        if *synced >= ticket {
            return Ok(());
        }
        // Every write with a ticket up to `target` has returned from the engine, so its WAL
        // record was written to the file before this sync starts.
        let target = self.tickets.load(Ordering::SeqCst);
        db.sync_wal()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        *synced = target;
        Ok(())
    }

    /// WAL syncs run by [`sync_through`](Self::sync_through) so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

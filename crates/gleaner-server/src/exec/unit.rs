//! Atomic units: a single data command, or every command of a `MULTI/EXEC`.
//!
//! A unit takes the key locks of its keys ([`crate::keylocks`]), runs its commands against the
//! database with their own pending writes visible to their later reads, collects the writes in
//! one [`WriteBatch`], and commits it with one engine write: all of it or nothing. Under
//! `WATCH` the write is the engine's conditional write ([`gleaner::Db::write_if_unchanged`]),
//! so the check of the watched keys and the write are one step. Replies are only released
//! once the write returned, so no write is acknowledged before the engine accepted it.
//!
//! A command that fails when it runs (`INCR` of a value that is not an integer, say) answers
//! its error and writes nothing; the unit's other commands go on, as in Redis's `EXEC`.

use std::borrow::Cow;
use std::collections::HashMap;

use bytes::Bytes;
use gleaner::{ReadOptions, Snapshot, WriteBatch};

use super::parse::DataCmd;
use crate::keylocks::LockMode;
use crate::keyspace::MAX_KEY_LEN;
use crate::resp::Reply;
use crate::session::{Session, Watch};
use crate::shared::Shared;
use crate::stats::ServerStats;

/// A key's value and expiry (milliseconds since the epoch, by the database's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub value: Bytes,
    /// When the key expires, if it does.
    pub expiry: Option<u64>,
}

/// Why a unit stopped.
#[derive(Debug)]
pub enum Failure {
    /// The engine failed a read or the write: nothing was written.
    Engine(gleaner::Error),
    /// The replies would exceed `--max-pending-bytes`: nothing was written, and the client
    /// is disconnected.
    ReplyTooLarge,
}

impl From<gleaner::Error> for Failure {
    fn from(e: gleaner::Error) -> Self {
        Failure::Engine(e)
    }
}

/// The error for a key a write cannot store.
pub fn key_too_long(len: usize) -> Reply {
    Reply::error(format!(
        "ERR key of {len} bytes exceeds gleaner-server's key limit of {MAX_KEY_LEN} bytes"
    ))
}

/// One atomic unit in progress.
pub struct Unit<'a> {
    pub(super) shared: &'a Shared,
    /// The database the unit's commands use (a `SELECT` queued in a transaction changes it).
    pub db: u8,
    /// Reads go to this snapshot when set (a multi-key read that holds no lock), so that they
    /// see one state of the database, as Redis's MGET does.
    snapshot: Option<&'a Snapshot>,
    /// The time the unit's commands run at (milliseconds since the epoch, the database's
    /// clock): relative expiries count from it, and a pending version that expires at or
    /// before it reads as absent.
    pub now: u64,
    /// The unit's writes, once it has one (a unit of reads allocates no batch).
    batch: Option<WriteBatch>,
    /// Writes of the unit so far, by stored key, seen by its later reads (`None`: deleted).
    pending: HashMap<Vec<u8>, Option<Entry>>,
    /// Bytes the replies may still take.
    reply_budget: usize,
}

impl<'a> Unit<'a> {
    fn stored(&self, db: u8, key: &'a [u8]) -> Cow<'a, [u8]> {
        self.shared.keyspace.encode(db, key)
    }

    fn read_opts(&self) -> ReadOptions<'a> {
        match self.snapshot {
            Some(s) => ReadOptions::default().at(s),
            None => ReadOptions::default(),
        }
    }

    fn count_read(&self, found: bool) {
        let s = &self.shared.stats;
        ServerStats::add(
            if found {
                &s.keyspace_hits
            } else {
                &s.keyspace_misses
            },
            1,
        );
    }

    /// The pending version of a stored key: `Some(None)` when the unit deleted it (or it
    /// expired).
    fn pending(&self, stored: &[u8]) -> Option<Option<&Entry>> {
        self.pending
            .get(stored)
            .map(|e| e.as_ref().filter(|e| e.expiry.is_none_or(|t| t > self.now)))
    }

    /// The value and expiry of `key` in database `db`, or `None`. A key over the key limit
    /// is absent (no write can have stored it).
    pub fn entry_in(&mut self, db: u8, key: &Bytes) -> Result<Option<Entry>, Failure> {
        if key.len() > MAX_KEY_LEN {
            self.count_read(false);
            return Ok(None);
        }
        let stored = self.stored(db, key);
        let found = match self.pending(&stored) {
            Some(e) => e.cloned(),
            None => self
                .shared
                .db
                .get_entry(&stored, &self.read_opts())?
                .map(|e| Entry {
                    value: e.value,
                    expiry: e.expiry_ms,
                }),
        };
        self.count_read(found.is_some());
        Ok(found)
    }

    /// The value and expiry of `key` in the unit's database.
    pub fn entry(&mut self, key: &Bytes) -> Result<Option<Entry>, Failure> {
        self.entry_in(self.db, key)
    }

    /// The value of `key` in the unit's database.
    pub fn value(&mut self, key: &Bytes) -> Result<Option<Bytes>, Failure> {
        Ok(self.entry(key)?.map(|e| e.value))
    }

    /// Whether `key` exists in database `db`, and its expiry: `Some(expiry)` or `None` when
    /// absent. Never reads a separated value.
    pub fn presence_in(&mut self, db: u8, key: &Bytes) -> Result<Option<Option<u64>>, Failure> {
        if key.len() > MAX_KEY_LEN {
            self.count_read(false);
            return Ok(None);
        }
        let stored = self.stored(db, key);
        let found = match self.pending(&stored) {
            Some(e) => e.map(|e| e.expiry),
            None => self.shared.db.get_expiry(&stored, &self.read_opts())?,
        };
        self.count_read(found.is_some());
        Ok(found)
    }

    /// [`Unit::presence_in`] in the unit's database.
    pub fn presence(&mut self, key: &Bytes) -> Result<Option<Option<u64>>, Failure> {
        self.presence_in(self.db, key)
    }

    /// Sets `key` in database `db` to `value` until `expiry` (an expiry at or before the
    /// unit's time deletes the key instead, as Redis does). `Err` is the error reply of a key
    /// over the limit (nothing is written).
    pub fn put_in(
        &mut self,
        db: u8,
        key: &Bytes,
        value: Bytes,
        expiry: Option<u64>,
    ) -> Result<(), Reply> {
        if key.len() > MAX_KEY_LEN {
            return Err(key_too_long(key.len()));
        }
        if expiry.is_some_and(|t| t <= self.now) {
            self.delete_in(db, key);
            return Ok(());
        }
        let stored = self.stored(db, key).into_owned();
        match expiry {
            Some(t) => self.batch_mut().put_with_expiry(&stored, &value, t),
            None => self.batch_mut().put(&stored, &value),
        }
        self.pending.insert(stored, Some(Entry { value, expiry }));
        Ok(())
    }

    /// [`Unit::put_in`] in the unit's database.
    pub fn put(&mut self, key: &Bytes, value: Bytes, expiry: Option<u64>) -> Result<(), Reply> {
        self.put_in(self.db, key, value, expiry)
    }

    /// Deletes `key` from database `db` (a key over the limit cannot exist: nothing to do).
    pub fn delete_in(&mut self, db: u8, key: &Bytes) {
        if key.len() > MAX_KEY_LEN {
            return;
        }
        let stored = self.stored(db, key).into_owned();
        self.batch_mut().delete(&stored);
        self.pending.insert(stored, None);
    }

    /// [`Unit::delete_in`] in the unit's database.
    pub fn delete(&mut self, key: &Bytes) {
        self.delete_in(self.db, key);
    }

    /// Charges `bytes` of reply to the budget.
    pub fn charge(&mut self, bytes: usize) -> Result<(), Failure> {
        let cost = bytes + 16;
        if cost > self.reply_budget {
            return Err(Failure::ReplyTooLarge);
        }
        self.reply_budget -= cost;
        Ok(())
    }

    /// A value as a reply, charged to the reply budget.
    pub fn reply_value(&mut self, value: Option<Bytes>) -> Result<Reply, Failure> {
        let Some(v) = value else {
            return Ok(Reply::Null);
        };
        self.charge(v.len())?;
        Ok(Reply::Bulk(v))
    }

    /// The unit's write batch, started on its first write.
    fn batch_mut(&mut self) -> &mut WriteBatch {
        self.batch.get_or_insert_with(WriteBatch::new)
    }

    /// The database index `index` names, if it is one of the server's.
    pub fn database(&self, index: i64) -> Option<u8> {
        self.shared.keyspace.valid(index).then_some(index as u8)
    }
}

/// The stored keys `cmds` touch when run from database `db`, following the `SELECT`s among
/// them (keys over the limit, which no command can store, are left out).
fn locked_keys(shared: &Shared, mut db: u8, cmds: &[DataCmd]) -> Vec<Vec<u8>> {
    let ks = &shared.keyspace;
    let mut keys = Vec::new();
    for cmd in cmds {
        if let DataCmd::Select(i) = cmd
            && ks.valid(*i)
        {
            db = *i as u8;
        }
        for k in cmd.keys() {
            if k.len() <= MAX_KEY_LEN {
                keys.push(ks.encode(db, k).into_owned());
            }
        }
        if let Some((k, other)) = cmd.other_db_key()
            && ks.valid(other)
            && k.len() <= MAX_KEY_LEN
        {
            keys.push(ks.encode(other as u8, k).into_owned());
        }
    }
    keys
}

/// Runs `cmds` as one atomic unit (`transaction`: a `MULTI/EXEC`, whose keys are all locked
/// exclusively) and returns their replies, or `None` when a watched key changed (nothing
/// was written), or the failure that stopped it (nothing written). A transaction's `SELECT`s
/// carry over to the session, as in Redis.
pub fn run_unit(
    shared: &Shared,
    session: &mut Session,
    cmds: &[DataCmd],
    transaction: bool,
    watch: Option<&Watch>,
) -> Result<Option<Vec<Reply>>, Failure> {
    let mode = if transaction || watch.is_some() {
        Some(LockMode::Exclusive)
    } else if cmds.iter().all(DataCmd::read_only) {
        None
    } else if cmds.iter().all(|c| c.read_only() || c.blind_write()) {
        Some(LockMode::Shared)
    } else {
        Some(LockMode::Exclusive)
    };
    // Reads that lock nothing need no stored keys.
    let _guard = mode.map(|m| {
        let mut keys = locked_keys(shared, session.db, cmds);
        if let Some(w) = watch {
            keys.extend(w.keys.iter().cloned());
        }
        shared.locks.lock(keys.iter(), m)
    });
    // Without a lock, reads of several keys could each see a different state; a snapshot
    // makes them see one. (Locked keys cannot change under the unit.)
    let snapshot = (mode.is_none() && cmds.iter().map(DataCmd::key_count).sum::<usize>() > 1)
        .then(|| shared.db.snapshot());
    let mut unit = Unit {
        shared,
        db: session.db,
        snapshot: snapshot.as_ref(),
        now: shared.db.time_ms(),
        batch: None,
        pending: HashMap::new(),
        reply_budget: shared.config.max_pending_bytes,
    };
    let mut replies = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        replies.push(super::apply(cmd, &mut unit)?);
    }
    let opts = shared.durability.write_options();
    let db_after = unit.db;
    let wrote = unit.batch.as_ref().is_some_and(|b| !b.is_empty());
    match (watch, unit.batch) {
        (Some(w), batch) => {
            // Checked even when the unit wrote nothing: EXEC fails if a watched key changed.
            let keys: Vec<&[u8]> = w.keys.iter().map(Vec::as_slice).collect();
            if !shared.db.write_if_unchanged(
                batch.unwrap_or_default(),
                &opts,
                &w.snapshot,
                &keys,
            )? {
                return Ok(None);
            }
        }
        (None, Some(batch)) if wrote => shared.db.write(batch, &opts)?,
        (None, _) => {}
    }
    if wrote && let Some(ticket) = shared.durability.note_write() {
        session.unsynced_ticket = Some(ticket);
    }
    session.db = db_after;
    Ok(Some(replies))
}

/// The reply (and disconnection) for a reply over `--max-pending-bytes`.
pub fn reply_too_large(shared: &Shared) -> super::Outcome {
    ServerStats::add(&shared.stats.limit_disconnections, 1);
    super::Outcome::Fatal(Reply::error(format!(
        "ERR reply would exceed --max-pending-bytes ({} bytes); closing the connection",
        shared.config.max_pending_bytes
    )))
}

//! The validity oracle: whether a record a GC job reads is still live. Every scheme answers
//! the same question (docs/gc.md, "Why GC may never drop a live record") in its own way: an
//! index-tree lookup, GetKey over index-decoupled key tables, Scavenger's DropCache shortcut,
//! and a drop set that compaction hands over (NovKV).

use std::sync::Arc;

use super::job::Validity;
use super::novkv::DropSet;
use super::validity::{TreeCheck, ValidityContext};
use crate::cache::TableCache;
use crate::error::Result;
use crate::hotness::DropCache;
use crate::key::{MAX_SEQUENCE, SeqNo, make_lookup_key};
use crate::lookup::{KeyLookup, Lookup};
use crate::memtable::MemTable;
use crate::table::ReadCtx;
use crate::value::ValueHandle;
use crate::version::Version;

/// One record of a victim, as the job met it.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    /// The record's user key.
    pub user_key: &'a [u8],
    /// The record's sequence number.
    pub seq: SeqNo,
    /// Where the record is: its victim, offset and length.
    pub location: ValueHandle,
}

/// What a job's checks are decided against: one pinned version of the index tree, the
/// memtables of the same moment, and the snapshots live once they were pinned.
pub struct OracleEnv<'a> {
    /// The memtables, newest first. Versions there may not survive a crash (an unsynced WAL
    /// tail), so an oracle that reads them must make them durable before its job's verdicts
    /// take effect (policy `titan` syncs the WAL before it retires its victims).
    pub memtables: &'a [Arc<MemTable>],
    /// The newest sequence number when the memtables were pinned: they keep taking writes,
    /// and lookups there read at it, so they see the same moment as the version.
    pub memtable_seq: SeqNo,
    /// The pinned version.
    pub version: &'a Version,
    /// Key tables, for lookups.
    pub tables: &'a TableCache,
    /// The snapshots and the durable sequence number.
    pub validity: &'a ValidityContext,
    /// How lookups read (I/O class, caching).
    pub ctx: ReadCtx,
    /// The drop keys of the job's victims, when the oracle asks for them
    /// ([`ValidityOracle::uses_drop_keys`]).
    pub drop_set: Option<&'a DropSet>,
}

/// Decides whether records are live.
pub trait ValidityOracle: Send + Sync + std::fmt::Debug {
    /// The verdict on `record`.
    ///
    /// Errors: reading the index tree fails.
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity>;

    /// Whether the checks need the drop keys of the job's victims (NovKV): the job then reads
    /// the victims' drop blocks into [`OracleEnv::drop_set`] before it reads any record.
    /// Default: no.
    fn uses_drop_keys(&self) -> bool {
        false
    }
}

/// How an [`IndexOracle`] looks a key up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupKind {
    /// The read path's point lookup (TerarkDB): in a mixed key table it reads a data block full
    /// of other keys' values.
    Get,
    /// GetKey (Scavenger §3.3): in an index-decoupled key table it reads handle blocks, never a
    /// value.
    GetKey,
}

/// The TerarkDB family's oracle: a record is live if the index tree still holds its version
/// as the key's newest (or, when a snapshot may read it, at all), checked by a lookup; with a
/// DropCache, a record its key's newer version is known to hide is garbage without a lookup.
#[derive(Debug, Clone)]
pub struct IndexOracle {
    lookup: LookupKind,
    drop_cache: Option<Arc<DropCache>>,
}

impl IndexOracle {
    /// An oracle looking keys up with `lookup`, asking `drop_cache` first when given.
    pub fn new(lookup: LookupKind, drop_cache: Option<Arc<DropCache>>) -> Self {
        IndexOracle { lookup, drop_cache }
    }
}

impl ValidityOracle for IndexOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        let (key, seq) = (record.user_key, record.seq);
        let newest = self.drop_cache.as_ref().and_then(|d| d.newest_seq(key));
        if env.validity.dead_by_drop_cache(seq, newest) {
            return Ok(Validity::DeadByDropCache);
        }
        // Newest: live only as the key's newest version (a shadowed version no snapshot reads
        // is reclaimed even while the tree still holds it). Present: a snapshot may read it, so
        // it is live while the tree holds its version.
        let at = match env.validity.tree_check(seq) {
            TreeCheck::Newest => MAX_SEQUENCE,
            TreeCheck::Present => seq,
        };
        let lookup = make_lookup_key(key, at);
        let live = match self.lookup {
            // The version found names this record (the one written at `seq`, wherever it is).
            LookupKind::GetKey => matches!(
                env.version.get_key(env.tables, &lookup, env.ctx)?,
                Some(KeyLookup::Handle { record_seq, .. }) if record_seq == seq
            ),
            LookupKind::Get => matches!(
                env.version.get(env.tables, &lookup, env.ctx)?,
                Some(Lookup::Handle { record_seq, .. }) if record_seq == seq
            ),
        };
        Ok(if live { Validity::Live } else { Validity::Dead })
    }
}

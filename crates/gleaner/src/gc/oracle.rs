//! The validity oracle: whether a record a GC job reads is still live. Every scheme answers
//! the same question (docs/gc.md, "Why GC may never drop a live record") in its own way: an
//! index-tree lookup, GetKey over index-decoupled key tables, Scavenger's DropCache shortcut,
//! and a drop set that compaction hands over (NovKV).

use std::sync::Arc;

use super::job::Validity;
use super::novkv::DropSet;
use super::validity::ValidityContext;
use crate::cache::{TableCache, ValueTableCache};
use crate::error::Result;
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
    /// Where the record is: its victim, offset and length. One record can have two copies in
    /// live tables (a `blobdb` relocation's old copy, an interrupted `titan` job's victim and
    /// output): only the one readers reach is live, so verdicts compare places.
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
    /// Value tables, to find which copy of a record a handle naming a collected table reaches.
    pub values: &'a ValueTableCache,
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

/// The TerarkDB family's oracle: a record is live if the version some reader reads — the key's
/// newest, or the newest at or below a snapshot — names it and reaches it at its place (another
/// copy of the record is garbage), checked by lookups in the pinned index tree. (Scavenger's
/// DropCache shortcut wraps it: `gc/scavenger/`.)
#[derive(Debug, Clone)]
pub struct IndexOracle {
    lookup: LookupKind,
}

impl IndexOracle {
    /// An oracle looking keys up with `lookup`.
    pub fn new(lookup: LookupKind) -> Self {
        IndexOracle { lookup }
    }
}

impl IndexOracle {
    /// The sequence number of the newest version of `key` at or below `at` in the pinned tree,
    /// and its handle when it names the record written at `record_seq`; `None` when the tree
    /// holds no version there.
    fn version_at(
        &self,
        env: &OracleEnv<'_>,
        key: &[u8],
        at: SeqNo,
        record_seq: SeqNo,
    ) -> Result<Option<(SeqNo, Option<ValueHandle>)>> {
        let lookup = make_lookup_key(key, at);
        let names = |handle, s: SeqNo| (s == record_seq).then_some(handle);
        Ok(match self.lookup {
            LookupKind::GetKey => {
                env.version
                    .get_key(env.tables, &lookup, env.ctx)?
                    .map(|f| match f {
                        KeyLookup::Handle {
                            handle,
                            seq,
                            record_seq: s,
                        } => (seq, names(handle, s)),
                        other => (other.seq(), None),
                    })
            }
            LookupKind::Get => {
                env.version
                    .get_seq(env.tables, &lookup, env.ctx)?
                    .map(|(seq, f)| match f {
                        Lookup::Handle {
                            handle,
                            record_seq: s,
                            ..
                        } => (seq, names(handle, s)),
                        _ => (seq, None),
                    })
            }
        })
    }
}

impl ValidityOracle for IndexOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        let (key, seq) = (record.user_key, record.seq);
        // The readers that may reach the record: the present, and each snapshot at or above its
        // sequence number. Each reads the newest version at or below its own, so one lookup per
        // distinct version read, newest first: the present's, then that of the newest snapshot
        // below the version found, and so on down to the record's own sequence number (a
        // version naming the record is never older than it). The record is live when one of
        // those versions names it and reaches it at its place: a relocated record's old copy is
        // garbage although its version is live, and a `titan` write-back (or an alias) names
        // the record from a newer version than the record's own, which compaction may have
        // dropped already.
        let mut at = MAX_SEQUENCE;
        loop {
            let found = self.version_at(env, key, at, seq)?;
            let Some((version_seq, names)) = found else {
                return Ok(Validity::Dead);
            };
            if let Some(h) = names
                && env.version.values().reads_record_at(
                    env.values,
                    key,
                    seq,
                    h,
                    record.location,
                    env.ctx.class,
                )?
            {
                return Ok(Validity::Live);
            }
            match env.validity.newest_snapshot_in(seq, version_seq) {
                Some(x) => at = x,
                None => return Ok(Validity::Dead),
            }
        }
    }
}

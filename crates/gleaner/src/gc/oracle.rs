//! The validity oracle: whether a record a GC job reads is still live. Every scheme answers
//! the same question (docs/gc.md, "Why GC may never drop a live record") in its own way: an
//! index-tree lookup, GetKey over index-decoupled key tables, a cache of recently dropped keys,
//! or the drop keys compaction handed over. An oracle may prepare each job
//! ([`ValidityOracle::begin_job`]): read what it needs of the victims first, then judge their
//! records, then check its verdicts against the version's counts.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::validity::ValidityContext;
use crate::cache::{TableCache, ValueTableCache};
use crate::error::Result;
use crate::key::{MAX_SEQUENCE, SeqNo, make_lookup_key};
use crate::lookup::{KeyLookup, Lookup};
use crate::memtable::MemTable;
use crate::table::ReadCtx;
use crate::value::{HandlePayload, ValueHandle};
use crate::version::{DropBlock, Garbage, Version};

/// The answer of a GC validity check for one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// Still referenced: the record is copied.
    Live,
    /// Garbage: the record is dropped. (How the oracle knew — a lookup, a cache, a drop key —
    /// is the policy's to count, `stats().gc.policy_stats`.)
    Dead,
}

/// A verdict with what a policy may learn from it: for a live record, the payload of the
/// handle of the version that reads it, when the oracle looked that version up (an
/// [`IndexOracle`] with [`LookupKind::Get`] does; others answer without it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Live or dead.
    pub validity: Validity,
    /// The payload of the live version's handle, if known and any.
    pub payload: Option<HandlePayload>,
}

impl From<Validity> for Verdict {
    fn from(validity: Validity) -> Self {
        Verdict {
            validity,
            payload: None,
        }
    }
}

/// One record of a victim, as the job met it.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    /// The record's user key.
    pub user_key: &'a [u8],
    /// The record's sequence number.
    pub seq: SeqNo,
    /// Where the record is: its victim, offset and length. One record can have two copies in
    /// live tables (a relocation's old copy, an interrupted write-back job's victim and its
    /// output): only the one readers reach is live, so verdicts compare places.
    pub location: ValueHandle,
    /// When the record's version expires, if it does (the dense index keeps it). The engine
    /// judges a record whose version has expired for every reader dead, whatever the oracle
    /// says (docs/gc.md, "Expiring keys").
    pub expiry: Option<u64>,
}

/// What a job's checks are decided against: one pinned version of the index tree, the
/// memtables of the same moment, and the snapshots live once they were pinned.
pub struct OracleEnv<'a> {
    /// The memtables, newest first. Versions there may not survive a crash (an unsynced WAL
    /// tail), so an oracle that reads them must make them durable before its job's verdicts
    /// take effect (the write-back commit syncs the WAL before it retires its victims).
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
}

/// Reads one drop block of the pinned version, calling its second argument with the user key
/// and record sequence number of each drop key the block holds.
///
/// Errors: the drop file is missing or damaged ([`Error::Corruption`](crate::Error::Corruption)).
pub type ReadDropBlock<'a> = dyn FnMut(&DropBlock, &mut dyn FnMut(&[u8], SeqNo)) -> Result<()> + 'a;

/// What a job's checks are prepared from, before the job reads any record.
pub struct JobStart<'a> {
    /// The pinned version the job's checks read.
    pub version: &'a Version,
    /// The victims, all live in `version`.
    pub victims: &'a [u64],
    /// The victims' garbage as `version` counts it.
    pub garbage: Garbage,
    /// Reads the drop keys of a drop block `version` attaches to a victim
    /// (`version.values().drop_blocks(victim)`): the identities of records compactions made
    /// garbage, written where the policy's hooks ask for them
    /// ([`CompactionHooks::records_drop_keys`](super::CompactionHooks::records_drop_keys)).
    pub read_drop_block: &'a mut ReadDropBlock<'a>,
}

/// The checks of one GC job, as its oracle prepared them ([`ValidityOracle::begin_job`]).
pub trait JobOracle: Send + Sync {
    /// The verdict on `record`; called from several threads at once.
    ///
    /// Errors: reading the index tree fails.
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity>;

    /// The verdict on `record` with the live version's payload, if the oracle knows it.
    /// Default: [`JobOracle::check`], without a payload.
    ///
    /// Errors: as [`JobOracle::check`].
    fn verdict(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Verdict> {
        self.check(record, env).map(Verdict::from)
    }

    /// Bytes per output table, given the engine's (`value_table_size`). Default: the engine's.
    fn output_table_size(&self, target: u64) -> u64 {
        target
    }

    /// Called once the job has judged every record and written `outputs` (their table
    /// numbers), before its commit: checks the verdicts against the pinned version's counts.
    /// Returns garbage the job copied because it could not tell it, with the output holding
    /// it, for an inheritance commit to count there (a write-back commit counts every copied
    /// record that no key names any more as garbage of its output anyway, and ignores it).
    /// Default: none.
    ///
    /// Errors: the verdicts contradict the counts ([`Error::Corruption`](crate::Error::Corruption)):
    /// nothing of the job is committed.
    fn finish(&self, outputs: &[u64]) -> Result<Option<(u64, Garbage)>> {
        let _ = outputs;
        Ok(None)
    }

    /// The drop blocks the job read, if it read any: the commit then hands the victims' other
    /// drop blocks (attached after the version was pinned, naming records the job may have
    /// copied) on to the outputs. Default: none, and the victims' drop blocks go with them.
    fn drop_blocks_read(&self) -> Option<&BTreeSet<DropBlock>> {
        None
    }

    /// Called once the job's commit is installed, with its victims and outputs (for a
    /// write-back commit, once the outputs are installed; the write-backs follow). Default:
    /// nothing.
    fn committed(&self, victims: &[u64], outputs: &[u64]) {
        let _ = (victims, outputs);
    }
}

/// Decides whether records are live.
pub trait ValidityOracle: Send + Sync + std::fmt::Debug {
    /// The verdict on `record`.
    ///
    /// Errors: reading the index tree fails.
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity>;

    /// The verdict on `record` with the live version's payload, if the oracle knows it.
    /// Default: [`ValidityOracle::check`], without a payload.
    ///
    /// Errors: as [`ValidityOracle::check`].
    fn verdict(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Verdict> {
        self.check(record, env).map(Verdict::from)
    }

    /// Whether every verdict is read from the pinned index tree (and memtables) alone. A
    /// compaction running when the job pinned them drops only versions that every reader of
    /// the pinned tree already sees shadowed, deleted or expired, so such an oracle judges
    /// their records dead either way, and the job need not wait for it (docs/gc.md, "Racing
    /// with compaction", rule 2). An oracle that judges from what compactions hand over when
    /// they commit (drop keys, say) must say no: its jobs then wait for those compactions
    /// before their checks. Default: no.
    fn reads_index_tree(&self) -> bool {
        false
    }

    /// Prepares the checks of the job `start` describes. Default: [`ValidityOracle::check`]
    /// for every record, nothing more.
    ///
    /// Errors: reading what the checks need fails (a drop block, say); the job stops.
    fn begin_job<'s>(&'s self, start: &mut JobStart<'_>) -> Result<Box<dyn JobOracle + 's>> {
        let _ = start;
        Ok(Box::new(EachRecord(self)))
    }
}

/// A job's checks that are the oracle's per-record [`ValidityOracle::check`] alone.
pub struct EachRecord<'s, O: ValidityOracle + ?Sized>(pub &'s O);

impl<O: ValidityOracle + ?Sized> JobOracle for EachRecord<'_, O> {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        self.0.check(record, env)
    }

    fn verdict(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Verdict> {
        self.0.verdict(record, env)
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
/// copy of the record is garbage), checked by lookups in the pinned index tree. (A cache of
/// recently dropped keys may answer first, wrapping it.)
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
    /// and its handle (with its payload, for [`LookupKind::Get`]) when it names the record
    /// written at `record_seq`; `None` when the tree holds no version there.
    #[allow(clippy::type_complexity)]
    fn version_at(
        &self,
        env: &OracleEnv<'_>,
        key: &[u8],
        at: SeqNo,
        record_seq: SeqNo,
    ) -> Result<Option<(SeqNo, Option<(ValueHandle, Option<HandlePayload>)>)>> {
        let lookup = make_lookup_key(key, at);
        let names = |handle, payload, s: SeqNo| (s == record_seq).then_some((handle, payload));
        Ok(match self.lookup {
            LookupKind::GetKey => {
                env.version
                    .get_key(env.tables, &lookup, env.ctx)?
                    .map(|f| match f {
                        KeyLookup::Handle {
                            handle,
                            seq,
                            record_seq: s,
                            ..
                        } => (seq, names(handle, None, s)),
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
                            payload,
                            ..
                        } => (seq, names(handle, payload, s)),
                        _ => (seq, None),
                    })
            }
        })
    }
}

impl ValidityOracle for IndexOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        self.verdict(record, env).map(|v| v.validity)
    }

    /// Lookups in the pinned tree, nothing else.
    fn reads_index_tree(&self) -> bool {
        true
    }

    fn verdict(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Verdict> {
        let (key, seq) = (record.user_key, record.seq);
        // The readers that may reach the record: the present, and each snapshot at or above its
        // sequence number. Each reads the newest version at or below its own, so one lookup per
        // distinct version read, newest first: the present's, then that of the newest snapshot
        // below the version found, and so on down to the record's own sequence number (a
        // version naming the record is never older than it). The record is live when one of
        // those versions names it and reaches it at its place: a relocated record's old copy is
        // garbage although its version is live, and a written-back handle (or an alias) names
        // the record from a newer version than the record's own, which compaction may have
        // dropped already.
        let mut at = MAX_SEQUENCE;
        loop {
            let found = self.version_at(env, key, at, seq)?;
            let Some((version_seq, names)) = found else {
                return Ok(Validity::Dead.into());
            };
            if let Some((h, payload)) = names
                && env.version.values().reads_record_at(
                    env.values,
                    key,
                    seq,
                    h,
                    record.location,
                    env.ctx.class,
                )?
            {
                return Ok(Verdict {
                    validity: Validity::Live,
                    payload,
                });
            }
            match env.validity.newest_snapshot_in(seq, version_seq) {
                Some(x) => at = x,
                None => return Ok(Validity::Dead.into()),
            }
        }
    }
}

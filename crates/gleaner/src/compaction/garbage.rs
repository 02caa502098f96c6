//! Garbage accounting from drop events, and rewriting of stale handles.
//!
//! Every handle a compaction drops makes its record garbage. The record's table is found at drop
//! time (following inheritance); the garbage is recorded in the compaction's version edit, so it
//! is persisted with the change that created it.
//!
//! Tables a GC job is collecting ("claimed") need care: the job checks records against the index
//! tree while compactions keep dropping handles. A compaction that started before a table was
//! claimed counts its drops into it in aggregate. Where the policy's jobs wait for such
//! compactions before their checks, the drops are simply counted against the victim. Where they
//! do not (their oracle reads the index tree alone, which shows each such record dead already,
//! so no job copies one), the job may commit first: the drops then name a table collected
//! meanwhile, and count as reclaimed early (or into a retired table), with nothing left to count.
//! A compaction that started after the claim keeps each drop into a claimed table in detail
//! (key, sequence, length): at its commit the drop is counted against the table if it is still
//! live (and handed to the GC job, which moves it onto the table the record was copied to), or
//! against the job's output otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::iterator::{DropEvent, DropListener};
use crate::cache::ValueTableCache;
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::{ParsedKey, SeqNo, ValueKind};
use crate::value::StoredHandle;
use crate::version::{Garbage, TableMeta, ValueSet, Version, VersionEdit};

/// A dropped handle into a table a GC job had claimed, kept in detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDrop {
    /// The table the record was in when the handle was dropped.
    pub table: u64,
    /// The record's user key.
    pub key: Vec<u8>,
    /// The record's sequence number.
    pub seq: SeqNo,
    /// The record's length.
    pub len: u64,
}

/// A drop a GC job must account for: the record `seq` of length `len` in a claimed victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateDrop {
    /// The record's sequence number (unique per write).
    pub seq: SeqNo,
    /// The record's length.
    pub len: u64,
}

/// What [`GarbageListener::settle`] leaves for the caller.
#[derive(Debug, Default)]
pub struct Settled {
    /// Drops into tables GC jobs hold, per table, for those jobs.
    pub late: Vec<(u64, LateDrop)>,
    /// Dropped handles whose record could not be placed (0 unless something is wrong).
    pub unresolved: u64,
    /// Dropped handles whose record a GC job had already reclaimed (no garbage to count).
    pub reclaimed_early: u64,
    /// Dropped handles whose record is in a retired table (no garbage to count: the table has
    /// no account, and a newer version references the live copy).
    pub retired: u64,
}

/// Collects the garbage a compaction creates.
pub struct GarbageListener {
    version: Arc<Version>,
    /// Opens value tables when a collected table's records went to several outputs (hot and
    /// cold) and the dropped record must be looked up to be placed.
    cache: Arc<ValueTableCache>,
    claimed: BTreeSet<u64>,
    /// Keep every drop in detail, as into a claimed table (see [`GarbageListener::for_flush`]).
    detail_all: bool,
    /// Value segments the edit installs (see [`GarbageListener::sealing`]).
    sealing: BTreeSet<u64>,
    /// GC jobs that claimed a table after this job started may commit before it (see
    /// [`GarbageListener::overtaken_by_gc`]).
    overtaken: bool,
    aggregated: BTreeMap<u64, Garbage>,
    detailed: Vec<ClaimedDrop>,
    unresolved: u64,
    reclaimed_early: u64,
    retired: u64,
    /// The first error that kept a drop from being placed; `settle` returns it.
    failure: Option<Error>,
}

impl GarbageListener {
    /// A listener resolving handles in `version`; `claimed` are the tables GC jobs held when the
    /// compaction started.
    pub fn new(version: Arc<Version>, cache: Arc<ValueTableCache>, claimed: BTreeSet<u64>) -> Self {
        GarbageListener {
            version,
            cache,
            claimed,
            detail_all: false,
            sealing: BTreeSet::new(),
            overtaken: false,
            aggregated: BTreeMap::new(),
            detailed: Vec::new(),
            unresolved: 0,
            reclaimed_early: 0,
            retired: 0,
            failure: None,
        }
    }

    /// The listener of a flush: it keeps every drop in detail and places each against the
    /// version its edit applies to. A GC job waits for the compactions that started before its
    /// claim, not for flushes; a flush drops handles only where a write-back or an alias put
    /// one into a memtable (few), and the table such a handle names may be claimed, collected
    /// and retired while the flush runs: counted in aggregate, the drop could not be placed
    /// (found with write-back GC on background threads: one drop in about 30 runs unplaced).
    #[must_use]
    pub fn for_flush(mut self) -> Self {
        self.detail_all = true;
        self
    }

    /// The listener of a compaction that GC jobs claiming tables after it started do not wait
    /// for (`overtaken`: the policy's oracle reads the index tree alone, and no compaction
    /// relocates). Such a job judges every record this compaction drops dead, so it copies
    /// none; when it commits first, a drop counted in aggregate into one of its victims, gone
    /// at the settle, was reclaimed early by it (or, for a write-back job, is in a retired
    /// table), rather than unplaced.
    #[must_use]
    pub fn overtaken_by_gc(mut self, overtaken: bool) -> Self {
        self.overtaken = overtaken;
        self
    }

    /// The listener of a flush that seals the value segments `numbers` and installs them in
    /// its edit (`separate_at=write`): a handle into one that the flush drops (its key was
    /// written again in the memtables) makes its record garbage of that segment, counted in
    /// the same edit, after the edit adds it.
    #[must_use]
    pub fn sealing(mut self, numbers: impl IntoIterator<Item = u64>) -> Self {
        self.add_sealing(numbers);
        self
    }

    /// Adds `numbers` to the segments the edit installs (see [`GarbageListener::sealing`]):
    /// a recovery finds them as it replays.
    pub fn add_sealing(&mut self, numbers: impl IntoIterator<Item = u64>) {
        self.sealing.extend(numbers);
    }

    /// Counts the old records of values the compaction relocated (the kept-entry hook's `Relocate`) as garbage
    /// of their tables, like dropped handles: the entries that referenced them now name the
    /// new copies. Relocation only reads live tables, which no GC job of that policy claims.
    pub fn add_relocated(&mut self, relocated: &BTreeMap<u64, Garbage>) {
        for (&table, g) in relocated {
            debug_assert!(
                !self.claimed.contains(&table),
                "relocated from claimed {table}"
            );
            let a = self.aggregated.entry(table).or_default();
            a.records += g.records;
            a.bytes += g.bytes;
        }
    }

    /// Dropped handles whose record could not be placed (should stay 0).
    pub fn unresolved(&self) -> u64 {
        self.unresolved
    }

    /// Dropped handles whose record a GC job had already reclaimed.
    pub fn reclaimed_early(&self) -> u64 {
        self.reclaimed_early
    }

    /// Adds the garbage to `edit`, resolved against `current` (the version the edit applies to).
    /// Drops into tables still claimed are returned for the GC jobs holding them; tables that
    /// become entirely garbage (and are not claimed) are deleted by the edit.
    ///
    /// # Errors
    ///
    /// The first error (other than corruption) met while placing a drop, at drop time or here:
    /// the compaction must then fail, so that its drops are counted when it runs again rather
    /// than lost.
    ///
    /// `now` is the database's time: a table gone since the compaction started whose records
    /// had all expired by then (`ValueTableMeta::max_expiry` at or before `now`) was deleted
    /// whole for it (`db/expired_tables.rs`), and its drops count as reclaimed early.
    pub fn settle(
        mut self,
        current: &Version,
        claimed_now: &BTreeSet<u64>,
        edit: &mut VersionEdit,
        now: u64,
    ) -> Result<Settled> {
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        let values = current.values();
        let mut delta = self.aggregated;
        let mut unresolved = self.unresolved;
        let mut late = Vec::new();
        let mut reclaimed_early = 0;
        let mut retired = 0;
        delta.retain(|t, g| {
            if self.sealing.contains(t) {
                return true;
            }
            let live = values.live(*t).is_some();
            // A table whose records all expire may have been deleted whole since the drops were
            // placed (`db/expired_tables.rs`): the dropped versions had expired, their records
            // went with the table, and nothing is left to count.
            let expired = self
                .version
                .values()
                .live(*t)
                .is_some_and(|v| v.max_expiry.is_some_and(|e| e <= now));
            if !live && expired {
                reclaimed_early += g.records;
            } else if !live && self.overtaken && values.retired_table(*t).is_some() {
                retired += g.records;
            } else if !live && self.overtaken {
                reclaimed_early += g.records;
            } else if !live {
                unresolved += 1;
            }
            live
        });
        self.reclaimed_early += reclaimed_early;
        self.retired += retired;
        for d in std::mem::take(&mut self.detailed) {
            let t = match place(values, &self.cache, &self.sealing, d.table, &d.key, d.seq)? {
                Placement::Table(t) => t,
                Placement::ReclaimedEarly => {
                    self.reclaimed_early += 1;
                    continue;
                }
                Placement::Unknown => {
                    unresolved += 1;
                    continue;
                }
                Placement::Retired => {
                    self.retired += 1;
                    continue;
                }
            };
            let g = delta.entry(t).or_default();
            g.records += 1;
            g.bytes += d.len;
            if claimed_now.contains(&t) {
                late.push((
                    t,
                    LateDrop {
                        seq: d.seq,
                        len: d.len,
                    },
                ));
            }
        }
        for (&t, g) in &delta {
            edit.value_garbage.push((t, *g));
            if let Some(v) = values.live(t) {
                let total = values.garbage(t).records + g.records;
                if total >= v.records && !claimed_now.contains(&t) {
                    edit.deleted_value_tables.push(t);
                }
            }
        }
        Ok(Settled {
            late,
            unresolved,
            reclaimed_early: self.reclaimed_early,
            retired: self.retired,
        })
    }
}

impl DropListener for GarbageListener {
    /// Exact from the table's dependence when every record its handles name is still in the
    /// value table the handle names (a live table, which no GC job claimed when the compaction
    /// started: its records were never moved, nor reclaimed early) and none of the handles is
    /// an alias (which frees nothing).
    fn accepts_whole_table(&self, table: &TableMeta) -> bool {
        table.aliases == 0
            && table.dependence.iter().all(|d| {
                self.version.values().live(d.value_table).is_some()
                    && !self.claimed.contains(&d.value_table)
            })
    }

    fn on_whole_table(&mut self, table: &TableMeta) {
        for d in &table.dependence {
            let a = self.aggregated.entry(d.value_table).or_default();
            a.records += d.count;
            a.bytes += d.bytes;
        }
    }

    fn on_drop(&mut self, event: &DropEvent<'_>) {
        if event.key.kind != ValueKind::ValueHandle {
            return;
        }
        let Ok(stored) = StoredHandle::decode(event.value, "compaction input", 0) else {
            self.unresolved += 1;
            return;
        };
        // An alias references its record only beside the record's owner, which compaction
        // keeps while the alias is the newest version: dropping the alias frees nothing.
        if stored.alias {
            return;
        }
        let (handle, record_seq) = (stored.location, stored.record_seq(event.key.seq));
        let table = match place(
            self.version.values(),
            &self.cache,
            &self.sealing,
            handle.file_number,
            event.key.user_key,
            record_seq,
        ) {
            Ok(Placement::Table(t)) => t,
            Ok(Placement::ReclaimedEarly) => {
                self.reclaimed_early += 1;
                return;
            }
            Ok(Placement::Unknown) => {
                self.unresolved += 1;
                return;
            }
            Ok(Placement::Retired) => {
                self.retired += 1;
                return;
            }
            Err(e) => {
                self.failure.get_or_insert(e);
                return;
            }
        };
        if self.detail_all || self.claimed.contains(&table) {
            self.detailed.push(ClaimedDrop {
                table,
                key: event.key.user_key.to_vec(),
                seq: record_seq,
                len: handle.len,
            });
        } else {
            let g = self.aggregated.entry(table).or_default();
            g.records += 1;
            g.bytes += handle.len;
        }
    }
}

/// Where the record of a dropped handle is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// In this live table: its garbage grows.
    Table(u64),
    /// Nowhere: a GC job already reclaimed it while the index tree still held the (shadowed)
    /// version, so there is no garbage left to count.
    ReclaimedEarly,
    /// Unknown: a table that inheritance leads to is damaged.
    Unknown,
    /// In a retired table (collected by write-back): it has no garbage account, and the
    /// record's live copy, if any, is referenced by a newer version.
    Retired,
}

/// Where record `(user_key, seq)`, written to table `number`, is now: the table itself when
/// live (a live table holds every record written to it) or one of the value segments the edit
/// installs (`sealing`); else the candidate inheritance leads to whose dense index has the
/// record; else nowhere ([`Placement::ReclaimedEarly`]). Every candidate is checked, even a
/// single one, because a GC job may have reclaimed the record of a shadowed version early (see
/// docs/gc.md).
fn place(
    values: &ValueSet,
    cache: &ValueTableCache,
    sealing: &BTreeSet<u64>,
    number: u64,
    user_key: &[u8],
    seq: SeqNo,
) -> Result<Placement> {
    if values.live(number).is_some() || sealing.contains(&number) {
        return Ok(Placement::Table(number));
    }
    if values.retired_table(number).is_some() {
        return Ok(Placement::Retired);
    }
    for v in values.candidates(number, user_key) {
        // Dense index blocks are cached: neighbouring drops share them.
        let found = cache
            .get(v.number, v.file_size, IoClass::CompactionRead)
            .and_then(|t| t.find(user_key, seq, IoClass::CompactionRead, true));
        match found {
            Ok(Some(_)) if values.live(v.number).is_none() => return Ok(Placement::Retired),
            Ok(Some(_)) => return Ok(Placement::Table(v.number)),
            Ok(None) => {}
            // A damaged table stays damaged: the drop is counted as unresolved (stats and
            // `gleaner check` report it) rather than failing every compaction that meets it.
            Err(e) if e.is_corruption() => return Ok(Placement::Unknown),
            // An I/O error may pass. Counting the drop as unresolved would lose its garbage for
            // good (the table would never be collected); failing the compaction keeps its
            // inputs, and so its drops, for the next run.
            Err(e) => return Err(e),
        }
    }
    Ok(Placement::ReclaimedEarly)
}

/// Points handles that name collected tables at the table now holding their record, so reads
/// stop paying for inheritance and old inheritance records can be pruned.
pub struct HandleRewriter<'a> {
    version: &'a Version,
    cache: &'a ValueTableCache,
    /// Handles rewritten so far.
    pub rewritten: u64,
    /// Stale handles kept as they are because their record was reclaimed early.
    pub kept_unlocatable: u64,
}

impl<'a> HandleRewriter<'a> {
    /// A rewriter resolving in `version`.
    pub fn new(version: &'a Version, cache: &'a ValueTableCache) -> Self {
        HandleRewriter {
            version,
            cache,
            rewritten: 0,
            kept_unlocatable: 0,
        }
    }

    /// The replacement value of entry `ikey` / `value`, if it is a stale handle: the same
    /// record (and record sequence number, alias flag and payload) at its current place.
    pub fn rewrite(&mut self, key: &ParsedKey<'_>, value: &[u8]) -> Result<Option<StoredHandle>> {
        if key.kind != ValueKind::ValueHandle {
            return Ok(None);
        }
        let stored = StoredHandle::decode(value, "compaction input", 0)?;
        let handle = stored.location;
        let values = self.version.values();
        // A live table holds the record where the handle says; so does a retired one, which
        // only versions a newer one shadows still name (they go when compaction drops them).
        if values.live(handle.file_number).is_some()
            || values.retired_table(handle.file_number).is_some()
        {
            return Ok(None);
        }
        // No record: a GC job reclaimed it early because the version is shadowed (no snapshot
        // can read it). The handle is kept as it is; it is never resolved, and compaction
        // drops it once it meets the newer version.
        let Some(at) = self.version.values().try_locate(
            self.cache,
            key.user_key,
            stored.record_seq(key.seq),
            handle,
            IoClass::CompactionRead,
            false,
        )?
        else {
            self.kept_unlocatable += 1;
            return Ok(None);
        };
        self.rewritten += 1;
        Ok(Some(StoredHandle {
            location: at.handle,
            ..stored
        }))
    }
}

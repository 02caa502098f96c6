//! A version: the sorted runs of key tables of every level at one point in time. Versions are
//! immutable and shared (`Arc`); readers and iterators hold the version they started with.
//!
//! Reads search the runs in *search order*: L0's tables (each a run) newest first, then each
//! deeper level's runs newest first, level after level; the first version of a key found wins.
//! That is correct because every compaction strategy keeps the versions of each key in search
//! order newest first (docs/architecture.md, "Sorted runs"); what a version can check on its own
//! is checked by [`Version::check_invariants`] whenever an edit is applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::edit::VersionEdit;
use super::file_meta::FileMetaData;
use super::level_iter::LevelIter;
use super::routing::{self, PARTITION_STRIDE, Routing};
use super::run::{RunId, SortedRun};
use super::value_set::ValueSet;
use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, ParsedKey, ValueKind};
use crate::lookup::{KeyLookup, Lookup};
use crate::table::{KeyEntry, ReadCtx};
use crate::value::StoredHandle;

/// The sorted runs of every level, and the value tables they reference.
#[derive(Debug, Clone)]
pub struct Version {
    /// Per level, its runs newest first (L0: one per table). In a partitioned tree, partition
    /// `p`'s levels are `p · PARTITION_STRIDE ..` (`version/routing.rs`); the levels between
    /// the cold tree's last and the hot tree's first are always empty.
    levels: Vec<Vec<SortedRun>>,
    values: ValueSet,
    /// Levels of each partition's tree.
    tree_levels: usize,
    /// The keys of the hot partition (partitioned trees only).
    routing: Arc<Routing>,
}

impl Version {
    /// A version with `num_levels` empty levels, unpartitioned.
    pub fn new(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
            values: ValueSet::default(),
            tree_levels: num_levels,
            routing: Arc::default(),
        }
    }

    /// A partitioned version: a cold and a hot tree of `num_levels` empty levels each, and
    /// every key cold.
    pub fn new_partitioned(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); PARTITION_STRIDE + num_levels],
            values: ValueSet::default(),
            tree_levels: num_levels,
            routing: Arc::default(),
        }
    }

    /// Partitions of the tree: 1, or 2 when partitioned.
    pub fn partitions(&self) -> usize {
        self.levels.len().div_ceil(PARTITION_STRIDE).max(1)
    }

    /// Whether the tree is partitioned.
    pub fn is_partitioned(&self) -> bool {
        self.partitions() > 1
    }

    /// Levels of each partition's tree (`num_levels`).
    pub fn tree_levels(&self) -> usize {
        self.tree_levels
    }

    /// The levels of partition `p`.
    pub fn partition_levels(&self, p: usize) -> std::ops::Range<usize> {
        let first = routing::level_in(p, 0);
        first..first + self.tree_levels
    }

    /// The keys routed to the hot partition (empty unpartitioned).
    pub fn routing(&self) -> &Routing {
        &self.routing
    }

    /// The partition `user_key`'s versions are in.
    pub fn partition_of(&self, user_key: &[u8]) -> usize {
        if self.is_partitioned() {
            self.routing.partition_of(user_key)
        } else {
            routing::COLD
        }
    }

    /// Partition `p`'s tree as an unpartitioned version of its own, for a compaction strategy
    /// to plan against: its levels renumbered from 0, and no value tables (strategies plan on
    /// the key tables alone). Plans made against it name levels relative to the partition.
    pub(crate) fn tree(&self, p: usize) -> Version {
        Version {
            levels: self.levels[self.partition_levels(p)].to_vec(),
            values: ValueSet::default(),
            tree_levels: self.tree_levels,
            routing: Arc::default(),
        }
    }

    /// Whether `level` is a level of some partition's tree.
    fn has_level(&self, level: usize) -> bool {
        level < self.levels.len()
            && self
                .partition_levels(routing::partition_of_level(level))
                .contains(&level)
    }

    /// The levels deeper than `level` in its partition (the other holds no version of its
    /// keys).
    pub(crate) fn deeper_levels(&self, level: usize) -> std::ops::Range<usize> {
        let end = self
            .partition_levels(routing::partition_of_level(level))
            .end
            .min(self.levels.len());
        (level + 1).min(end)..end
    }

    /// The value tables, their garbage and the inheritance records.
    pub fn values(&self) -> &ValueSet {
        &self.values
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// The sorted runs of `level`, newest first (L0: one per table).
    pub(crate) fn runs(&self, level: usize) -> &[SortedRun] {
        &self.levels[level]
    }

    /// Every run of every level, in search order, with its level.
    pub(crate) fn all_runs(&self) -> impl Iterator<Item = (usize, &SortedRun)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, runs)| runs.iter().map(move |r| (l, r)))
    }

    /// Tables of `level`: run after run, newest run first, each in key order (L0 newest first).
    pub fn level_files(&self, level: usize) -> impl DoubleEndedIterator<Item = &Arc<FileMetaData>> {
        self.levels[level].iter().flat_map(|r| r.files().iter())
    }

    /// Number of tables in `level`.
    pub fn table_count(&self, level: usize) -> usize {
        self.levels[level].iter().map(|r| r.files().len()).sum()
    }

    /// Total bytes of the tables of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(SortedRun::bytes).sum()
    }

    /// Every table of every level, in search order.
    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMetaData>)> {
        self.all_runs()
            .flat_map(|(l, r)| r.files().iter().map(move |f| (l, f)))
    }

    /// Table `number` of `level` and the run holding it.
    pub(crate) fn find_table(
        &self,
        level: usize,
        number: u64,
    ) -> Option<(&SortedRun, &Arc<FileMetaData>)> {
        self.levels.get(level)?.iter().find_map(|r| {
            r.files()
                .iter()
                .find(|f| f.number == number)
                .map(|f| (r, f))
        })
    }

    /// The most L0 tables of any partition: the backlog writes are slowed and stopped by
    /// (`l0_slowdown_trigger`, `l0_stop_trigger`), each partition's L0 filling on its own.
    pub fn l0_backlog(&self) -> usize {
        (0..self.partitions())
            .map(|p| self.table_count(routing::level_in(p, 0)))
            .max()
            .unwrap_or(0)
    }

    /// The deepest level holding any table.
    pub fn deepest_nonempty_level(&self) -> Option<usize> {
        self.levels.iter().rposition(|runs| !runs.is_empty())
    }

    /// The deepest level of partition `p` holding any table (numbered as in the whole tree).
    pub fn deepest_nonempty_level_of(&self, p: usize) -> Option<usize> {
        let levels = self.partition_levels(p);
        let end = levels.end.min(self.levels.len());
        (levels.start..end)
            .rev()
            .find(|&l| !self.levels[l].is_empty())
    }

    /// Tables of `level` whose user-key range intersects `[lo, hi]` (inclusive; `None` is
    /// unbounded), in the level's order.
    pub fn overlapping_files(
        &self,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Vec<Arc<FileMetaData>> {
        self.levels[level]
            .iter()
            .flat_map(|r| r.overlapping(lo, hi))
            .cloned()
            .collect()
    }

    /// True when no run older than run `run` of `level` has a table whose range contains
    /// `user_key`: the runs after it in `level` (every run of `level` when it holds no run
    /// `run`: outputs starting a new run are its newest) and every run of the deeper levels of
    /// its partition (the other holds no version of the key). A deletion of the key compacted
    /// into that run can then be dropped.
    pub fn is_bottommost_for_key(&self, level: usize, run: RunId, user_key: &[u8]) -> bool {
        let runs = &self.levels[level];
        let after = runs.iter().position(|r| r.id() == run).map_or(0, |i| i + 1);
        // Deeper levels of the same partition only: no version of a key is in the other.
        runs[after..]
            .iter()
            .chain(self.levels[self.deeper_levels(level)].iter().flatten())
            .all(|r| r.table_for(user_key).is_none())
    }

    /// Like [`Version::is_bottommost_for_key`] for every key of `[start, end)`: no older run
    /// has a table whose extent intersects the range. A range tombstone's oldest stripe
    /// compacted into that run can then be dropped.
    pub fn is_bottommost_for_range(
        &self,
        level: usize,
        run: RunId,
        start: &[u8],
        end: &[u8],
    ) -> bool {
        let runs = &self.levels[level];
        let after = runs.iter().position(|r| r.id() == run).map_or(0, |i| i + 1);
        // `overlaps` takes an inclusive end: a table starting at `end` counts, which only
        // keeps a tombstone longer.
        runs[after..]
            .iter()
            .chain(self.levels[self.deeper_levels(level)].iter().flatten())
            .all(|r| !r.overlaps(Some(start), Some(end)))
    }

    /// Applies an edit and returns the resulting version. Tables an edit removes and re-adds
    /// (trivial moves) keep their metadata object, so their lifetime tracking is unbroken.
    /// `file` and `offset` locate the edit (in the manifest) for errors.
    pub fn apply(&self, edit: &VersionEdit, file: &str, offset: u64) -> Result<Version> {
        let bad = |what: String| Error::corruption(file, offset, what);
        let mut levels = self.levels.clone();
        let mut values = self.values.clone();
        let mut moved: Vec<Arc<FileMetaData>> = Vec::new();
        for &(level, number) in &edit.deleted_files {
            let runs = levels
                .get_mut(level as usize)
                .ok_or_else(|| bad(format!("edit deletes a table from missing level {level}")))?;
            let removed = runs
                .iter_mut()
                .find_map(|r| {
                    let files = r.files_mut();
                    let pos = files.iter().position(|f| f.number == number)?;
                    Some(files.remove(pos))
                })
                .ok_or_else(|| {
                    bad(format!(
                        "edit deletes table {number}, which is not in level {level}"
                    ))
                })?;
            values.remove_refs(&removed.dependence).map_err(bad)?;
            moved.push(removed);
        }
        // Tables joining each run, by level and run id (an L0 table is a run of its own).
        let mut joining: BTreeMap<(usize, RunId), Vec<Arc<FileMetaData>>> = BTreeMap::new();
        for t in &edit.new_tables {
            let level = t.level as usize;
            if !self.has_level(level) {
                return Err(bad(format!(
                    "edit adds table {} to level {level}, beyond the levels of the tree \
                     ({} a partition, {} partitions)",
                    t.meta.number,
                    self.tree_levels,
                    self.partitions()
                )));
            }
            if routing::is_l0(level) && t.run != 0 {
                return Err(bad(format!(
                    "edit adds table {} to L0 in run {}; an L0 table is a run of its own",
                    t.meta.number, t.run
                )));
            }
            let meta = match moved.iter().find(|m| m.number == t.meta.number) {
                Some(m) if *m.meta() == t.meta => Arc::clone(m),
                Some(_) => {
                    return Err(bad(format!(
                        "table {} moved with different metadata",
                        t.meta.number
                    )));
                }
                None => Arc::new(FileMetaData::new(t.meta.clone())),
            };
            let live = levels
                .iter()
                .flatten()
                .flat_map(|r| r.files())
                .chain(joining.values().flatten())
                .any(|f| f.number == t.meta.number);
            if live {
                return Err(bad(format!(
                    "edit adds table {}, which is already live",
                    t.meta.number
                )));
            }
            values.add_refs(&meta.dependence);
            let run = if routing::is_l0(level) {
                meta.number
            } else {
                t.run
            };
            joining.entry((level, run)).or_default().push(meta);
        }
        for ((level, run), files) in joining {
            match levels[level].iter_mut().find(|r| r.id() == run) {
                Some(r) => r.files_mut().extend(files),
                None => levels[level].push(SortedRun::new(run, files)),
            }
        }
        for v in &edit.new_value_tables {
            values.add_table(v.clone()).map_err(bad)?;
        }
        for &(number, delta) in &edit.value_garbage {
            values.add_garbage(number, delta).map_err(bad)?;
        }
        for &(number, block) in &edit.drop_blocks {
            values.add_drop_block(number, block).map_err(bad)?;
        }
        for &number in &edit.deleted_value_tables {
            values.remove_table(number).map_err(bad)?;
        }
        for &(number, seq) in &edit.retired_value_tables {
            values.retire(number, seq).map_err(bad)?;
        }
        for &number in &edit.released_value_tables {
            values.release(number).map_err(bad)?;
        }
        for &(number, awaiting) in &edit.write_back {
            values
                .set_awaiting_write_back(number, awaiting)
                .map_err(bad)?;
        }
        for (victim, children) in &edit.inheritance {
            values
                .add_inheritance(*victim, children.clone())
                .map_err(bad)?;
        }
        // Pruning walks every inheritance record and drop block; most edits (every flush) only
        // add, and leave nothing to prune in a version that had nothing to prune.
        if edit.may_need_pruning() {
            values.prune_inheritance();
            values.prune_drop_files();
        } else {
            debug_assert!(
                {
                    let mut pruned = values.clone();
                    pruned.prune_inheritance();
                    pruned.prune_drop_files();
                    pruned.inheritance() == values.inheritance()
                        && pruned.drop_files().len() == values.drop_files().len()
                },
                "an edit that only adds left something to prune"
            );
        }
        for runs in &mut levels {
            let kept = std::mem::take(runs)
                .into_iter()
                .filter(|r| !r.files().is_empty())
                .map(SortedRun::refresh);
            runs.extend(kept);
            // Newest first. Sequence ranges of the runs of a level never overlap (checked
            // below), so the largest sequence number orders them; the id breaks no real tie.
            runs.sort_by(|a, b| {
                b.largest_seq()
                    .cmp(&a.largest_seq())
                    .then(b.id().cmp(&a.id()))
            });
        }
        let routing = match &edit.routing {
            Some(_) if !self.is_partitioned() => {
                return Err(bad(
                    "edit routes keys to a hot partition of a tree that has none".into(),
                ));
            }
            Some(r) => Arc::new(r.clone()),
            None => Arc::clone(&self.routing),
        };
        let v = Version {
            levels,
            values,
            tree_levels: self.tree_levels,
            routing,
        };
        v.check_invariants().map_err(bad)?;
        Ok(v)
    }

    /// The edit that rebuilds this version's files from nothing: every key table, value table,
    /// garbage count and inheritance record (the first record of a new manifest).
    pub fn snapshot_edit(&self) -> VersionEdit {
        let values = &self.values;
        VersionEdit {
            new_tables: self
                .all_runs()
                .flat_map(|(l, r)| {
                    r.files()
                        .iter()
                        .map(move |f| super::set::new_table(l, r.id(), f))
                })
                .collect(),
            // Retired tables are added, then retired again, as the edits that made them did.
            new_value_tables: values
                .tables()
                .chain(values.retired().values().map(|r| &r.file))
                .map(|v| v.meta().clone())
                .collect(),
            retired_value_tables: values
                .retired()
                .iter()
                .map(|(n, r)| (*n, r.obsolete_seq))
                .collect(),
            write_back: values
                .awaiting_write_back()
                .iter()
                .map(|n| (*n, true))
                .collect(),
            value_garbage: values
                .tables()
                .map(|v| (v.number, values.garbage(v.number)))
                .filter(|(_, g)| *g != super::value_set::Garbage::default())
                .collect(),
            inheritance: values
                .inheritance()
                .iter()
                .map(|(n, c)| (*n, c.clone()))
                .collect(),
            routing: (!self.routing.is_empty()).then(|| (*self.routing).clone()),
            drop_blocks: values
                .all_drop_blocks()
                .flat_map(|(n, blocks)| blocks.iter().map(move |b| (n, b.block)))
                .collect(),
            ..Default::default()
        }
    }

    /// Checks what makes "the first version found in search order wins" hold within a level:
    /// every table's bounds are ordered; in L1 and deeper, the tables of each run have disjoint
    /// user-key ranges, and the runs of a level have disjoint sequence ranges, newest first (so
    /// every entry of a run is newer than every entry of the runs after it in its level). L0
    /// tables are ordered newest first by construction. Across levels the order of a key's
    /// versions is the compaction strategies' to keep (a version cannot check it from metadata).
    /// Each partition's tree is checked alike (its L0 is its first level), but for the runs'
    /// sequence ranges: a move between partitions brings a partition keys with old sequence
    /// numbers, whose runs may then overlap others in sequence numbers. What the check stands
    /// for holds there by the routing instead: the moved keys were in no run of the partition
    /// when they arrived, later versions of them arrive by flushes (newer than every entry),
    /// and runs stay ordered by their largest sequence numbers, which a merge of a stretch of
    /// runs keeps (docs/architecture.md, "Partitions").
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        for (level, runs) in self.levels.iter().enumerate() {
            for f in runs.iter().flat_map(|r| r.files()) {
                if key::compare_internal(&f.smallest, &f.largest).is_gt() {
                    return Err(format!("table {} has smallest key after largest", f.number));
                }
            }
            if routing::is_l0(level) {
                continue;
            }
            for r in runs {
                r.check_disjoint(level)?;
            }
            for w in runs.windows(2) {
                if self.is_partitioned() {
                    if w[0].largest_seq() < w[1].largest_seq() {
                        return Err(format!(
                            "runs {} and {} of level {level} out of order",
                            w[0].id(),
                            w[1].id()
                        ));
                    }
                    continue;
                }
                if w[0].smallest_seq() <= w[1].largest_seq() {
                    return Err(format!(
                        "runs {} (sequence numbers {}..={}) and {} ({}..={}) of level {level} \
                         overlap in sequence numbers",
                        w[0].id(),
                        w[0].smallest_seq(),
                        w[0].largest_seq(),
                        w[1].id(),
                        w[1].smallest_seq(),
                        w[1].largest_seq()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Looks `lookup_key` (a lookup internal key for the user key at a sequence number) up in
    /// the tables, newest data first.
    pub fn get(
        &self,
        tables: &TableCache,
        lookup_key: &[u8],
        ctx: ReadCtx,
    ) -> Result<Option<Lookup>> {
        Ok(self
            .get_seq(tables, lookup_key, ctx)?
            .map(|(_, found)| found))
    }

    /// Like [`Version::get`], with the sequence number of the version found.
    pub fn get_seq(
        &self,
        tables: &TableCache,
        lookup_key: &[u8],
        ctx: ReadCtx,
    ) -> Result<Option<(key::SeqNo, Lookup)>> {
        self.search(
            tables,
            lookup_key,
            ctx,
            |f| Self::get_from(tables, f, lookup_key, ctx),
            |seq| (seq, Lookup::Deleted),
        )
    }

    /// True when the key tables hold a version of `user_key` newer than `seq`: a version at
    /// `seq` is then shadowed, and its record may have been reclaimed early by GC (see
    /// docs/gc.md). Reads filters, indexes and handle blocks as [`Version::get_key`] does.
    pub fn is_shadowed(
        &self,
        tables: &TableCache,
        user_key: &[u8],
        seq: key::SeqNo,
        ctx: ReadCtx,
    ) -> Result<bool> {
        let lookup = key::make_lookup_key(user_key, key::MAX_SEQUENCE);
        Ok(self
            .get_key(tables, &lookup, ctx)?
            .is_some_and(|newest| newest.seq() > seq))
    }

    /// The GC validity lookup ("GetKey", Scavenger §3.3): the same version as [`Version::get`]
    /// finds, reported without its value (an inline value's expiry included), and a range
    /// tombstone that answers as `KeyLookup::RangeDeleted`. In index-decoupled key tables it
    /// reads filters, indexes and handle blocks, and a data block only where the filter says
    /// the key may have an inline version (see `Table::get_key`).
    pub fn get_key(
        &self,
        tables: &TableCache,
        lookup_key: &[u8],
        ctx: ReadCtx,
    ) -> Result<Option<KeyLookup>> {
        let found = |f: &FileMetaData| -> Result<Option<(key::SeqNo, KeyLookup)>> {
            let table = tables.get(f.number, f.file_size, ctx.class)?;
            let Some((ikey, entry)) = table.get_key(lookup_key, ctx)? else {
                return Ok(None);
            };
            let parsed = ParsedKey::parse(&ikey).ok_or_else(|| {
                Error::corruption(
                    crate::filename::table_file_name(f.number),
                    0,
                    "malformed internal key",
                )
            })?;
            Ok(Some(match entry {
                KeyEntry::Handle(bytes) => {
                    let name = crate::filename::table_file_name(f.number);
                    let stored = StoredHandle::decode(&bytes, &name, 0)?;
                    KeyLookup::Handle {
                        handle: stored.location,
                        seq: parsed.seq,
                        record_seq: stored.record_seq(parsed.seq),
                        expiry: stored.expiry,
                    }
                }
                KeyEntry::Inline { expiry } => KeyLookup::Inline {
                    seq: parsed.seq,
                    expiry,
                },
                KeyEntry::Deletion => KeyLookup::Deleted { seq: parsed.seq },
            }))
            .map(|l| l.map(|l| (l.seq(), l)))
        };
        self.search(tables, lookup_key, ctx, found, |seq| KeyLookup::RangeDeleted {
            seq,
        })
    }

    /// Asks `probe` about each table whose extent holds the lookup key's user key, in search
    /// order (L0 newest to oldest, then at most one table per run of each deeper level, newest
    /// run first; in a partitioned tree, the levels of the key's partition), and returns its
    /// first answer: the version it found, with its sequence
    /// number. A range tombstone of the table that covers the key for the lookup's reader and
    /// is newer than that version (or that covers it where the table holds no version) answers
    /// instead, as `deleted(its sequence number)`: every version in later tables is older than
    /// the tombstone, since compactions keep tombstones in search order as they keep versions.
    fn search<T>(
        &self,
        tables: &TableCache,
        lookup_key: &[u8],
        ctx: ReadCtx,
        probe: impl FnMut(&FileMetaData) -> Result<Option<(key::SeqNo, T)>>,
        deleted: impl Fn(key::SeqNo) -> T,
    ) -> Result<Option<T>> {
        let user_key = key::user_key(lookup_key);
        let read_seq = key::seq_of(lookup_key);
        let covering = |f: &FileMetaData| -> Result<Option<key::SeqNo>> {
            if f.range_deletions == 0 {
                return Ok(None);
            }
            let table = tables.get(f.number, f.file_size, ctx.class)?;
            Ok(recorded_tombstones(f, &table)?.newest_covering(user_key, read_seq))
        };
        self.search_with(user_key, probe, covering, deleted)
    }

    /// [`Version::search`] with the tables' tombstones asked of `covering` (the newest covering
    /// the key for the lookup's reader).
    fn search_with<T>(
        &self,
        user_key: &[u8],
        mut probe: impl FnMut(&FileMetaData) -> Result<Option<(key::SeqNo, T)>>,
        mut covering: impl FnMut(&FileMetaData) -> Result<Option<key::SeqNo>>,
        deleted: impl Fn(key::SeqNo) -> T,
    ) -> Result<Option<T>> {
        // Only the key's partition holds versions of it.
        let levels = self.partition_levels(self.partition_of(user_key));
        for run in self.levels[levels].iter().flatten() {
            let Some(f) = run.table_for(user_key) else {
                continue;
            };
            let found = probe(f)?;
            let covering = covering(f)?;
            match (found, covering) {
                (Some((seq, v)), t) if t.is_none_or(|t| t < seq) => return Ok(Some(v)),
                (_, Some(t)) => return Ok(Some(deleted(t))),
                _ => {}
            }
        }
        Ok(None)
    }

    fn get_from(
        tables: &TableCache,
        f: &FileMetaData,
        lookup_key: &[u8],
        ctx: ReadCtx,
    ) -> Result<Option<(key::SeqNo, (key::SeqNo, Lookup))>> {
        let table = tables.get(f.number, f.file_size, ctx.class)?;
        // Parsed where it lies in the block: a handle is decoded from it, and only an inline
        // value is copied out.
        let Some(it) = table.find(lookup_key, ctx)? else {
            return Ok(None);
        };
        let (ikey, value) = (it.key(), it.value());
        // The table's own name: formatting one would cost as much as the rest of a lookup.
        let name = || table.file_name();
        let parsed = ParsedKey::parse(ikey)
            .ok_or_else(|| Error::corruption(name(), 0, "malformed internal key"))?;
        let found = match parsed.kind {
            ValueKind::Value => Lookup::value(Bytes::copy_from_slice(value)),
            ValueKind::ValueWithExpiry => {
                let (expiry, v) = crate::expiry::split_inline(value).ok_or_else(|| {
                    Error::corruption(name(), 0, crate::expiry::BAD_INLINE_EXPIRY)
                })?;
                Lookup::Value {
                    value: Bytes::copy_from_slice(v),
                    expiry: Some(expiry),
                }
            }
            ValueKind::Deletion => Lookup::Deleted,
            ValueKind::ValueHandle => {
                let stored = StoredHandle::decode(value, name(), 0)?;
                Lookup::Handle {
                    handle: stored.location,
                    seq: parsed.seq,
                    record_seq: stored.record_seq(parsed.seq),
                    payload: stored.payload,
                    expiry: stored.expiry,
                }
            }
        };
        Ok(Some((parsed.seq, (parsed.seq, found))))
    }

    /// Appends one iterator per L0 table and one per run of each deeper level, and the largest
    /// sequence number of each to `largest_seqs`.
    pub fn add_iterators(
        &self,
        tables: &Arc<TableCache>,
        ctx: ReadCtx,
        out: &mut Vec<Box<dyn InternalIterator>>,
        largest_seqs: &mut Vec<key::SeqNo>,
    ) -> Result<()> {
        for f in self.level_files(0) {
            let table = tables.get(f.number, f.file_size, ctx.class)?;
            out.push(Box::new(table.iter(ctx)));
            largest_seqs.push(f.largest_seq);
        }
        // Each partition's runs; a hot L0 table is a run of its own, read like one.
        for run in self.levels.iter().skip(1).flatten() {
            out.push(Box::new(LevelIter::new(
                run.files().to_vec(),
                Arc::clone(tables),
                ctx,
            )));
            largest_seqs.push(run.largest_seq());
        }
        Ok(())
    }

    /// The range tombstones of every table holding some whose extent intersects `[lo, hi)`
    /// (`None`: unbounded), loaded through the table cache.
    pub(crate) fn range_tombstones(
        &self,
        tables: &TableCache,
        ctx: ReadCtx,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<Vec<Arc<crate::range_del::FragmentedTombstones>>> {
        let mut out = Vec::new();
        for (_, f) in self.all_files() {
            if f.range_deletions == 0 || !f.overlaps_user_range(lo, hi) {
                continue;
            }
            let table = tables.get(f.number, f.file_size, ctx.class)?;
            out.push(Arc::clone(recorded_tombstones(f, &table)?));
        }
        Ok(out)
    }
}

/// The range tombstones of table `f`, which the manifest says holds some: a table without them
/// is corruption (reads and compactions would otherwise lose them, and deleted keys would
/// come back).
pub(crate) fn recorded_tombstones<'t>(
    f: &FileMetaData,
    table: &'t crate::table::Table,
) -> Result<&'t Arc<crate::range_del::FragmentedTombstones>> {
    table.range_tombstones().ok_or_else(|| {
        Error::corruption(
            crate::filename::table_file_name(f.number),
            0,
            format!(
                "the manifest records {} range tombstones in the table, which holds none",
                f.range_deletions
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::edit::NewTable;

    /// A table of `level`'s run `run` holding user keys `lo..=hi` at sequence numbers
    /// `seqs`.
    fn in_run(
        level: u32,
        run: RunId,
        number: u64,
        keys: (&str, &str),
        seqs: std::ops::RangeInclusive<u64>,
    ) -> NewTable {
        crate::version::test_table(level, run, number, keys, 1000, seqs)
    }

    fn table(level: u32, number: u64, lo: &str, hi: &str, seq: u64) -> NewTable {
        in_run(level, 0, number, (lo, hi), seq..=seq)
    }

    fn with(tables: Vec<NewTable>) -> Result<Version> {
        Version::new(4).apply(
            &VersionEdit {
                new_tables: tables,
                ..Default::default()
            },
            "M",
            0,
        )
    }

    fn numbers<'a>(files: impl Iterator<Item = &'a Arc<FileMetaData>>) -> Vec<u64> {
        files.map(|f| f.number).collect()
    }

    /// The table `search` asks first about `key` and that answers (every table answers).
    pub(super) fn first_hit(v: &Version, key: &str) -> Option<u64> {
        v.search_with(
            key.as_bytes(),
            |f| Ok(Some((1, f.number))),
            |_| Ok(None),
            |_| 0,
        )
        .expect("search")
    }

    #[test]
    fn apply_orders_levels_and_rejects_overlap() {
        let v = with(vec![
            table(0, 1, "a", "z", 1),
            table(0, 2, "b", "c", 5),
            table(1, 3, "m", "p", 1),
            table(1, 4, "a", "c", 1),
        ])
        .expect("apply");
        assert_eq!(numbers(v.level_files(0)), vec![2, 1]);
        assert_eq!(numbers(v.level_files(1)), vec![4, 3]);
        assert_eq!(
            v.runs(0).iter().map(|r| r.id()).collect::<Vec<_>>(),
            vec![2, 1],
            "each L0 table is a run of its own"
        );
        assert_eq!(v.runs(1).len(), 1);
        assert_eq!(v.deepest_nonempty_level(), Some(1));
        let overlap = VersionEdit {
            new_tables: vec![table(1, 5, "c", "d", 1)],
            ..Default::default()
        };
        let err = v.apply(&overlap, "M", 0).expect_err("overlap");
        assert!(err.is_corruption(), "{err}");
        assert!(
            err.to_string().contains("overlap in run 0 of level 1"),
            "{err}"
        );
        let missing = VersionEdit {
            deleted_files: vec![(2, 3)],
            ..Default::default()
        };
        assert!(v.apply(&missing, "M", 0).is_err());
        let dup = VersionEdit {
            new_tables: vec![table(2, 3, "x", "y", 1)],
            ..Default::default()
        };
        assert!(
            v.apply(&dup, "M", 0).is_err(),
            "a live number cannot be added twice"
        );
        assert!(
            with(vec![table(2, 8, "a", "b", 1), table(3, 8, "x", "y", 1)]).is_err(),
            "nor twice by one edit"
        );
    }

    #[test]
    fn runs_of_a_level_may_overlap_in_keys_but_not_in_sequence_numbers() {
        let v = with(vec![
            in_run(1, 6, 10, ("c", "z"), 1..=5),
            in_run(1, 5, 11, ("a", "f"), 10..=12),
            in_run(1, 5, 12, ("g", "m"), 13..=20),
        ])
        .expect("runs overlapping in keys");
        let runs = v.runs(1);
        assert_eq!(runs.iter().map(|r| r.id()).collect::<Vec<_>>(), vec![5, 6]);
        assert_eq!((runs[0].smallest_seq(), runs[0].largest_seq()), (10, 20));
        assert_eq!(numbers(runs[0].files().iter()), vec![11, 12]);
        assert_eq!(v.table_count(1), 3);
        let err = with(vec![
            in_run(1, 6, 10, ("c", "z"), 1..=10),
            in_run(1, 5, 11, ("a", "f"), 10..=12),
        ])
        .expect_err("a shared sequence number");
        assert!(
            err.to_string().contains("overlap in sequence numbers"),
            "{err}"
        );
        let err = with(vec![
            in_run(1, 5, 11, ("a", "f"), 10..=12),
            in_run(1, 5, 12, ("f", "m"), 13..=20),
        ])
        .expect_err("overlap within a run");
        assert!(err.to_string().contains("overlap in run 5"), "{err}");
        let err = with(vec![in_run(0, 5, 11, ("a", "f"), 10..=12)]).expect_err("L0 in a run");
        assert!(err.to_string().contains("a run of its own"), "{err}");
    }

    #[test]
    fn search_asks_l0_then_each_run_newest_first() {
        let v = with(vec![
            in_run(0, 0, 1, ("a", "c"), 30..=31),
            in_run(1, 7, 2, ("a", "k"), 20..=25),
            in_run(1, 3, 3, ("b", "z"), 10..=15),
            in_run(2, 0, 4, ("a", "z"), 1..=5),
        ])
        .expect("apply");
        assert_eq!(first_hit(&v, "b"), Some(1), "L0 first");
        assert_eq!(first_hit(&v, "d"), Some(2), "then the newest run");
        assert_eq!(first_hit(&v, "m"), Some(3), "then the older run");
        let older_first = v
            .search_with(
                b"d",
                |f| Ok((f.number != 2).then_some((1, f.number))),
                |_| Ok(None),
                |_| 0,
            )
            .expect("search");
        assert_eq!(
            older_first,
            Some(3),
            "a table that answers nothing passes the turn"
        );
    }

    /// A table of `level` whose extent ends at a range tombstone's exclusive end `end`.
    fn ending_at_tombstone(level: u32, number: u64, lo: &str, end: &str, seq: u64) -> NewTable {
        let mut t = table(level, number, lo, lo, seq);
        t.meta.largest = key::range_bound(end.as_bytes());
        t.meta.range_deletions = 1;
        t
    }

    #[test]
    fn a_range_tombstone_end_leaves_its_key_to_the_next_table() {
        let v = with(vec![
            ending_at_tombstone(1, 1, "a", "m", 5),
            table(1, 2, "m", "p", 5),
        ])
        .expect("tables sharing the tombstone's exclusive end are disjoint");
        let run = &v.runs(1)[0];
        assert_eq!(run.table_for(b"l").map(|f| f.number), Some(1));
        assert_eq!(run.table_for(b"m").map(|f| f.number), Some(2));
        assert!(v.is_bottommost_for_range(0, 0, b"x", b"z"));
        assert!(!v.is_bottommost_for_range(0, 0, b"b", b"c"));
        assert!(
            with(vec![table(1, 1, "a", "m", 5), table(1, 2, "m", "p", 5)]).is_err(),
            "a point key's bound is inclusive"
        );
    }

    #[test]
    fn a_runs_overlap_search_agrees_with_its_tables_one_by_one() {
        let v = with(vec![
            table(1, 1, "b", "d", 5),
            ending_at_tombstone(1, 2, "f", "h", 5),
            table(1, 3, "h", "j", 5),
            table(1, 4, "m", "m", 5),
        ])
        .expect("apply");
        let run = &v.runs(1)[0];
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "n"];
        let bounds: Vec<Option<&[u8]>> = std::iter::once(None)
            .chain(keys.iter().map(|k| Some(k.as_bytes())))
            .collect();
        for &lo in &bounds {
            for &hi in &bounds {
                let linear = run.overlapping(lo, hi).next().is_some();
                assert_eq!(run.overlaps(lo, hi), linear, "{lo:?}..={hi:?}");
            }
        }
    }

    #[test]
    fn a_tombstone_answers_for_the_older_tables_in_search_order() {
        let v = with(vec![
            in_run(0, 0, 1, ("a", "c"), 30..=31),
            in_run(1, 0, 2, ("a", "z"), 10..=20),
        ])
        .expect("apply");
        // Table 1 holds a tombstone at 31 covering "b", and a version of "b" at `newer`.
        let ask = |newer: Option<u64>| {
            v.search_with(
                b"b",
                |f| Ok(if f.number == 1 { newer } else { Some(20) }.map(|s| (s, s))),
                |f| Ok((f.number == 1).then_some(31)),
                |t| t + 1000,
            )
            .expect("search")
        };
        assert_eq!(ask(None), Some(1031), "deleted: table 2's version is older");
        assert_eq!(ask(Some(30)), Some(1031), "deleted: the table's own older version");
        assert_eq!(ask(Some(32)), Some(32), "a version newer than the tombstone");
    }

    #[test]
    fn bottommost_counts_the_older_runs_of_the_level_and_the_deeper_levels() {
        let v = with(vec![
            in_run(1, 7, 2, ("a", "c"), 20..=25),
            in_run(1, 3, 3, ("m", "p"), 10..=15),
            in_run(2, 0, 4, ("x", "z"), 1..=5),
        ])
        .expect("apply");
        assert!(!v.is_bottommost_for_key(1, 7, b"n"), "run 3 is older");
        assert!(v.is_bottommost_for_key(1, 3, b"b"), "run 7 is newer");
        assert!(
            !v.is_bottommost_for_key(1, 99, b"b"),
            "a new run is the newest"
        );
        assert!(!v.is_bottommost_for_key(1, 3, b"y"), "level 2 is deeper");
        assert!(v.is_bottommost_for_key(2, 0, b"n"));
        assert!(v.is_bottommost_for_key(0, 0, b"q"));
    }

    #[test]
    fn the_snapshot_edit_rebuilds_every_run() {
        let v = with(vec![
            in_run(0, 0, 1, ("a", "c"), 30..=31),
            in_run(1, 7, 2, ("a", "k"), 20..=25),
            in_run(1, 3, 3, ("b", "z"), 10..=15),
            in_run(1, 3, 5, ("0", "1"), 8..=9),
            in_run(2, 0, 4, ("a", "z"), 1..=5),
        ])
        .expect("apply");
        let edit = v.snapshot_edit();
        let decoded = VersionEdit::decode(&edit.encode(), "M", 0).expect("decode");
        let again = Version::new(4).apply(&decoded, "M", 0).expect("rebuild");
        let shape = |v: &Version| {
            v.all_runs()
                .map(|(l, r)| (l, r.id(), numbers(r.files().iter())))
                .collect::<Vec<_>>()
        };
        assert_eq!(shape(&again), shape(&v));
        assert_eq!(
            shape(&v),
            vec![
                (0, 1, vec![1]),
                (1, 7, vec![2]),
                (1, 3, vec![5, 3]),
                (2, 0, vec![4])
            ]
        );
    }

    #[test]
    fn trivial_move_keeps_the_metadata_object() {
        let v = with(vec![table(1, 7, "a", "b", 1)]).expect("apply");
        let before = Arc::clone(v.level_files(1).next().expect("table"));
        let moved = v
            .apply(
                &VersionEdit {
                    deleted_files: vec![(1, 7)],
                    new_tables: vec![in_run(2, 4, 7, ("a", "b"), 1..=1)],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("move");
        assert!(Arc::ptr_eq(
            &before,
            moved.level_files(2).next().expect("moved")
        ));
        assert_eq!(moved.runs(2)[0].id(), 4, "into the run the edit names");
        assert_eq!(moved.table_count(1), 0);
        assert!(moved.runs(1).is_empty(), "an emptied run is gone");
    }

    #[test]
    fn bottommost_check_looks_only_deeper() {
        let v = with(vec![table(1, 1, "a", "f", 1), table(3, 2, "k", "p", 1)]).expect("apply");
        assert!(v.is_bottommost_for_key(0, 0, b"g"));
        assert!(!v.is_bottommost_for_key(0, 0, b"c"));
        assert!(v.is_bottommost_for_key(1, 0, b"c"));
        assert!(!v.is_bottommost_for_key(1, 0, b"m"));
        assert!(v.is_bottommost_for_key(3, 0, b"m"));
    }
}

#[cfg(test)]
mod partition_tests {
    use super::tests::first_hit;
    use super::*;
    use crate::version::edit::NewTable;
    use crate::version::routing::{HOT, KeyRange, level_in};

    fn table(level: usize, number: u64, lo: &str, hi: &str, seq: u64) -> NewTable {
        crate::version::test_table(level as u32, 0, number, (lo, hi), 1000, seq..=seq)
    }

    fn hot_user3() -> Routing {
        Routing::new(vec![KeyRange::of_prefix(b"user3")])
    }

    fn partitioned(tables: Vec<NewTable>) -> Version {
        Version::new_partitioned(4)
            .apply(
                &VersionEdit {
                    new_tables: tables,
                    routing: Some(hot_user3()),
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("valid")
    }

    #[test]
    fn a_key_is_searched_in_its_partition_only() {
        // A cold table spanning the hot range (it holds no hot key: the routing says so) and a
        // hot table of the hot partition's L1.
        let v = partitioned(vec![
            table(0, 5, "user1", "user9", 50),
            table(level_in(HOT, 1), 6, "user30", "user39", 40),
        ]);
        assert_eq!(v.partitions(), 2);
        assert_eq!(first_hit(&v, "user35"), Some(6));
        assert_eq!(first_hit(&v, "user55"), Some(5));
        // Nothing of the hot tree answers for a cold key, even inside its extent.
        assert_eq!(first_hit(&v, "user40"), Some(5));
        assert_eq!(first_hit(&v, "user30x"), Some(6));
        // The cold tree as a version of its own, for its strategy: levels from 0, and the
        // hot tree likewise.
        assert_eq!(v.tree(0).table_count(0), 1);
        assert_eq!(v.tree(HOT).table_count(1), 1);
        assert_eq!(v.tree(HOT).num_levels(), 4);
    }

    #[test]
    fn bottommost_looks_only_into_the_deeper_levels_of_the_partition() {
        let v = partitioned(vec![
            table(level_in(HOT, 1), 6, "user30", "user39", 40),
            // Deeper than it in the level numbering, but of the other partition.
            table(0, 5, "user1", "user9", 50),
        ]);
        assert!(!v.is_bottommost_for_key(level_in(HOT, 0), 0, b"user39"));
        assert!(v.is_bottommost_for_key(level_in(HOT, 1), 0, b"user35"));
        assert!(v.is_bottommost_for_range(level_in(HOT, 1), 0, b"user30", b"user4"));
        // The cold L0 table's key has nothing deeper in the cold tree.
        assert!(v.is_bottommost_for_key(0, 5, b"user5"));
    }

    #[test]
    fn levels_between_the_trees_and_routings_of_unpartitioned_trees_are_refused() {
        let between = Version::new_partitioned(4).apply(
            &VersionEdit {
                new_tables: vec![table(4, 7, "a", "b", 1)],
                ..Default::default()
            },
            "M",
            0,
        );
        let e = between.expect_err("level 4 is no tree's").to_string();
        assert!(e.contains("beyond the levels"), "{e}");
        let routed = Version::new(4).apply(
            &VersionEdit {
                routing: Some(hot_user3()),
                ..Default::default()
            },
            "M",
            0,
        );
        assert!(routed.expect_err("unpartitioned").is_corruption());
    }

    #[test]
    fn runs_of_a_partition_may_overlap_in_sequence_numbers() {
        // A run of keys moved in (old sequence numbers up to 300) beside a run written there
        // (200..=250): keys of one are in no run of the other, so both orders read right.
        let runs = |v: Version| {
            v.apply(
                &VersionEdit {
                    new_tables: vec![
                        crate::version::test_table(2, 7, 1, ("user1", "user2"), 100, 200..=250),
                        crate::version::test_table(2, 8, 2, ("user3", "user4"), 100, 5..=300),
                    ],
                    ..Default::default()
                },
                "M",
                0,
            )
        };
        let v = runs(Version::new_partitioned(4)).expect("partitioned");
        let order: Vec<u64> = v.runs(2).iter().map(|r| r.id()).collect();
        assert_eq!(order, [8, 7], "by largest sequence number");
        // Unpartitioned, the overlap is refused as before.
        assert!(runs(Version::new(4)).is_err());
    }

    #[test]
    fn the_snapshot_edit_keeps_the_routing_and_both_trees() {
        let v = partitioned(vec![
            table(0, 5, "user1", "user9", 50),
            table(level_in(HOT, 2), 6, "user30", "user39", 40),
        ]);
        let back = Version::new_partitioned(4)
            .apply(&v.snapshot_edit(), "M", 0)
            .expect("rebuilds");
        assert_eq!(back.routing(), &hot_user3());
        assert_eq!(back.table_count(level_in(HOT, 2)), 1);
        assert_eq!(back.table_count(0), 1);
        // An edit without a routing keeps the one before.
        let next = back
            .apply(&VersionEdit::default(), "M", 0)
            .expect("applies");
        assert_eq!(next.routing(), &hot_user3());
    }
}

//! A version: the set of live key tables per level at one point in time. Versions are
//! immutable and shared (`Arc`); readers and iterators hold the version they started with.

use std::sync::Arc;

use super::edit::VersionEdit;
use super::file_meta::FileMetaData;
use super::level_iter::LevelIter;
use super::value_set::ValueSet;
use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, ParsedKey, ValueKind};
use crate::lookup::{KeyLookup, Lookup};
use crate::table::{KeyEntry, ReadCtx};
use crate::value::StoredHandle;

/// The live key tables of every level, and the value tables they reference.
#[derive(Debug, Clone)]
pub struct Version {
    levels: Vec<Vec<Arc<FileMetaData>>>,
    values: ValueSet,
}

impl Version {
    /// A version with `num_levels` empty levels.
    pub fn new(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
            values: ValueSet::default(),
        }
    }

    /// The value tables, their garbage and the inheritance records.
    pub fn values(&self) -> &ValueSet {
        &self.values
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Tables of `level`: L0 newest first, other levels by key.
    pub fn files(&self, level: usize) -> &[Arc<FileMetaData>] {
        &self.levels[level]
    }

    /// Total bytes of the tables of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.file_size).sum()
    }

    /// Every table of every level.
    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMetaData>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, files)| files.iter().map(move |f| (l, f)))
    }

    /// The deepest level holding any table.
    pub fn deepest_nonempty_level(&self) -> Option<usize> {
        self.levels.iter().rposition(|f| !f.is_empty())
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
            .filter(|f| f.overlaps_user_range(lo, hi))
            .cloned()
            .collect()
    }

    /// True when no level deeper than `level` has a table whose range contains `user_key`: a
    /// deletion of the key compacted into `level` can then be dropped.
    pub fn is_bottommost_for_key(&self, level: usize, user_key: &[u8]) -> bool {
        self.levels.iter().skip(level + 1).all(|files| {
            let i = files.partition_point(|f| f.largest_user_key() < user_key);
            i == files.len() || files[i].smallest_user_key() > user_key
        })
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
            let files = levels
                .get_mut(level as usize)
                .ok_or_else(|| bad(format!("edit deletes a table from missing level {level}")))?;
            let pos = files
                .iter()
                .position(|f| f.number == number)
                .ok_or_else(|| {
                    bad(format!(
                        "edit deletes table {number}, which is not in level {level}"
                    ))
                })?;
            let removed = files.remove(pos);
            values.remove_refs(&removed.dependence).map_err(bad)?;
            moved.push(removed);
        }
        for t in &edit.new_tables {
            let level = t.level as usize;
            if level >= levels.len() {
                return Err(bad(format!(
                    "edit adds table {} to level {level}, beyond the {} levels",
                    t.meta.number,
                    levels.len()
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
            if levels.iter().flatten().any(|f| f.number == t.meta.number) {
                return Err(bad(format!(
                    "edit adds table {}, which is already live",
                    t.meta.number
                )));
            }
            values.add_refs(&meta.dependence);
            levels[level].push(meta);
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
        values.prune_inheritance();
        values.prune_drop_files();
        levels[0].sort_by(|a, b| {
            b.largest_seq
                .cmp(&a.largest_seq)
                .then(b.number.cmp(&a.number))
        });
        for files in levels.iter_mut().skip(1) {
            files.sort_by(|a, b| key::compare_internal(&a.smallest, &b.smallest));
        }
        let v = Version { levels, values };
        v.check_invariants().map_err(bad)?;
        Ok(v)
    }

    /// The edit that rebuilds this version's files from nothing: every key table, value table,
    /// garbage count and inheritance record (the first record of a new manifest).
    pub fn snapshot_edit(&self) -> VersionEdit {
        let values = &self.values;
        VersionEdit {
            new_tables: self
                .all_files()
                .map(|(l, f)| super::set::new_table(l, f))
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
            drop_blocks: values
                .all_drop_blocks()
                .iter()
                .flat_map(|(n, blocks)| blocks.iter().map(|b| (*n, b.block)))
                .collect(),
            ..Default::default()
        }
    }

    /// Checks that every level above L0 is sorted with disjoint user-key ranges.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        for (level, files) in self.levels.iter().enumerate() {
            for f in files {
                if key::compare_internal(&f.smallest, &f.largest).is_gt() {
                    return Err(format!("table {} has smallest key after largest", f.number));
                }
            }
            if level == 0 {
                continue;
            }
            for w in files.windows(2) {
                if w[0].largest_user_key() >= w[1].smallest_user_key() {
                    return Err(format!(
                        "tables {} and {} overlap in level {level}",
                        w[0].number, w[1].number
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
        self.search(lookup_key, |f| Self::get_from(tables, f, lookup_key, ctx))
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
    /// finds, reported without its value. In index-decoupled key tables it reads filters,
    /// indexes and handle blocks, and a data block only where the filter says the key may have
    /// an inline version (see [`Table::get_key`](crate::table::Table::get_key)).
    pub fn get_key(
        &self,
        tables: &TableCache,
        lookup_key: &[u8],
        ctx: ReadCtx,
    ) -> Result<Option<KeyLookup>> {
        self.search(lookup_key, |f| {
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
                    }
                }
                KeyEntry::Inline => KeyLookup::Inline { seq: parsed.seq },
                KeyEntry::Deletion => KeyLookup::Deleted { seq: parsed.seq },
            }))
        })
    }

    /// Asks `probe` about each table that may hold the lookup key's user key, newest data
    /// first (L0 newest to oldest, then one table per deeper level), and returns its first
    /// answer.
    fn search<T>(
        &self,
        lookup_key: &[u8],
        mut probe: impl FnMut(&FileMetaData) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let user_key = key::user_key(lookup_key);
        for f in &self.levels[0] {
            if f.smallest_user_key() <= user_key
                && user_key <= f.largest_user_key()
                && let Some(found) = probe(f)?
            {
                return Ok(Some(found));
            }
        }
        for files in self.levels.iter().skip(1) {
            let i = files.partition_point(|f| f.largest_user_key() < user_key);
            if let Some(f) = files.get(i)
                && f.smallest_user_key() <= user_key
                && let Some(found) = probe(f)?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    fn get_from(
        tables: &TableCache,
        f: &FileMetaData,
        lookup_key: &[u8],
        ctx: ReadCtx,
    ) -> Result<Option<(key::SeqNo, Lookup)>> {
        let table = tables.get(f.number, f.file_size, ctx.class)?;
        let Some((ikey, value)) = table.get(lookup_key, ctx)? else {
            return Ok(None);
        };
        let name = || crate::filename::table_file_name(f.number);
        let parsed = ParsedKey::parse(&ikey)
            .ok_or_else(|| Error::corruption(name(), 0, "malformed internal key"))?;
        let found = match parsed.kind {
            ValueKind::Value => Lookup::Value(value),
            ValueKind::Deletion => Lookup::Deleted,
            ValueKind::ValueHandle => {
                let stored = StoredHandle::decode(&value, &name(), 0)?;
                Lookup::Handle {
                    handle: stored.location,
                    seq: parsed.seq,
                    record_seq: stored.record_seq(parsed.seq),
                    payload: stored.payload,
                }
            }
        };
        Ok(Some((parsed.seq, found)))
    }

    /// Appends one iterator per L0 table and one per deeper non-empty level.
    pub fn add_iterators(
        &self,
        tables: &Arc<TableCache>,
        ctx: ReadCtx,
        out: &mut Vec<Box<dyn InternalIterator>>,
    ) -> Result<()> {
        for f in &self.levels[0] {
            let table = tables.get(f.number, f.file_size, ctx.class)?;
            out.push(Box::new(table.iter(ctx)));
        }
        for files in self.levels.iter().skip(1) {
            if !files.is_empty() {
                out.push(Box::new(LevelIter::new(
                    files.clone(),
                    Arc::clone(tables),
                    ctx,
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;
    use crate::version::edit::NewTable;

    fn table(level: u32, number: u64, lo: &str, hi: &str, seq: u64) -> NewTable {
        NewTable {
            level,
            meta: crate::version::TableMeta {
                number,
                file_size: 1000,
                smallest: make_internal_key(lo.as_bytes(), seq, ValueKind::Value),
                largest: make_internal_key(hi.as_bytes(), seq, ValueKind::Value),
                smallest_seq: seq,
                largest_seq: seq,
                num_entries: 1,
                num_deletions: 0,
                dependence: Vec::new(),
                aliases: 0,
            },
        }
    }

    #[test]
    fn apply_orders_levels_and_rejects_overlap() {
        let v = Version::new(4);
        let e = VersionEdit {
            new_tables: vec![
                table(0, 1, "a", "z", 1),
                table(0, 2, "b", "c", 5),
                table(1, 3, "m", "p", 1),
                table(1, 4, "a", "c", 1),
            ],
            ..Default::default()
        };
        let v = v.apply(&e, "M", 0).expect("apply");
        assert_eq!(
            v.files(0).iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![2, 1]
        );
        assert_eq!(
            v.files(1).iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![4, 3]
        );
        assert_eq!(v.deepest_nonempty_level(), Some(1));
        let overlap = VersionEdit {
            new_tables: vec![table(1, 5, "c", "d", 1)],
            ..Default::default()
        };
        assert!(
            v.apply(&overlap, "M", 0)
                .expect_err("overlap")
                .is_corruption()
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
    }

    #[test]
    fn trivial_move_keeps_the_metadata_object() {
        let v = Version::new(3)
            .apply(
                &VersionEdit {
                    new_tables: vec![table(1, 7, "a", "b", 1)],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("apply");
        let before = Arc::clone(&v.files(1)[0]);
        let moved = v
            .apply(
                &VersionEdit {
                    deleted_files: vec![(1, 7)],
                    new_tables: vec![table(2, 7, "a", "b", 1)],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("move");
        assert!(Arc::ptr_eq(&before, &moved.files(2)[0]));
        assert!(moved.files(1).is_empty());
    }

    #[test]
    fn bottommost_check_looks_only_deeper() {
        let v = Version::new(4)
            .apply(
                &VersionEdit {
                    new_tables: vec![table(1, 1, "a", "f", 1), table(3, 2, "k", "p", 1)],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("apply");
        assert!(v.is_bottommost_for_key(0, b"g"));
        assert!(!v.is_bottommost_for_key(0, b"c"));
        assert!(v.is_bottommost_for_key(1, b"c"));
        assert!(!v.is_bottommost_for_key(1, b"m"));
        assert!(v.is_bottommost_for_key(3, b"m"));
    }
}

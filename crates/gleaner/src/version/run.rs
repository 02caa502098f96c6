//! Sorted runs: the unit a level of the index tree is made of.
//!
//! A sorted run is a set of key tables whose user-key ranges are sorted and disjoint, so at most
//! one of its tables can hold a given key. Each L0 table is a run of its own (flushes overlap);
//! under leveled compaction every deeper level is one run; under tiered compaction a level holds
//! several runs, newest first, which may overlap each other in keys but never in sequence
//! numbers (docs/architecture.md, "Sorted runs").

use std::sync::Arc;

use super::file_meta::FileMetaData;
use crate::key::{self, SeqNo};

/// Identifies a sorted run within its level. For a run of L1 and deeper it is the number the
/// manifest records with each of its tables (0 for a run recorded before runs were: a manifest
/// of an older build has one run per level); for an L0 table, a run of its own, it is the
/// table's number.
pub type RunId = u64;

/// Key tables with sorted, disjoint user-key ranges, and the sequence numbers they span.
#[derive(Debug, Clone)]
pub(crate) struct SortedRun {
    id: RunId,
    files: Vec<Arc<FileMetaData>>,
    smallest_seq: SeqNo,
    largest_seq: SeqNo,
}

impl SortedRun {
    /// A run of `files`, which are put in key order (their disjointness is checked by the
    /// version, which reports it as corruption).
    pub(crate) fn new(id: RunId, mut files: Vec<Arc<FileMetaData>>) -> Self {
        files.sort_by(|a, b| key::compare_internal(&a.smallest, &b.smallest));
        let smallest_seq = files.iter().map(|f| f.smallest_seq).min().unwrap_or(0);
        let largest_seq = files.iter().map(|f| f.largest_seq).max().unwrap_or(0);
        SortedRun {
            id,
            files,
            smallest_seq,
            largest_seq,
        }
    }

    /// The run's id within its level.
    pub(crate) fn id(&self) -> RunId {
        self.id
    }

    /// Its tables, in key order.
    pub(crate) fn files(&self) -> &[Arc<FileMetaData>] {
        &self.files
    }

    /// Smallest sequence number of any of its tables.
    pub(crate) fn smallest_seq(&self) -> SeqNo {
        self.smallest_seq
    }

    /// Largest sequence number of any of its tables.
    pub(crate) fn largest_seq(&self) -> SeqNo {
        self.largest_seq
    }

    /// Bytes of its tables.
    pub(crate) fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.file_size).sum()
    }

    /// Size the compaction strategies rank it by: the sum of its tables'
    /// [`FileMetaData::compensated_size`].
    pub(crate) fn compensated_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.compensated_size()).sum()
    }

    /// The table whose user-key range contains `user_key`, if any (at most one does).
    pub(crate) fn table_for(&self, user_key: &[u8]) -> Option<&Arc<FileMetaData>> {
        let i = self.files.partition_point(|f| f.ends_before(user_key));
        self.files
            .get(i)
            .filter(|f| f.smallest_user_key() <= user_key)
    }

    /// Its tables whose user-key range intersects `[lo, hi]` (inclusive; `None` is unbounded).
    pub(crate) fn overlapping(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.files
            .iter()
            .filter(move |f| f.overlaps_user_range(lo, hi))
    }

    /// Whether a table of the run intersects `[lo, hi]`: a binary search, since the tables'
    /// extents are sorted and disjoint (the first not ending before `lo` starts first).
    pub(crate) fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        let i = lo.map_or(0, |lo| self.files.partition_point(|f| f.ends_before(lo)));
        self.files
            .get(i)
            .is_some_and(|f| hi.is_none_or(|hi| f.smallest_user_key() <= hi))
    }

    pub(super) fn files_mut(&mut self) -> &mut Vec<Arc<FileMetaData>> {
        &mut self.files
    }

    /// Sorts the tables and recomputes the sequence range after `files_mut` changed them.
    pub(super) fn refresh(self) -> Self {
        SortedRun::new(self.id, self.files)
    }

    /// Checks that the tables' user-key ranges are disjoint; `level` names the level in the
    /// message.
    pub(super) fn check_disjoint(&self, level: usize) -> Result<(), String> {
        for w in self.files.windows(2) {
            // A table whose extent ends at a range tombstone's (exclusive) end may share that
            // user key with the next table's first.
            if !w[0].ends_before(w[1].smallest_user_key()) {
                return Err(format!(
                    "tables {} and {} overlap in run {} of level {level}",
                    w[0].number, w[1].number, self.id
                ));
            }
        }
        Ok(())
    }
}

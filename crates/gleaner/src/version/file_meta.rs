//! Metadata of one key table in a version, and its lifetime: a table removed from the current
//! version is deleted from disk only when the last version, iterator or job that references
//! its metadata lets go.

use std::sync::{Arc, OnceLock};

use crate::key::{self, SeqNo};

/// The kinds of table whose lifetime versions track.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A key table (`.sst`).
    KeyTable,
    /// A value table (`.vst`).
    ValueTable,
    /// A drop file (`.vdk`: drop keys).
    DropFile,
}

/// Receives the tables that are no longer referenced by anything.
pub trait ObsoleteFileSink: Send + Sync {
    /// Called exactly once per table, from whichever thread drops the last reference.
    /// Implementations must not block or do I/O here; they queue the file for deletion.
    fn file_unreferenced(&self, kind: FileKind, number: u64);
}

/// What the manifest records about one key table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Smallest internal key in the table.
    pub smallest: Vec<u8>,
    /// Largest internal key in the table.
    pub largest: Vec<u8>,
    /// Smallest sequence number in the table.
    pub smallest_seq: SeqNo,
    /// Largest sequence number in the table.
    pub largest_seq: SeqNo,
    /// Number of entries.
    pub num_entries: u64,
    /// Number of deletion entries.
    pub num_deletions: u64,
    /// Handles the table holds, per value table they name.
    pub dependence: Vec<super::value_set::Dependence>,
    /// Of those handles, aliases (handle updates on read). Only a table that
    /// holds some can hold an alias of a record a compaction elsewhere relocates, so relocation looks only into those (`compaction/relocate.rs`).
    pub aliases: u64,
    /// Range tombstones in the table's range-deletion block. A table holding some has an
    /// extent that covers them: its smallest key may be, and its largest key may be, a
    /// [`key::range_bound`] (the largest one then excludes its user key). Readers load the
    /// tombstones of only the tables that hold some.
    pub range_deletions: u64,
}

impl TableMeta {
    /// User key of the smallest entry.
    pub fn smallest_user_key(&self) -> &[u8] {
        key::user_key(&self.smallest)
    }

    /// User key of the largest entry.
    pub fn largest_user_key(&self) -> &[u8] {
        key::user_key(&self.largest)
    }

    /// True when the table's extent ends before `user_key`: its largest key's user key is
    /// smaller, or equal and the largest key is a range tombstone's exclusive end
    /// ([`key::range_bound`]).
    pub fn ends_before(&self, user_key: &[u8]) -> bool {
        match self.largest_user_key().cmp(user_key) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => key::is_range_bound(&self.largest),
            std::cmp::Ordering::Greater => false,
        }
    }

    /// True when the table's user-key range intersects `[lo, hi]` (`None` = unbounded).
    pub fn overlaps_user_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        let before = hi.is_some_and(|hi| self.smallest_user_key() > hi);
        let after = lo.is_some_and(|lo| self.ends_before(lo));
        !before && !after
    }
}

/// A key table in a version: its [`TableMeta`] plus lifetime tracking. Shared as
/// `Arc<FileMetaData>` by every version, iterator and job that uses the table; it derefs to the
/// metadata.
pub struct FileMetaData {
    meta: TableMeta,
    obsolete: OnceLock<Arc<dyn ObsoleteFileSink>>,
}

impl std::ops::Deref for FileMetaData {
    type Target = TableMeta;

    fn deref(&self) -> &TableMeta {
        &self.meta
    }
}

impl std::fmt::Debug for FileMetaData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMetaData")
            .field("number", &self.number)
            .field("file_size", &self.file_size)
            .field(
                "smallest",
                &String::from_utf8_lossy(self.smallest_user_key()),
            )
            .field("largest", &String::from_utf8_lossy(self.largest_user_key()))
            .field("seqs", &(self.smallest_seq..=self.largest_seq))
            .finish()
    }
}

impl FileMetaData {
    /// A live (not obsolete) table.
    pub fn new(meta: TableMeta) -> Self {
        FileMetaData {
            meta,
            obsolete: OnceLock::new(),
        }
    }

    /// The recorded metadata.
    pub fn meta(&self) -> &TableMeta {
        &self.meta
    }

    /// Size the compaction strategies rank tables and runs by. Compensation for value bytes a table
    /// pins (DESIGN.md, "Hidden garbage and compaction priority") plugs in here.
    pub fn compensated_size(&self) -> u64 {
        self.file_size
    }

    /// Marks the table as removed from the current version by a durable manifest edit; when the
    /// last reference drops, `sink` learns the file can be deleted.
    pub fn mark_obsolete(&self, sink: Arc<dyn ObsoleteFileSink>) {
        // A second call would mean the same file was removed twice; the first sink wins.
        let _ = self.obsolete.set(sink);
    }
}

impl Drop for FileMetaData {
    fn drop(&mut self) {
        if let Some(sink) = self.obsolete.get() {
            sink.file_unreferenced(FileKind::KeyTable, self.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Collect(Mutex<Vec<u64>>);
    impl ObsoleteFileSink for Collect {
        fn file_unreferenced(&self, _kind: FileKind, number: u64) {
            self.0.lock().push(number);
        }
    }

    fn meta(n: u64, lo: &str, hi: &str) -> Arc<FileMetaData> {
        Arc::new(FileMetaData::new(TableMeta {
            number: n,
            file_size: 100,
            smallest: make_internal_key(lo.as_bytes(), 5, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
            smallest_seq: 1,
            largest_seq: 5,
            num_entries: 2,
            num_deletions: 0,
            dependence: Vec::new(),
            aliases: 0,
            range_deletions: 0,
        }))
    }

    #[test]
    fn deleted_only_after_the_last_reference_and_only_if_obsolete() {
        let sink = Arc::new(Collect::default());
        let a = meta(1, "a", "c");
        let held = Arc::clone(&a);
        a.mark_obsolete(sink.clone());
        drop(a);
        assert!(sink.0.lock().is_empty(), "still referenced");
        drop(held);
        assert_eq!(*sink.0.lock(), vec![1]);
        drop(meta(2, "a", "b"));
        assert_eq!(*sink.0.lock(), vec![1], "live files are never reported");
    }

    #[test]
    fn user_range_overlap() {
        let m = meta(1, "c", "f");
        assert!(m.overlaps_user_range(None, None));
        assert!(m.overlaps_user_range(Some(b"a"), Some(b"c")));
        assert!(m.overlaps_user_range(Some(b"f"), None));
        assert!(!m.overlaps_user_range(Some(b"g"), None));
        assert!(!m.overlaps_user_range(None, Some(b"b")));
    }

    #[test]
    fn a_range_tombstone_end_is_exclusive() {
        let mut t = meta(1, "c", "f").meta().clone();
        t.largest = key::range_bound(b"f");
        let m = FileMetaData::new(t);
        assert!(m.ends_before(b"f"), "the tombstone's end is not covered");
        assert!(!m.ends_before(b"e\xff"));
        assert!(!m.overlaps_user_range(Some(b"f"), None));
        assert!(m.overlaps_user_range(Some(b"e"), Some(b"f")));
        let plain = meta(2, "c", "f");
        assert!(!plain.ends_before(b"f"), "a point key's bound is inclusive");
        assert!(plain.ends_before(b"f\x00"));
    }
}

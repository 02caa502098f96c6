//! Which version of a key a GC validity check compares a record with, and when a known newer version may
//! answer instead of the index tree. Pure decisions over sequence numbers, so they are tested
//! without a database.
//!
//! A record `(k, s)` is garbage when no reader can reach it: no current read (they see the
//! newest version of `k`) and no snapshot. A snapshot at `x` reads the newest version at or
//! below `x`, so it can reach the record only if `s <= x`; when a newer version `S > s` exists
//! it can only if `s <= x < S`. Without such a snapshot a record whose version is shadowed is
//! garbage even while the index tree still holds that version ("hidden garbage"): GC reclaims
//! it early, and the stale handle that remains in the tree is never resolved (see docs/gc.md,
//! "Reclaiming shadowed versions early").
//!
//! The decisions are made against one pinned version of the index tree and the snapshots live
//! once it was pinned. A snapshot taken later reads at a sequence number at least as high as
//! every version in the pinned tree, so it cannot fall below one of them.

use crate::key::SeqNo;

/// The facts a GC job's validity checks are decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidityContext {
    /// Sequence numbers of the live snapshots, ascending.
    snapshots: Vec<SeqNo>,
    /// The highest sequence number in the pinned tree's key tables: every version at or below
    /// it that a cache of dropped keys names is in a key table, so it survives a crash (a version
    /// still in a memtable may be lost with an unsynced WAL tail).
    durable_seq: SeqNo,
}

/// How to check a record against the index tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeCheck {
    /// Look up the key's newest version: the record is live only if it is that version.
    Newest,
    /// A snapshot may read the record at its own sequence number: the record is live while the
    /// tree holds its version at all.
    Present,
}

impl ValidityContext {
    /// The context of a job that pinned a tree whose key tables hold sequence numbers up to
    /// `durable_seq`, with `snapshots` (any order) live once the tree was pinned.
    pub fn new(mut snapshots: Vec<SeqNo>, durable_seq: SeqNo) -> Self {
        #[cfg(test)]
        if test_hook::IGNORE_SNAPSHOTS.with(std::cell::Cell::get) {
            snapshots.clear();
        }
        snapshots.sort_unstable();
        snapshots.dedup();
        ValidityContext {
            snapshots,
            durable_seq,
        }
    }

    /// True when some snapshot reads at a sequence number in `lo..hi`.
    fn snapshot_in(&self, lo: SeqNo, hi: SeqNo) -> bool {
        let first = self.snapshots.partition_point(|&x| x < lo);
        self.snapshots.get(first).is_some_and(|&x| x < hi)
    }

    /// The newest snapshot reading at a sequence number in `lo..hi`, if any: after a lookup
    /// found the version at `hi` (read by the present and by every snapshot at or above it),
    /// the next reader down that may read another version of a record written at `lo`.
    pub fn newest_snapshot_in(&self, lo: SeqNo, hi: SeqNo) -> Option<SeqNo> {
        let end = self.snapshots.partition_point(|&x| x < hi);
        self.snapshots[..end].last().copied().filter(|&x| x >= lo)
    }

    /// True when a newer version of the record's key, known to be at sequence number `newest`
    /// (a cache of recently dropped keys, say), proves the record at `seq` garbage without any
    /// lookup: the newer version exists, it is in a key table (so it survives a crash), and no
    /// snapshot reads between the two.
    pub fn dead_by_newer_version(&self, seq: SeqNo, newest: Option<SeqNo>) -> bool {
        newest.is_some_and(|s| s > seq && s <= self.durable_seq && !self.snapshot_in(seq, s))
    }
}

/// A fault for the crate's own tests: GC jobs that ignore the live snapshots, so a test can make
/// GC wrongly reclaim a record a snapshot still reads and prove that the garbage recount
/// (`db/verify.rs`) reports it. Only in `cfg(test)` builds; per thread, so it affects only GC
/// jobs run on the thread that set it (`Db::run_gc` with `gc_threads` 0).
#[cfg(test)]
pub(crate) mod test_hook {
    use std::cell::Cell;

    thread_local! {
        pub(super) static IGNORE_SNAPSHOTS: Cell<bool> = const { Cell::new(false) };
    }

    /// While alive, GC jobs started on this thread see no snapshots.
    pub(crate) struct IgnoreSnapshots(());

    impl IgnoreSnapshots {
        pub(crate) fn new() -> Self {
            IGNORE_SNAPSHOTS.with(|c| c.set(true));
            IgnoreSnapshots(())
        }
    }

    impl Drop for IgnoreSnapshots {
        fn drop(&mut self) {
            IGNORE_SNAPSHOTS.with(|c| c.set(false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_snapshots_only_the_present_reads() {
        let ctx = ValidityContext::new(Vec::new(), 100);
        assert_eq!(ctx.newest_snapshot_in(5, SeqNo::MAX), None);
        assert_eq!(ctx.newest_snapshot_in(0, 100), None);
    }

    /// After the version at `hi` was found, the next reader is the newest snapshot below it,
    /// and only one at or above the record's own sequence number can read the record.
    #[test]
    fn the_next_reader_down_is_the_newest_snapshot_below_the_version_found() {
        let ctx = ValidityContext::new(vec![50, 20], 100);
        assert_eq!(ctx.newest_snapshot_in(10, SeqNo::MAX), Some(50));
        assert_eq!(
            ctx.newest_snapshot_in(10, 50),
            Some(20),
            "50 reads the version at 50"
        );
        assert_eq!(ctx.newest_snapshot_in(10, 51), Some(50));
        assert_eq!(
            ctx.newest_snapshot_in(20, 30),
            Some(20),
            "a snapshot at the record reads it"
        );
        assert_eq!(
            ctx.newest_snapshot_in(21, 50),
            None,
            "20 is older than the record"
        );
        assert_eq!(ctx.newest_snapshot_in(10, 20), None);
    }

    #[test]
    fn the_drop_cache_answers_only_for_newer_durable_versions_no_snapshot_separates() {
        let ctx = ValidityContext::new(vec![30], 100);
        // Nothing cached, or the cached version is the record itself or older.
        assert!(!ctx.dead_by_newer_version(10, None));
        assert!(!ctx.dead_by_newer_version(10, Some(10)));
        assert!(!ctx.dead_by_newer_version(10, Some(9)));
        // Newer and durable, no snapshot in [10, 25).
        assert!(ctx.dead_by_newer_version(10, Some(25)));
        // The snapshot at 30 reads the record at 10 while the newer version is 40.
        assert!(!ctx.dead_by_newer_version(10, Some(40)));
        // The newer version may still be only in a memtable.
        assert!(!ctx.dead_by_newer_version(40, Some(101)));
        assert!(ctx.dead_by_newer_version(40, Some(100)));
        // A snapshot exactly at the record's sequence number reads it.
        assert!(!ctx.dead_by_newer_version(30, Some(35)));
        // A snapshot exactly at the newer version reads the newer version.
        assert!(ctx.dead_by_newer_version(20, Some(30)));
    }
}

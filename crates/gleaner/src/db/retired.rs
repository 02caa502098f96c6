//! Retired value tables (a write-back commit's victims) leave the disk: released once no reader
//! can reach them, and, when only the active memtable keeps one, that memtable sealed early.

use std::time::{Duration, Instant};

use super::{Counters, DbInner};
use crate::error::Result;
use crate::key::SeqNo;
use crate::version::VersionEdit;

/// How long a GC worker lets the active memtable alone hold back a retired table's release
/// before it seals that memtable. Writes seal it sooner whenever they flow (a memtable fills
/// in tens of milliseconds at the benchmark's rates); the wait only matters while they do not.
const RETIRED_SEAL_WAIT: Duration = Duration::from_millis(200);

impl DbInner {
    /// Whether the current version has retired tables (read without a lock).
    fn has_retired(&self) -> bool {
        !self
            .super_version
            .load()
            .version
            .values()
            .retired()
            .is_empty()
    }

    /// Releases the retired value tables (write-back commits) no reader can reach any more: every
    /// version naming one is shadowed at or below its obsolete sequence number, so it is
    /// unreachable once every snapshot is above that number and every version up to it is in a
    /// key table (so that the garbage recount and `gleaner check`, which see key tables, find
    /// the shadowing version beside each handle naming a released table). Called after flushes
    /// and GC jobs, and by idle GC workers, which see snapshots go.
    pub(super) fn release_retired(&self) -> Result<()> {
        // Most policies never retire a table: do not take the manifest lock for nothing.
        if !self.has_retired() {
            return Ok(());
        }
        let mut versions = self.versions.lock();
        let releasable: Vec<u64> = {
            let retired = versions.current().values().retired();
            if retired.is_empty() {
                return Ok(());
            }
            let oldest_snapshot = self.snapshots.oldest();
            let st = self.state.lock();
            let unflushed_from = std::iter::once(&st.mem)
                .chain(st.imm.iter())
                .filter_map(|m| m.smallest_seq())
                .min();
            retired
                .iter()
                .filter(|(_, r)| {
                    released_by_snapshots(oldest_snapshot, r.obsolete_seq)
                        && unflushed_from.is_none_or(|u| u > r.obsolete_seq)
                })
                .map(|(n, _)| *n)
                .collect()
        };
        if releasable.is_empty() {
            return Ok(());
        }
        self.check_open()?;
        let n = releasable.len() as u64;
        let edit = VersionEdit {
            released_value_tables: releasable,
            ..Default::default()
        };
        self.apply_gc_edit(&mut versions, edit, None)?;
        drop(versions);
        Counters::add(&self.counters.value_tables_released, n);
        self.purge_obsolete_files();
        Ok(())
    }

    /// Seals the active memtable when, for [`RETIRED_SEAL_WAIT`], it alone has kept a retired
    /// table from release (the write-backs of the job that retired it are in it; no snapshot and
    /// no older memtable holds the table). Writes seal a memtable when it fills, but while they
    /// pause — writers waiting for disk space, a phase of reads — nothing would, and the
    /// victims' bytes would stay on disk however long; the early flush this costs is one small
    /// key table. Called by background GC workers each time they look for work (never with
    /// inline work, whose schedule must not depend on the clock: there the next flush releases
    /// it). Returns how soon to look again while a table is held.
    pub(super) fn seal_for_retired(&self) -> Option<Duration> {
        // Most policies never retire a table: do not take the state lock for nothing.
        if !self.has_retired() {
            return None;
        }
        let oldest_snapshot = self.snapshots.oldest();
        let mut st = self.state.lock();
        let retired = st.version.values().retired();
        let older_from = st.imm.iter().filter_map(|m| m.smallest_seq()).min();
        let held = st.mem.smallest_seq().is_some_and(|active_from| {
            retired.values().any(|r| {
                released_by_snapshots(oldest_snapshot, r.obsolete_seq)
                    && older_from.is_none_or(|u| u > r.obsolete_seq)
                    && active_from <= r.obsolete_seq
            })
        });
        if !held || st.shutting_down || st.bg_error.is_some() {
            st.retired_hold = None;
            return None;
        }
        let active = st.mem.wal_number();
        let now = Instant::now();
        let since = match st.retired_hold {
            Some((wal, since)) if wal == active => since,
            _ => {
                st.retired_hold = Some((active, now));
                now
            }
        };
        let waited = now.saturating_duration_since(since);
        if waited < RETIRED_SEAL_WAIT {
            return Some(RETIRED_SEAL_WAIT - waited);
        }
        st.retired_hold = None;
        drop(st);
        // Sealing is a write of nothing: it waits, as a writer would, if the immutable
        // memtables are at their limit. A failure is the background error already (or the
        // database is closing); the release then waits for the next open.
        if self.write_impl(None, false).is_ok() {
            Counters::add(&self.counters.memtables_sealed_for_release, 1);
        }
        None
    }
}

/// Whether every live snapshot (the oldest one, if any) is above `obsolete_seq`, so none reads
/// a version at or below it.
fn released_by_snapshots(oldest_snapshot: Option<SeqNo>, obsolete_seq: SeqNo) -> bool {
    oldest_snapshot.is_none_or(|s| s > obsolete_seq)
}

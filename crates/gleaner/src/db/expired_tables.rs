//! Value tables that expired whole: every record's version expires (the table's `max_expiry`,
//! manifest field 16), and the latest expiry has passed for every reader that can read a record
//! of the table. Such a table holds nothing readable, so it leaves the live set in one manifest
//! edit, without a GC read; its garbage account goes with it, and the handles key tables still
//! hold into it are those of expired versions, which compaction drops without counting
//! anything (`compaction/garbage.rs`, "reclaimed early"). docs/gc.md, "Expiry-grouped value
//! tables".

use super::{Counters, DbInner};
use crate::error::Result;
use crate::expiry::ReaderTimes;
use crate::version::{ValueSet, VersionEdit};

/// Most tables one edit deletes: bounds the edit (the next call takes the rest).
const MAX_TABLES_PER_EDIT: usize = 1024;

/// The live tables of `values` whose every record has expired for every reader that can read
/// it, among those `skip` does not exclude (claimed by a GC job, pinned by an alias, or awaiting
/// a write-back), at most [`MAX_TABLES_PER_EDIT`]. Pure, so it is tested without I/O.
pub(crate) fn expired_tables(
    values: &ValueSet,
    readers: &ReaderTimes,
    skip: impl Fn(u64) -> bool,
) -> Vec<u64> {
    values
        .tables()
        .filter(|t| {
            // Every record was written at or above the table's smallest sequence number, and so
            // was every version naming one: no reader below it can read the table.
            t.max_expiry.is_some()
                && readers.expired_for_all(t.smallest_seq, t.max_expiry)
                && !values.awaiting_write_back().contains(&t.number)
                && !skip(t.number)
        })
        .map(|t| t.number)
        .take(MAX_TABLES_PER_EDIT)
        .collect()
}

impl DbInner {
    /// Deletes the value tables that expired whole (see the module documentation) in one edit
    /// that records the time they were judged at (manifest field 17). Called where retired
    /// tables are released: after flushes and GC jobs, by idle GC workers, and by `run_gc`.
    ///
    /// Errors: writing the manifest fails (the database is then read-only).
    pub(super) fn drop_expired_tables(&self) -> Result<()> {
        // Most databases hold no expiring table: do not take the manifest lock for nothing.
        let any = self
            .super_version
            .load()
            .version
            .values()
            .tables()
            .any(|t| t.max_expiry.is_some());
        if !any {
            return Ok(());
        }
        let mut versions = self.versions.lock();
        let readers = self.snapshots.reader_times(&self.time);
        let expired = {
            let mut st = self.state.lock();
            let expired = expired_tables(versions.current().values(), &readers, |n| {
                st.gc_claimed.contains(&n) || st.alias_pins.values().any(|p| p.contains(&n))
            });
            // Claimed until the edit is installed: no GC job may pick a table this edit
            // deletes (its own edit would then delete a table that is gone).
            st.gc_claimed.extend(expired.iter().copied());
            expired
        };
        if expired.is_empty() {
            return Ok(());
        }
        let n = expired.len() as u64;
        let edit = VersionEdit {
            deleted_value_tables: expired.clone(),
            time_floor: Some(readers.now()),
            ..Default::default()
        };
        let applied = self
            .check_open()
            .and_then(|()| self.apply_gc_edit(&mut versions, edit, None));
        {
            let mut st = self.state.lock();
            for t in &expired {
                st.gc_claimed.remove(t);
                // Drops compactions kept for a claim while it lasted: the table is gone (or
                // stays, unclaimed, if the edit failed and they were counted there already).
                st.late_drops.remove(t);
            }
        }
        applied?;
        drop(versions);
        Counters::add(&self.counters.value_tables_expired, n);
        self.purge_obsolete_files();
        Ok(())
    }

    /// Releases the retired tables no reader can reach and deletes the tables that expired
    /// whole. A failure to log either is the background error already (a failed manifest
    /// write); closing leaves them for later.
    pub(super) fn release_unreachable_tables(&self) {
        let _ = self.release_retired();
        let _ = self.drop_expired_tables();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{ValueTableMeta, VersionEdit};

    fn table(number: u64, seqs: (u64, u64), max_expiry: Option<u64>) -> ValueTableMeta {
        ValueTableMeta {
            number,
            file_size: 100,
            records: 2,
            record_bytes: 80,
            smallest_key: b"a".to_vec(),
            largest_key: b"z".to_vec(),
            smallest_seq: seqs.0,
            largest_seq: seqs.1,
            class: 0,
            policy_meta: None,
            max_expiry,
        }
    }

    #[test]
    fn a_table_expires_whole_once_every_reader_that_can_read_it_is_past_its_expiry() {
        let edit = VersionEdit {
            new_value_tables: vec![
                table(1, (10, 20), Some(500)),
                table(2, (30, 40), Some(500)),
                table(3, (30, 40), None),
                table(4, (30, 40), Some(900)),
                table(5, (50, 60), Some(100)),
            ],
            ..Default::default()
        };
        let version = crate::version::Version::new(2)
            .apply(&edit, "t", 0)
            .expect("apply");
        let values = version.values();
        // At 600: a snapshot at 25 taken at 400 reads table 1 (written from 10 on), not 2.
        let readers = ReaderTimes::new(vec![(25, 400)], 600);
        assert_eq!(expired_tables(values, &readers, |_| false), vec![2, 5]);
        assert_eq!(
            expired_tables(values, &readers, |n| n == 2),
            vec![5],
            "a claimed table stays"
        );
        // Without the snapshot, and later: 1 too; 3 never (a record does not expire).
        let readers = ReaderTimes::at(900);
        assert_eq!(
            expired_tables(values, &readers, |_| false),
            vec![1, 2, 4, 5]
        );
        assert!(expired_tables(values, &ReaderTimes::at(99), |_| false).is_empty());
    }
}

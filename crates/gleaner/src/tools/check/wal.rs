//! Write-ahead logs: every record read and decoded as recovery would.

use super::handles::{HandleCheck, TableHandles};
use super::{Checker, Problem};
use crate::batch::{BatchOp, WriteBatch};
use crate::error::Result;
use crate::filename::{value_table_file_name, wal_file_name};
use crate::io::IoClass;
use crate::options::WalRecoveryMode;
use crate::value::StoredHandle;
use crate::value::segment::{ScannedSegment, scan_segment};
use crate::version::ValueSet;
use crate::wal::{Cut, CutKind, check_cut_unsynced, decode_wal_record, wal_reader, wal_sync_point};

impl Checker {
    pub(super) fn check_wal(&mut self, number: u64) {
        let name = wal_file_name(number);
        if let Err(e) = self.verify_wal(&name) {
            self.problem(Problem::from_error(&name, e));
        }
    }

    /// Resolves the handles that the WAL's handle puts (GC write-backs) hold, as recovery would
    /// replay them, so the garbage recount counts their references. Damage stops the walk; it
    /// is reported when the WAL itself is checked.
    pub(super) fn count_wal_handles(&mut self, number: u64, handles: &mut HandleCheck<'_>) {
        let name = wal_file_name(number);
        let mut found = TableHandles::default();
        let _ = (|| -> Result<()> {
            let mut reader = wal_reader(
                self.reader(&name)?,
                name.clone(),
                IoClass::Other,
                WalRecoveryMode::TolerateCorruptedTail,
            )?;
            let mut entry = 0u64;
            self.log_chain.start_log(number);
            while let Some((offset, record)) = reader.read_record()? {
                let point = wal_sync_point(&record);
                let Some(batch) = decode_wal_record(record, &name, offset)? else {
                    if self.log_cut_synced(number, point) {
                        return Ok(());
                    }
                    continue;
                };
                // As recovery: the chain is followed until the first cut, and not after.
                if self.log_cut.is_none() {
                    match self.log_chain.lost_before(number, offset, batch.sequence()) {
                        Ok(None) => {}
                        Ok(Some(lost)) => {
                            self.warning(
                                wal_file_name(lost.log),
                                None,
                                format!(
                                    "lost writes before sequence {} at its unsynced tail (a \
                                     power loss): recovery drops every write logged after them",
                                    batch.sequence()
                                ),
                            );
                            self.log_cut = Some(lost);
                        }
                        Err(e) => {
                            // Recovery fails on it.
                            self.problem(Problem::from_error(&name, e));
                            return Ok(());
                        }
                    }
                }
                if self.log_cut.is_some() {
                    if self.log_cut_synced(number, point) {
                        return Ok(());
                    }
                    continue;
                }
                // Values written once: every one must be whole in its segment for recovery to
                // replay the record (docs/format.md, "In the write-ahead log").
                if !self.segment_values_whole(handles.values(), &batch, (number, offset)) {
                    continue;
                }
                let count = u64::from(batch.count());
                self.log_chain.replayed(batch.sequence() + count);
                for (seq, op) in (batch.sequence()..).zip(batch.iter().flatten()) {
                    if let BatchOp::PutHandle { key, handle } = op {
                        if segment_value(handles.values(), handle).is_some() {
                            continue;
                        }
                        let h = found.note(&name, entry, key, seq, handle);
                        if let Some(stored) = h {
                            let stored: StoredHandle = stored;
                            handles.resolve(entry, key, seq, stored, &mut found);
                        }
                        entry += 1;
                    }
                }
            }
            Ok(())
        })();
        self.report_table_handles(&name, None, found, false);
    }

    /// Whether the record of log `wal` with sync point `point`, read after the cut, shows that
    /// what was lost there had been synced: then recovery fails (as `db/open.rs` checks), a
    /// problem reported here, and the walk stops.
    fn log_cut_synced(&mut self, wal: u64, point: Option<u64>) -> bool {
        let Some(cut) = &self.log_cut else {
            return false;
        };
        match check_cut_unsynced(cut, wal, point, WalRecoveryMode::TolerateCorruptedTail) {
            Ok(()) => false,
            Err(e) => {
                self.problem(Problem::from_error(&wal_file_name(cut.log), e));
                true
            }
        }
    }

    /// Whether every value `batch` (logged in WAL `wal` at `offset`) appended to a value segment
    /// is whole there, as recovery checks before it replays the record: the segments are
    /// scanned once each (`Checker::open_segments`). A torn value is a warning (recovery drops
    /// this record and every later one), and stops the walk of the logs; a scan that fails is a
    /// problem.
    fn segment_values_whole(
        &mut self,
        values: &ValueSet,
        batch: &WriteBatch,
        (wal, offset): (u64, u64),
    ) -> bool {
        let name = wal_file_name(wal);
        for (seq, op) in (batch.sequence()..).zip(batch.iter().flatten()) {
            let BatchOp::PutHandle { key, handle } = op else {
                continue;
            };
            let Some(stored) = segment_value(values, handle) else {
                continue;
            };
            let l = stored.location;
            if !self.open_segments.contains_key(&l.file_number) {
                let seg_name = value_table_file_name(l.file_number);
                let missing = matches!(self.fs.path_kind(&self.dir.join(&seg_name)), Ok(None));
                let scanned = if missing {
                    // Lost with its unsynced directory entry: nothing in it (a torn write,
                    // or damage if a later record shows the write was synced).
                    Ok(ScannedSegment::default())
                } else {
                    self.reader(&seg_name).and_then(|r| {
                        let size = r.size()?;
                        scan_segment(&seg_name, size, |at, len| {
                            r.read_vec(at, len, IoClass::Other)
                        })
                    })
                };
                let scanned = match scanned {
                    Ok(s) => Some(s),
                    Err(e) => {
                        self.problem(Problem::from_error(&seg_name, e));
                        None
                    }
                };
                self.open_segments.insert(l.file_number, scanned);
            }
            let Some(seg) = &self.open_segments[&l.file_number] else {
                return false;
            };
            if !seg.holds(key, seq, l.offset, l.len) {
                self.log_cut = Some(Cut {
                    log: wal,
                    offset,
                    kind: CutKind::TornValue,
                });
                self.warning(
                    name.clone(),
                    Some(offset),
                    format!(
                        "the value of the write at sequence {seq} is not whole in value segment \
                         {} (a torn write): recovery drops this record and every one after it",
                        value_table_file_name(l.file_number)
                    ),
                );
                return false;
            }
            self.report.open_segment_values += 1;
        }
        true
    }

    /// Reads every record of a WAL as recovery would (tolerating only a torn tail) and decodes
    /// its batch.
    fn verify_wal(&mut self, name: &str) -> Result<()> {
        let mut reader = wal_reader(
            self.reader(name)?,
            name.to_string(),
            IoClass::Other,
            WalRecoveryMode::TolerateCorruptedTail,
        )?;
        let result = (|| {
            while let Some((offset, record)) = reader.read_record()? {
                decode_wal_record(record, name, offset)?;
                self.report.wal_records_checked += 1;
            }
            Ok(())
        })();
        // Regions cut before a failure are still worth reporting.
        for region in reader.dropped() {
            self.report.warnings.push(Problem::new(
                name,
                Some(region.offset),
                format!(
                    "torn tail of {} bytes ({}); recovery drops it",
                    region.len, region.reason
                ),
            ));
        }
        result
    }
}

/// The handle `encoded` of a value written once into a value segment still open (no record
/// sequence number of its own, no alias, a table `values` does not hold); `None` for any other
/// handle (a GC write-back, an alias), or one that does not decode.
fn segment_value(values: &ValueSet, encoded: &[u8]) -> Option<StoredHandle> {
    let h = StoredHandle::decode(encoded, "", 0).ok()?;
    (h.record_seq.is_none() && !h.alias && values.readable(h.location.file_number).is_none())
        .then_some(h)
}

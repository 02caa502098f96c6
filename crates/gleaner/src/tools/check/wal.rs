//! Write-ahead logs: every record read and decoded as recovery would.

use super::handles::{HandleCheck, TableHandles};
use super::{Checker, Problem};
use crate::batch::BatchOp;
use crate::error::Result;
use crate::filename::wal_file_name;
use crate::io::IoClass;
use crate::options::WalRecoveryMode;
use crate::value::StoredHandle;
use crate::wal::{decode_wal_record, wal_reader};

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
            while let Some((offset, record)) = reader.read_record()? {
                let Some(batch) = decode_wal_record(record, &name, offset)? else {
                    continue;
                };
                for (seq, op) in (batch.sequence()..).zip(batch.iter().flatten()) {
                    if let BatchOp::PutHandle { key, handle } = op {
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

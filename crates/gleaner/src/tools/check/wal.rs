//! Write-ahead logs: every record read and decoded as recovery would.

use super::{Checker, Problem};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::wal_file_name;
use crate::io::IoClass;
use crate::key::MAX_SEQUENCE;
use crate::options::{MAX_BATCH_SIZE_LIMIT, WalRecoveryMode};
use crate::wal::LogReader;

impl Checker {
    pub(super) fn check_wal(&mut self, number: u64) {
        let name = wal_file_name(number);
        if let Err(e) = self.verify_wal(&name) {
            self.problem(Problem::from_error(&name, e));
        }
    }

    /// Reads every record of a WAL as recovery would (tolerating only a torn tail) and decodes
    /// its batch.
    fn verify_wal(&mut self, name: &str) -> Result<()> {
        let mut reader = LogReader::new(
            self.reader(name)?,
            name.to_string(),
            IoClass::Other,
            WalRecoveryMode::TolerateCorruptedTail,
            MAX_BATCH_SIZE_LIMIT as usize,
        )?;
        let result = (|| {
            while let Some((offset, record)) = reader.read_record()? {
                let batch = WriteBatch::decode(record, name, offset)?;
                let first = batch.sequence();
                if first == 0 || first.saturating_add(u64::from(batch.count())) > MAX_SEQUENCE {
                    return Err(Error::corruption(
                        name,
                        offset,
                        format!("batch sequence {first} out of range"),
                    ));
                }
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

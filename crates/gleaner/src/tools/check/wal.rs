//! Write-ahead logs: every record read and decoded as recovery would.

use super::{Checker, Problem};
use crate::error::Result;
use crate::filename::wal_file_name;
use crate::io::IoClass;
use crate::options::WalRecoveryMode;
use crate::wal::{decode_wal_record, wal_reader};

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
